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

func TestPickNewest(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	t0 := time.Unix(1000, 0)
	_, ok := PickNewest(nil)
	g.Expect(ok).To(BeFalse())
	got, ok := PickNewest([]Candidate{{"a", t0}, {"c", t0.Add(time.Second)}, {"b", t0.Add(time.Second)}, {"d", t0}})
	g.Expect(ok).To(BeTrue())
	g.Expect(got.Name).To(Equal("c"), "newest first, then the greater name")
}
