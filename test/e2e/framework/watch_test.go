package framework

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestQuorumVerdict(t *testing.T) {
	held := func(ms int) quorumLook { return quorumLook{at: at(ms), held: true} }
	none := func(ms int) quorumLook { return quorumLook{at: at(ms), detail: "1 of 3 voters followed leader 1"} }
	blind := func(ms int) quorumLook { return quorumLook{at: at(ms), blind: true} }
	for _, c := range []struct {
		name  string
		looks []quorumLook
		fails string
	}{
		{"a quorum at every look", []quorumLook{held(0), held(500), held(1000)}, ""},
		{"an election, cleared by the next look", []quorumLook{held(0), none(500), held(600)}, ""},
		{"no quorum for a second", []quorumLook{held(0), none(500), none(600), none(1500), held(1600)}, "no quorum from"},
		{"no quorum for less than a second", []quorumLook{held(0), none(500), none(600), none(1400), held(1500)}, ""},
		{"a loss seen across blind looks", []quorumLook{held(0), none(500), blind(900), none(1500)}, "no quorum from"},
		{"separate short runs are no loss", []quorumLook{held(0), none(500), held(600), none(1200), held(1300)}, ""},
		{"nothing looked at", nil, "checked nothing"},
		{"only blind looks", []quorumLook{blind(0), blind(500)}, "checked nothing"},
		{"only looks without a quorum, too short to decide", []quorumLook{none(0), none(100)}, "checked nothing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var v quorumVerdict
			for _, l := range c.looks {
				v.add(l)
			}
			err := v.result()
			switch {
			case c.fails == "" && err != nil:
				t.Fatalf("failed: %v", err)
			case c.fails != "" && (err == nil || !strings.Contains(err.Error(), c.fails)):
				t.Fatalf("got %v, want an error with %q", err, c.fails)
			}
		})
	}
}

func TestQuorumVerdictSuspects(t *testing.T) {
	var v quorumVerdict
	v.add(quorumLook{at: at(0), held: true})
	if v.suspecting() {
		t.Fatal("suspecting after a look with a quorum")
	}
	v.add(quorumLook{at: at(500)})
	if !v.suspecting() {
		t.Fatal("not suspecting after a look without a quorum")
	}
	v.add(quorumLook{at: at(600), held: true})
	if v.suspecting() || v.cleared != 1 || v.held != 2 {
		t.Fatalf("after the clearing look: %s", &v)
	}
}

func TestMostFollowedAndCountVoters(t *testing.T) {
	answers := map[string]etcd.EndpointStatus{
		"a": {MemberID: 1, LeaderID: 1, RaftTerm: 3},
		"b": {MemberID: 2, LeaderID: 1, RaftTerm: 3},
		"c": {MemberID: 3, LeaderID: 0, RaftTerm: 4},
		"d": {MemberID: 4, LeaderID: 1, RaftTerm: 3},
	}
	leader, followers := mostFollowed(answers)
	if leader != 1 || len(followers) != 3 {
		t.Fatalf("leader %d followed by %v", leader, followers)
	}
	// 4 is a learner: it follows the leader but does not vote; 5 votes and
	// did not answer.
	list := etcd.MemberList{Members: []etcd.Member{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 4, IsLearner: true}, {ID: 5}}}
	agreeing, voters := countVoters(list, followers)
	if agreeing != 2 || voters != 4 {
		t.Fatalf("%d of %d voters agree, want 2 of 4", agreeing, voters)
	}
	if leader, _ := mostFollowed(map[string]etcd.EndpointStatus{"a": {MemberID: 1}}); leader != 0 {
		t.Fatalf("a leader (%d) from members that follow none", leader)
	}
	split := map[string]etcd.EndpointStatus{
		"a": {MemberID: 1, LeaderID: 1, RaftTerm: 5},
		"b": {MemberID: 2, LeaderID: 2, RaftTerm: 6},
	}
	for i := 0; i < 20; i++ {
		if leader, _ := mostFollowed(split); leader != 2 {
			t.Fatalf("a tie goes to the higher term, got %d", leader)
		}
	}
}

func sample(ms int, members, down []string, leaders map[string]uint64) MemberSample {
	return MemberSample{At: at(ms), Done: at(ms + 20), Members: members, Down: down, Leaders: leaders}
}

func TestMembersDownReport(t *testing.T) {
	abc := []string{"a", "b", "c"}
	r := summarizeMemberSamples([]MemberSample{
		sample(200, abc, []string{"a"}, nil),
		sample(0, abc, nil, nil),
		sample(300, abc, []string{"a", "b"}, nil),
		sample(100, abc, []string{"c"}, nil),
		sample(400, abc, []string{"b", "c"}, nil),
	}, 2)
	if r.MaxDown != 2 || len(r.Worst) != 2 || !r.Worst[0].At.Equal(at(300)) || !r.Worst[1].At.Equal(at(400)) {
		t.Fatalf("max %d at %v", r.MaxDown, r.Worst)
	}
	if !r.Samples[0].At.Equal(at(0)) || !r.Samples[4].At.Equal(at(400)) {
		t.Fatal("samples are not sorted by time")
	}
	if got := r.SeenDown(); !slices.Equal(got, abc) {
		t.Fatalf("seen down: %v", got)
	}
	if s := r.String(); !strings.Contains(s, "at most 2 members down") || !strings.Contains(s, "[a b] of [a b c]") {
		t.Fatalf("summary: %s", s)
	}
	none := summarizeMemberSamples([]MemberSample{sample(0, abc, nil, nil)}, 0)
	if none.MaxDown != 0 || len(none.Worst) != 0 {
		t.Fatalf("a sample with nobody down is no worst sample: %+v", none)
	}
}

func TestMembersDownWatchWithoutSamplesFails(t *testing.T) {
	w := &MembersDownWatch{cancel: func() {}, done: make(chan struct{})}
	close(w.done)
	if _, err := w.Stop(); err == nil {
		t.Fatal("a watch that never sampled passed")
	}
}

func TestLeaderChanges(t *testing.T) {
	abc := []string{"a", "b", "c"}
	r := summarizeMemberSamples([]MemberSample{
		sample(0, abc, nil, map[string]uint64{"a": 1, "b": 1, "c": 1}),
		sample(100, abc, []string{"c"}, map[string]uint64{"a": 1, "b": 1}),
		// An election: no majority follows anyone.
		sample(200, abc, nil, map[string]uint64{"a": 0, "b": 2, "c": 0}),
		sample(300, abc, nil, map[string]uint64{"a": 2, "b": 2, "c": 0}),
		// One member answering alone is no majority.
		sample(400, abc, []string{"a", "b"}, map[string]uint64{"c": 3}),
		sample(500, abc, nil, map[string]uint64{"a": 2, "b": 2, "c": 2}),
	}, 0)
	got := r.LeaderChanges()
	want := []LeaderChange{{From: 1, To: 2, LastFrom: at(100), FirstTo: at(320)}}
	if !slices.Equal(got, want) {
		t.Fatalf("changes %+v, want %+v", got, want)
	}
}

func TestFailureWindow(t *testing.T) {
	c := LeaderChange{From: 1, To: 2, LastFrom: at(1000), FirstTo: at(1300)}
	succeeded := []WriteSpan{
		{at(900), at(950)},
		// Sent before the new leader was seen: says nothing of after.
		{at(1200), at(1400)},
		{at(1350), at(1600)},
		{at(1310), at(1500)},
	}
	w, ok := c.FailureWindow(succeeded)
	if !ok || !w.Start.Equal(at(0)) || !w.End.Equal(at(1500)) {
		t.Fatalf("window %v to %v (%t)", w.Start, w.End, ok)
	}
	for _, f := range []struct {
		span WriteSpan
		in   bool
	}{
		{WriteSpan{at(-300), at(-100)}, false},
		{WriteSpan{at(-300), at(10)}, true},
		{WriteSpan{at(1400), at(1450)}, true},
		{WriteSpan{at(1500), at(1700)}, true},
		{WriteSpan{at(1501), at(1700)}, false},
	} {
		if got := f.span.Overlaps(w); got != f.in {
			t.Errorf("%v-%v in the window: %t, want %t", f.span.Start, f.span.End, got, f.in)
		}
	}
	if _, ok := c.FailureWindow(succeeded[:2]); ok {
		t.Fatal("a window closed by no write sent after the change")
	}
}
