package quorum

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestSize(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	for voters, want := range map[int]int{0: 0, 1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4} {
		g.Expect(Size(voters)).To(Equal(want), "voters=%d", voters)
	}
}

func TestCanRemoveVoter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		voters        int
		healthyOthers int
		want          bool
	}{
		{"last voter is never removed", 1, 0, false},
		{"2 to 1 with the other healthy", 2, 1, true},
		{"3 to 2 with both others healthy", 3, 2, true},
		{"3 to 2 with one other down", 3, 1, false},
		{"5 to 4 with three others healthy", 5, 3, true},
		{"5 to 4 with two others healthy", 5, 2, false},
		{"4 to 3 with two others healthy", 4, 2, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(CanRemoveVoter(tc.voters, tc.healthyOthers)).To(Equal(tc.want))
		})
	}
}

func TestHasQuorum(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	g.Expect(HasQuorum(3, 2)).To(BeTrue())
	g.Expect(HasQuorum(3, 1)).To(BeFalse())
	g.Expect(HasQuorum(0, 0)).To(BeFalse())
	g.Expect(HasQuorum(1, 1)).To(BeTrue())
}

func TestPickToRemove(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	_, ok := PickToRemove(nil)
	NewWithT(t).Expect(ok).To(BeFalse())
	ready := func(name string, created time.Time) Candidate {
		return Candidate{Name: name, Created: created, Ready: true}
	}
	cases := []struct {
		name  string
		cands []Candidate
		want  string
	}{
		{"newest first, then the greater name", []Candidate{ready("a", t0), ready("c", t0.Add(time.Second)), ready("b", t0.Add(time.Second)), ready("d", t0)}, "c"},
		{"a member that holds nothing before a newer ready one", []Candidate{ready("a", t0.Add(time.Hour)), {Name: "p", Created: t0, HoldsNothing: true}}, "p"},
		{"a broken member before newer healthy ones", []Candidate{{Name: "x", Created: t0, Broken: true}, ready("y", t0.Add(time.Hour)), ready("z", t0.Add(2*time.Hour))}, "x"},
		{"holding nothing beats broken", []Candidate{{Name: "x", Created: t0.Add(time.Hour), Broken: true}, {Name: "p", Created: t0, HoldsNothing: true}}, "p"},
		{"a learner before a voter", []Candidate{ready("v", t0.Add(time.Hour)), {Name: "l", Created: t0, Learner: true, Ready: true}}, "l"},
		{"a not-ready voter before a ready one", []Candidate{ready("v", t0.Add(time.Hour)), {Name: "n", Created: t0}}, "n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := PickToRemove(tc.cands)
			g := NewWithT(t)
			g.Expect(ok).To(BeTrue())
			g.Expect(got.Name).To(Equal(tc.want))
		})
	}
}

func TestRemovalAllowed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                          string
		voters, healthyOthers, target int
		selfHealthy, want             bool
	}{
		{"healthy member of a healthy 3", 3, 2, 3, true, true},
		{"healthy member while another is down: wait for its replacement", 2, 1, 3, true, false},
		{"broken member of a 3 with two healthy", 3, 2, 3, false, true},
		{"broken member of a 2 with one healthy", 2, 1, 3, false, true},
		{"scale 3 to 1", 3, 2, 1, true, true},
		{"scale 2 to 1", 2, 1, 1, true, true},
		{"pause, last but one", 2, 1, 0, true, true},
		{"quorum would break", 3, 1, 3, false, false},
		{"the last voter", 1, 0, 0, true, false},
		{"scale 5 to 3, healthy", 5, 4, 3, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(RemovalAllowed(tc.voters, tc.healthyOthers, tc.target, tc.selfHealthy)).To(Equal(tc.want))
		})
	}
}
