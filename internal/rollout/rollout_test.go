package rollout

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func voter(name string, outdated bool) Member {
	return Member{Name: name, Outdated: outdated, Voter: true, Healthy: true, Applied: 100}
}

func lead(m Member) Member { m.Leader = true; return m }

func TestNext(t *testing.T) {
	t.Parallel()
	// down: the kubelet has reported it not ready for longer than the
	// bound; unanswering: only the operator's look failed.
	down := func(m Member) Member { m.Healthy, m.DownFor = false, DefaultDownAfter; return m }
	unanswering := func(m Member) Member { m.Healthy = false; return m }
	briefly := func(m Member) Member { m.Healthy, m.DownFor = false, DefaultDownAfter-time.Second; return m }
	behind := func(m Member) Member { m.Applied = 1; return m }
	replace := func(m Member) Member { m.Replace = true; return m }
	expand := func(m Member) Member { m.Expand = true; return m }
	resizing := func(m Member) Member { m.Resizing = true; return m }
	cases := []struct {
		name    string
		members []Member
		opts    Options
		want    Decision
	}{
		{"nothing outdated", []Member{lead(voter("a", false)), voter("b", false)}, Options{},
			Decision{Action: None}},
		{"followers first, by name", []Member{lead(voter("a", true)), voter("c", true), voter("b", true)}, Options{},
			Decision{Action: Restart, Member: "b"}},
		{"the leader last, after handing leadership to an updated member", []Member{lead(voter("a", true)), voter("b", false), voter("c", false)}, Options{},
			Decision{Action: MoveLeader, Member: "a", To: "b"}},
		{"the updated member furthest ahead takes over", []Member{lead(voter("a", true)), voter("b", false), func() Member { m := voter("c", false); m.Applied = 101; return m }()}, Options{},
			Decision{Action: MoveLeader, Member: "a", To: "c"}},
		{"a one-member cluster restarts its leader", []Member{lead(voter("a", true))}, Options{},
			Decision{Action: Restart, Member: "a"}},
		{"the next waits until the last one is healthy", []Member{lead(voter("a", true)), down(voter("b", false)), voter("c", true)}, Options{},
			Decision{Action: Wait, Reason: "waiting for b to be healthy"}},
		{"and until it has caught up", []Member{lead(voter("a", true)), behind(voter("b", false)), voter("c", true)}, Options{AppliedWindow: 10},
			Decision{Action: Wait, Reason: "waiting for b to catch up (applied index 1, the leader's 100)"}},
		{"a member that is down already is restarted first while the others pass the gate", []Member{lead(voter("a", true)), down(voter("c", true)), voter("b", true)}, Options{},
			Decision{Action: Restart, Member: "c"}},
		{"but not while another voter is behind", []Member{lead(voter("a", true)), down(voter("c", true)), behind(voter("b", true))}, Options{AppliedWindow: 10},
			Decision{Action: Wait, Reason: "waiting for b to catch up (applied index 1, the leader's 100)"}},
		{"nor while another voter did not answer the operator's look", []Member{lead(voter("a", true)), down(voter("c", true)), unanswering(voter("b", true))}, Options{},
			Decision{Action: Wait, Reason: "waiting for b to be healthy"}},
		{"nor while no leader is known", []Member{voter("a", true), down(voter("c", true)), voter("b", true)}, Options{},
			Decision{Action: Wait, Reason: "waiting for a leader"}},
		{"nor while a member restarted before is not back", []Member{lead(voter("a", true)), down(voter("c", true)), unanswering(voter("b", false))}, Options{Restarting: []string{"b"}},
			Decision{Action: Wait, Reason: "waiting for b to be healthy"}},
		{"a member the operator's look missed is no down member: the gate holds", []Member{lead(voter("a", true)), unanswering(voter("b", true)), voter("c", true)}, Options{},
			Decision{Action: Wait, Reason: "waiting for b to be healthy"}},
		{"nor is one down for less than the bound", []Member{lead(voter("a", true)), briefly(voter("b", true)), voter("c", true)}, Options{},
			Decision{Action: Wait, Reason: "waiting for b to be healthy"}},
		{"a member restarted and not yet back holds the next, though the look at it passed", []Member{lead(voter("a", true)), voter("b", false), voter("c", true)}, Options{Restarting: []string{"b"}},
			Decision{Action: Wait, Reason: "waiting for b, restarted by the rollout, to be a healthy voter again"}},
		{"a restarted member not back on a template set back is restarted again at once", []Member{lead(voter("a", false)), unanswering(voter("b", true)), voter("c", false)}, Options{Restarting: []string{"b"}},
			Decision{Action: Restart, Member: "b"}},
		{"but not while another voter is down", []Member{lead(voter("a", false)), unanswering(voter("b", true)), unanswering(voter("c", false))}, Options{Restarting: []string{"b"}},
			Decision{Action: Wait, Reason: "waiting for c to be healthy"}},
		{"the leader, unknown in a look that missed one member, is never restarted without a handoff", []Member{voter("a", true), unanswering(voter("b", false)), voter("c", false)}, Options{},
			Decision{Action: Wait, Reason: "waiting for b to be healthy"}},
		{"paused", []Member{lead(voter("a", true)), voter("b", true)}, Options{Paused: true},
			Decision{Action: Wait, Reason: "paused by spec.rollout.paused with 0 of 2 members updated"}},
		{"a membership change in flight", []Member{lead(voter("a", true)), voter("b", true)}, Options{Settling: "learner d"},
			Decision{Action: Wait, Reason: "waiting for learner d"}},
		{"no leader", []Member{voter("a", true), voter("b", true)}, Options{},
			Decision{Action: Wait, Reason: "waiting for a leader"}},
		{"a member that cannot change in place is replaced, followers first", []Member{lead(replace(voter("a", true))), replace(voter("b", true))}, Options{},
			Decision{Action: Replace, Member: "b"}},
		{"and the leader last", []Member{lead(replace(voter("a", true))), voter("b", false)}, Options{},
			Decision{Action: Replace, Member: "a"}},
		{"a down Memory member is not restarted in place: that would lose its data", []Member{lead(replace(voter("a", true))), down(replace(voter("b", true))), replace(voter("c", true))}, Options{},
			Decision{Action: Wait, Reason: "waiting for b to be healthy"}},
		{"a volume that can grow online grows first", []Member{lead(expand(voter("a", true))), expand(voter("b", true))}, Options{},
			Decision{Action: ExpandVolume, Member: "b"}},
		{"then the member waits for it", []Member{lead(expand(voter("a", true))), resizing(voter("b", true))}, Options{},
			Decision{Action: Wait, Reason: "waiting for the volume of b to grow"}},
		{"and restarts on it once it has grown", []Member{lead(expand(voter("a", true))), voter("b", true)}, Options{},
			Decision{Action: Restart, Member: "b"}},
		{"the leader's volume grows before leadership moves", []Member{lead(expand(voter("a", true))), voter("b", false)}, Options{},
			Decision{Action: ExpandVolume, Member: "a"}},
		{"and leadership moves once it has grown", []Member{lead(voter("a", true)), voter("b", false)}, Options{},
			Decision{Action: MoveLeader, Member: "a", To: "b"}},
		{"a member that is down grows its volume before its restart", []Member{lead(voter("a", true)), down(expand(voter("b", true)))}, Options{},
			Decision{Action: ExpandVolume, Member: "b"}},
		{"and waits for it", []Member{lead(voter("a", true)), down(resizing(voter("b", true)))}, Options{},
			Decision{Action: Wait, Reason: "waiting for the volume of b to grow"}},
		{"one volume at a time", []Member{lead(voter("a", true)), expand(voter("b", true)), resizing(voter("c", true))}, Options{},
			Decision{Action: Wait, Reason: "waiting for the volume of c to grow"}},
		{"the gate holds the next", []Member{lead(expand(voter("a", true))), down(voter("b", false)), expand(voter("c", true))}, Options{},
			Decision{Action: Wait, Reason: "waiting for b to be healthy"}},
		{"a replacement in flight", []Member{lead(replace(voter("a", true))), replace(voter("b", true))}, Options{Settling: "b's replacement d to join"},
			Decision{Action: Wait, Reason: "waiting for b's replacement d to join"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(Next(tc.members, tc.opts)).To(Equal(tc.want))
		})
	}
}

// Walks a three-member rollout to the end, applying each decision the way
// the controller does: every member is restarted once, the leader last.
func TestNext_ARolloutEndsWithTheLeader(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ms := []Member{lead(voter("b", true)), voter("a", true), voter("c", true)}
	var restarted []string
	for i := 0; i < 10; i++ {
		d := Next(ms, Options{})
		switch d.Action {
		case None:
			g.Expect(restarted).To(Equal([]string{"a", "c", "b"}))
			return
		case Restart:
			restarted = append(restarted, d.Member)
			for j := range ms {
				if ms[j].Name == d.Member {
					ms[j].Outdated = false
				}
			}
		case MoveLeader:
			for j := range ms {
				ms[j].Leader = ms[j].Name == d.To
			}
		default:
			t.Fatalf("unexpected %+v", d)
		}
	}
	t.Fatal("the rollout did not end")
}
