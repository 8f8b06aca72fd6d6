package quorum

import "testing"

func TestAddBeforePromoting(t *testing.T) {
	for _, tc := range []struct {
		name     string
		learners []bool
		counted  int
		desired  int
		max      int
		canAdd   bool
		want     bool
	}{
		{"started learner, slot free, more wanted: add first", []bool{true}, 2, 3, 2, true, true},
		{"the last member wanted is there: promote", []bool{true}, 3, 3, 2, true, false},
		{"scaled down meanwhile: promote", []bool{true}, 3, 1, 2, true, false},
		{"etcd 3.5 takes one learner: promote", []bool{true}, 2, 3, 1, true, false},
		{"slots full: promote", []bool{true, true}, 3, 5, 2, true, false},
		{"a learner has not started: its start comes first", []bool{true, false}, 3, 5, 3, true, false},
		{"the add is held by something else: promote", []bool{true}, 2, 3, 2, false, false},
		{"no learner: nothing to put off", nil, 1, 3, 2, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AddBeforePromoting(tc.learners, tc.counted, tc.desired, tc.max, tc.canAdd); got != tc.want {
				t.Fatalf("AddBeforePromoting = %v, want %v", got, tc.want)
			}
		})
	}
}
