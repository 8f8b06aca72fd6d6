package plugin

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

func TestDefragFollowersFirstLeaderLast(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.cluster("demo")
	w.voter("demo", "demo-a")
	b := w.voter("demo", "demo-b")
	w.voter("demo", "demo-c")
	w.learner("demo", "demo-d", true)
	w.etcd.SetLeader(b.ID)

	r := w.run("defrag", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(w.etcd.Defragmented).To(Equal([]string{
		w.endpoint("demo-a"), w.endpoint("demo-c"), w.endpoint("demo-d"), w.endpoint("demo-b"),
	}), "followers and learners by name, then the leader, each through its own tunnel")
	g.Expect(w.etcd.MovedLeader).To(Equal([]uint64{w.members["demo-a"].ID}), "leadership moves to a member already done first")
	notDue := "  the operator's rule: not due: 512.0 KiB of its 1.0 MiB database is free (50%); due at 25% and 64.0 MiB, or at 80% of the quota\n"
	sizes := "  DB size 1.0 MiB -> 1.0 MiB (in use 512.0 KiB -> 512.0 KiB)\n"
	g.Expect(r.out).To(Equal("Defragmenting demo-a (follower)...\n" + notDue + sizes +
		"Defragmenting demo-c (follower)...\n" + notDue + sizes +
		"Defragmenting demo-d (learner)...\n" + notDue + sizes +
		"Moving leadership from demo-b to demo-a before defragmenting it...\n" +
		"Defragmenting demo-b (the leader, until it handed over to demo-a)...\n" + notDue + sizes))
}

func TestDefragReportsSizesBeforeAndAfter(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.cluster("demo")
	a := w.voter("demo", "demo-a")
	ep := w.endpoint("demo-a")
	bloated := etcd.EndpointStatus{Endpoint: ep, MemberID: a.ID, LeaderID: a.ID, RaftTerm: 1, DBSize: 300 << 20, DBSizeInUse: 20 << 20}
	w.etcd.SetStatus(ep, bloated)
	w.etcd.SetHook(etcd.OpDefragment, func(etcdfake.Call) error {
		compacted := bloated
		compacted.DBSize = 21 << 20
		w.etcd.SetStatus(ep, compacted)
		return nil
	})
	r := w.run("defrag", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(Equal("Defragmenting demo-a (leader)...\n"+
		"  the operator's rule: due: 280.0 MiB of its 300.0 MiB database is free (93%)\n"+
		"  DB size 300.0 MiB -> 21.0 MiB (in use 20.0 MiB -> 20.0 MiB)\n"), "a one-member cluster has nobody to hand over to")
}

func TestDefragRefusesAnUnhealthyCluster(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(w *world)
		message string
	}{
		{
			name: "corrupt",
			setup: func(w *world) {
				w.etcd.RaiseAlarm(etcd.Alarm{MemberID: w.members["demo-c"].ID, Type: etcd.AlarmCorrupt})
			},
			message: "etcd raised a CORRUPT alarm on demo-c: the operator neither compacts nor defragments a cluster whose data may be corrupt",
		},
		{
			name:    "member not answering",
			setup:   func(w *world) { w.etcd.SetEndpointError(w.endpoint("demo-c"), etcdfake.ErrUnreachable) },
			message: "member demo-c does not answer: unreachable: failed to call etcd Status on http://127.0.0.1:",
		},
		{
			name:    "port-forward to a member fails",
			setup:   func(w *world) { w.fwd.errs["demo-a"] = errors.New("kubelet gone") },
			message: "member demo-a does not answer: port-forward failed: kubelet gone",
		},
		{
			name: "member without a Pod",
			setup: func(w *world) {
				w.etcd.AddVoter("demo-z", peerURL("demo", "demo-z"), "http://demo-z.demo.ns1.svc:2379")
			},
			message: "member demo-z does not answer: no Pod: etcd lists member demo-z but it has no Pod",
		},
		{
			name:    "no quorum",
			setup:   func(w *world) { w.etcd.SetLeader(0) },
			message: "failed to list the members of EtcdCluster ns1/demo",
		},
		{
			name: "members disagree on the leader",
			setup: func(w *world) {
				c := w.members["demo-c"]
				w.etcd.SetStatus(w.endpoint("demo-c"), etcd.EndpointStatus{MemberID: c.ID, LeaderID: c.ID, RaftTerm: 1})
			},
			message: "member demo-c sees leader ", // then IDs, which depend on the run
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			w := newWorld(t)
			w.cluster("demo")
			w.voter("demo", "demo-a")
			b := w.voter("demo", "demo-b")
			w.voter("demo", "demo-c")
			w.etcd.SetLeader(b.ID)
			tc.setup(w)
			r := w.run("defrag", "demo")
			g.Expect(r.code).To(Equal(ExitError))
			g.Expect(r.err).To(HavePrefix("error: refusing to defragment EtcdCluster ns1/demo: " + tc.message))
			g.Expect(w.etcd.Defragmented).To(BeEmpty())
		})
	}
}

func TestDefragPlan(t *testing.T) {
	g := NewWithT(t)
	st := func(id, leader uint64) *etcd.EndpointStatus {
		return &etcd.EndpointStatus{MemberID: id, LeaderID: leader}
	}
	view := func(name string, id, leader uint64) memberView {
		return memberView{name: name, member: &etcd.Member{ID: id, Name: name}, status: st(id, leader)}
	}
	snap := &snapshot{list: &etcd.MemberList{}, leaderID: 1, members: []memberView{
		view("m-a", 1, 1), view("m-b", 2, 1), view("m-c", 3, 1),
		{name: "stray", status: st(9, 1)}, // a Pod that is not a member
	}}
	plan, _, err := defragPlan(snap)
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, v := range plan {
		names = append(names, v.name)
	}
	g.Expect(names).To(Equal([]string{"m-b", "m-c", "m-a"}))

	snap.leaderID = 0
	_, _, err = defragPlan(snap)
	g.Expect(err).To(MatchError("no member knows a leader"))

	snap.leaderID = 7
	for i := range snap.members {
		snap.members[i].status.LeaderID = 7
	}
	_, _, err = defragPlan(snap)
	g.Expect(err).To(MatchError("the leader 0000000000000007 is not in the member list"))
}

func TestDefragGoesAheadUnderNoSpace(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.cluster("demo")
	w.voter("demo", "demo-a")
	w.voter("demo", "demo-b")
	w.etcd.RaiseAlarm(etcd.Alarm{MemberID: w.members["demo-b"].ID, Type: etcd.AlarmNoSpace})
	r := w.run("defrag", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(w.etcd.Defragmented).To(HaveLen(2), "defragmenting is how a cluster comes back from NOSPACE")
	g.Expect(r.out).To(HaveSuffix("NOSPACE is still active on demo-b: etcd takes writes again once it is disarmed (kubectl etcd alarms disarm demo), " +
		"which the operator does by itself after compacting and defragmenting (spec.maintenance.noSpaceRecovery).\n"))
	g.Expect(w.etcd.Alarms()).To(HaveLen(1), "the plugin's defrag never disarms")
}

func TestDefragStopsWhenAMemberFails(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.cluster("demo")
	w.voter("demo", "demo-a")
	b := w.voter("demo", "demo-b")
	w.voter("demo", "demo-c")
	w.etcd.SetLeader(b.ID)
	w.etcd.SetHook(etcd.OpDefragment, func(call etcdfake.Call) error {
		if call.Endpoint == w.endpoint("demo-c") {
			return context.DeadlineExceeded
		}
		return nil
	})
	r := w.run("defrag", "demo")
	g.Expect(r.code).To(Equal(ExitError))
	g.Expect(r.err).To(HavePrefix("error: failed to defragment member demo-c of EtcdCluster ns1/demo (done so far: demo-a): "))
	g.Expect(w.etcd.Defragmented).To(Equal([]string{w.endpoint("demo-a")}), "the leader is never reached")
}

func TestMoveLeader(t *testing.T) {
	setup := func(t *testing.T) *world {
		w := newWorld(t)
		w.cluster("demo")
		w.voter("demo", "demo-a")
		w.voter("demo", "demo-b")
		w.voter("demo", "demo-c")
		w.learner("demo", "demo-d", true)
		return w
	}
	t.Run("by name", func(t *testing.T) {
		g := NewWithT(t)
		w := setup(t)
		r := w.run("move-leader", "demo", "--to", "demo-c")
		g.Expect(r.code).To(Equal(ExitOK), r.err)
		g.Expect(w.etcd.MovedLeader).To(Equal([]uint64{w.members["demo-c"].ID}))
		g.Expect(r.out).To(Equal("Moved the leadership of EtcdCluster ns1/demo from demo-a (" + w.id("demo-a") + ") to demo-c (" + w.id("demo-c") + ").\n"))
		// The leader's tunnel must be among the client's endpoints: etcd's
		// MoveLeader looks for the leader there first.
		g.Expect(w.etcd.Dialed).To(ContainElement(ContainElement(w.endpoint("demo-a"))))
	})
	t.Run("by ID", func(t *testing.T) {
		g := NewWithT(t)
		w := setup(t)
		r := w.run("move-leader", "--to="+w.id("demo-b"), "demo")
		g.Expect(r.code).To(Equal(ExitOK), r.err)
		g.Expect(w.etcd.MovedLeader).To(Equal([]uint64{w.members["demo-b"].ID}))
	})
	t.Run("already the leader", func(t *testing.T) {
		g := NewWithT(t)
		w := setup(t)
		r := w.run("move-leader", "demo", "--to", "demo-a")
		g.Expect(r.code).To(Equal(ExitOK), r.err)
		g.Expect(r.out).To(ContainSubstring("demo-a (" + w.id("demo-a") + ") already leads EtcdCluster ns1/demo; nothing to do."))
		g.Expect(w.etcd.MovedLeader).To(BeEmpty())
	})
	t.Run("learner", func(t *testing.T) {
		g := NewWithT(t)
		w := setup(t)
		r := w.run("move-leader", "demo", "--to", "demo-d")
		g.Expect(r.code).To(Equal(ExitError))
		g.Expect(r.err).To(Equal("error: cannot move the leadership of EtcdCluster ns1/demo to demo-d: it is a learner, and learners do not vote\n"))
		g.Expect(w.etcd.MovedLeader).To(BeEmpty())
	})
	t.Run("unknown member", func(t *testing.T) {
		g := NewWithT(t)
		w := setup(t)
		r := w.run("move-leader", "demo", "--to", "ffff")
		g.Expect(r.code).To(Equal(ExitError))
		g.Expect(r.err).To(HavePrefix(`error: cannot move the leadership of EtcdCluster ns1/demo: no member is named or has the ID "ffff"; members are demo-a (`))
		g.Expect(r.err).To(ContainSubstring("demo-d (" + w.id("demo-d") + ")"))
	})
	t.Run("leader unreachable", func(t *testing.T) {
		g := NewWithT(t)
		w := setup(t)
		w.fwd.errs["demo-a"] = errors.New("kubelet gone")
		r := w.run("move-leader", "demo", "--to", "demo-b")
		g.Expect(r.code).To(Equal(ExitError))
		g.Expect(r.err).To(ContainSubstring("the leader demo-a is not reachable through a port-forward: port-forward failed: kubelet gone"))
		g.Expect(w.etcd.MovedLeader).To(BeEmpty())
	})
	t.Run("missing --to", func(t *testing.T) {
		g := NewWithT(t)
		w := setup(t)
		r := w.run("move-leader", "demo")
		g.Expect(r.code).To(Equal(ExitUsage))
		g.Expect(r.err).To(ContainSubstring("move-leader needs --to MEMBER"))
		g.Expect(w.flags).To(BeEmpty(), "a usage error never reaches the cluster")
	})
}

func TestResolveMember(t *testing.T) {
	g := NewWithT(t)
	list := etcd.MemberList{Members: []etcd.Member{
		{ID: 0xabc, Name: "demo-a"},
		{ID: 0xdef, PeerURLs: []string{peerURL("demo", "demo-b")}}, // not started
	}}
	m, err := resolveMember(list, "demo", "demo-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.ID).To(BeEquivalentTo(0xabc))
	m, err = resolveMember(list, "demo", "demo-b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.ID).To(BeEquivalentTo(0xdef), "unstarted members are found by their peer URL")
	m, err = resolveMember(list, "demo", "0000000000000abc")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Name).To(Equal("demo-a"))
	_, err = resolveMember(list, "demo", "0")
	g.Expect(err).To(MatchError(ContainSubstring(`no member is named or has the ID "0"`)))
}

func TestCompact(t *testing.T) {
	g := NewWithT(t)
	w := healthyWorld(t)
	w.etcd.SetRevision(500)

	r := w.run("compact", "demo", "--revision", "400")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(w.etcd.Compacted).To(Equal([]int64{400}))
	g.Expect(r.out).To(HavePrefix("Compacted EtcdCluster ns1/demo to revision 400.\n"))

	r = w.run("compact", "demo", "--revision", "300")
	g.Expect(r.code).To(Equal(ExitOK), "an older revision is already compacted: nothing to do")
	g.Expect(r.out).To(Equal("EtcdCluster ns1/demo is already compacted at or beyond revision 300; nothing to do.\n"))

	r = w.run("compact", "demo", "--revision", "501")
	g.Expect(r.code).To(Equal(ExitError))
	g.Expect(r.err).To(HavePrefix("error: failed to compact EtcdCluster ns1/demo to revision 501: "))
	g.Expect(w.etcd.Compacted).To(Equal([]int64{400}))

	w.etcd.SetRevision(520)
	r = w.run("compact", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(w.etcd.Compacted).To(Equal([]int64{400, 520}), "no revision means the current one")
}

func TestMembers(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.cluster("demo")
	w.voter("demo", "demo-b")
	w.voter("demo", "demo-a")
	w.learner("demo", "demo-c", false)

	r := w.run("members", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(Equal(golden(w, `ID                 NAME            PEER URLS                                       CLIENT URLS              LEARNER
<demo-a>   demo-a          http://demo-a.demo.ns1.svc.cluster.local:2380   http://127.0.0.1:30002   false
<demo-b>   demo-b          http://demo-b.demo.ns1.svc.cluster.local:2380   http://127.0.0.1:30001   false
<demo-c>   (not started)   http://demo-c.demo.ns1.svc.cluster.local:2380   -                        true
`)))

	r = w.run("members", "demo", "-o", "json")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(MatchJSON(golden(w, `{
		"cluster": "demo", "namespace": "ns1", "clusterID": "<cluster>",
		"members": [
			{"id": "<demo-a>", "name": "demo-a", "peerURLs": ["http://demo-a.demo.ns1.svc.cluster.local:2380"], "clientURLs": ["http://127.0.0.1:30002"], "isLearner": false},
			{"id": "<demo-b>", "name": "demo-b", "peerURLs": ["http://demo-b.demo.ns1.svc.cluster.local:2380"], "clientURLs": ["http://127.0.0.1:30001"], "isLearner": false},
			{"id": "<demo-c>", "name": "", "peerURLs": ["http://demo-c.demo.ns1.svc.cluster.local:2380"], "clientURLs": [], "isLearner": true}
		]}`)))
}

func TestAlarms(t *testing.T) {
	g := NewWithT(t)
	w := healthyWorld(t)
	w.etcd.RaiseAlarm(etcd.Alarm{MemberID: w.members["demo-a"].ID, Type: etcd.AlarmCorrupt})

	r := w.run("alarms", "list", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(Equal(golden(w, `MEMBER   MEMBER ID          ALARM
demo-a   <demo-a>   CORRUPT
demo-c   <demo-c>   NOSPACE
`)))

	r = w.run("alarms", "list", "demo", "-o", "yaml")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(Equal(golden(w, `alarms:
- member: demo-a
  memberID: <demo-a>
  type: CORRUPT
- member: demo-c
  memberID: <demo-c>
  type: NOSPACE
cluster: demo
namespace: ns1
`)))

	w.etcd.FailNext(etcd.OpAlarmDisarm, errors.New("permission denied"))
	r = w.run("alarms", "disarm", "demo")
	g.Expect(r.code).To(Equal(ExitError))
	g.Expect(r.err).To(HavePrefix("error: failed to disarm 1 of 2 alarms of EtcdCluster ns1/demo:\n  "))
	g.Expect(w.etcd.Disarmed).To(HaveLen(1), "one failure does not stop the others")
	g.Expect(w.etcd.Alarms()).To(HaveLen(1))

	r = w.run("alarms", "disarm", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(w.etcd.Alarms()).To(BeEmpty())
	g.Expect(r.out).To(MatchRegexp(`^Disarmed (CORRUPT|NOSPACE) alarm of member demo-[ac] \([0-9a-f]{16}\)\.\n`))

	r = w.run("alarms", "disarm", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(Equal("No active alarms in EtcdCluster ns1/demo; nothing to disarm.\n"))
	r = w.run("alarms", "list", "demo", "-o", "json")
	g.Expect(r.out).To(MatchJSON(`{"cluster": "demo", "namespace": "ns1", "alarms": []}`))
}
