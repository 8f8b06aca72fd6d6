package quorum

import "testing"

func TestHoldJoinerLists(t *testing.T) {
	held := Joiner{Plain: true}
	for _, tc := range []struct {
		name     string
		learners []Joiner
		counted  int
		desired  int
		max      int
		canAdd   bool
		want     bool
	}{
		{"first of two learners on etcd 3.6 holds for the second", []Joiner{held}, 2, 3, 2, true, true},
		{"slots full: hand both out", []Joiner{held, held}, 3, 5, 2, true, false},
		{"etcd 3.5 allows one learner: never held", []Joiner{held}, 2, 3, 1, true, false},
		{"last member wanted: hand it out", []Joiner{held}, 3, 3, 2, true, false},
		{"scaled down meanwhile: hand it out", []Joiner{held}, 3, 1, 2, true, false},
		{"a learner already has its list: its start must not be raced", []Joiner{held, {Handed: true, Plain: true}}, 2, 5, 3, true, false},
		{"a replacement is never held", []Joiner{{}}, 2, 3, 2, true, false},
		{"scale-up cannot add now: hand it out", []Joiner{held}, 2, 3, 2, false, false},
		{"no learner, nothing to hold", nil, 1, 3, 2, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := HoldJoinerLists(tc.learners, tc.counted, tc.desired, tc.max, tc.canAdd); got != tc.want {
				t.Fatalf("HoldJoinerLists = %v, want %v", got, tc.want)
			}
		})
	}
}
