package fake_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

const (
	peer1, client1 = "http://m1:2380", "http://m1:2379"
	peer2, client2 = "http://m2:2380", "http://m2:2379"
	peer3, client3 = "http://m3:2380", "http://m3:2379"
)

// newCluster returns a fake with one voter (the leader) and a client to it.
func newCluster(t *testing.T) (*etcdfake.Fake, etcd.Member, etcd.Client) {
	t.Helper()
	f := etcdfake.New()
	m1 := f.AddVoter("m1", peer1, client1)
	c, err := f.Dial(context.Background(), []string{client1})
	if err != nil {
		t.Fatalf("failed to dial fake: %v", err)
	}
	return f, m1, c
}

func callOp(err error) string {
	var ce *etcd.CallError
	if !errors.As(err, &ce) {
		return ""
	}
	return ce.Op
}

func TestDialAndClose(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := etcdfake.New()
	f.AddVoter("m1", peer1, client1)

	c, err := f.Dial(ctx, []string{client1, client2})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Endpoints()).To(Equal([]string{client1, client2}))
	g.Expect(f.Dialed).To(Equal([][]string{{client1, client2}}))
	g.Expect(f.OpenClients()).To(Equal(1))

	g.Expect(c.Close()).To(Succeed())
	g.Expect(c.Close()).To(Succeed())
	g.Expect(f.OpenClients()).To(BeZero(), "a double Close must not count twice")
	_, err = c.MemberList(ctx)
	g.Expect(errors.Is(err, context.Canceled)).To(BeTrue(), "call after Close: %v", err)

	f.FailNext(etcd.OpDial, rpctypes.ErrAuthFailed)
	_, err = f.Dial(ctx, []string{client1})
	g.Expect(etcd.IsAuthFailed(err)).To(BeTrue())
	g.Expect(callOp(err)).To(Equal(etcd.OpDial))
	_, err = f.Dial(ctx, nil)
	g.Expect(err).To(HaveOccurred())
	g.Expect(f.Dialed).To(HaveLen(1), "failed dials are in Calls, not in Dialed")
	g.Expect(f.Calls).To(HaveEach(HaveField("Op", BeElementOf(etcd.OpDial, etcd.OpMemberList))))
	g.Expect(f.Calls).To(HaveLen(4), "every attempt is recorded, including the call after Close")
}

func TestMemberAddAsLearner(t *testing.T) {
	cases := []struct {
		name        string
		maxLearners int
		existing    []string // learners already added
		peerURLs    []string
		check       func(error) bool
	}{
		{name: "adds a learner", peerURLs: []string{peer2}},
		{name: "voter's peer URL", peerURLs: []string{peer1}, check: etcd.IsPeerURLExists},
		{name: "learner's peer URL", existing: []string{peer2}, peerURLs: []string{peer2}, check: etcd.IsPeerURLExists},
		{name: "second learner", existing: []string{peer2}, peerURLs: []string{peer3}, check: etcd.IsTooManyLearners},
		{name: "second learner allowed", maxLearners: 2, existing: []string{peer2}, peerURLs: []string{peer3}},
		{name: "invalid URL", peerURLs: []string{"not a url"}, check: func(err error) bool { return err != nil && !etcd.IsUnavailable(err) }},
		{name: "no URL", peerURLs: nil, check: func(err error) bool { return err != nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			f, m1, c := newCluster(t)
			if tc.maxLearners > 0 {
				f.SetMaxLearners(tc.maxLearners)
			}
			for _, u := range tc.existing {
				f.AddLearner(u)
			}
			before := f.Members()

			added, list, err := c.MemberAddAsLearner(ctx, tc.peerURLs)
			if tc.check != nil {
				g.Expect(tc.check(err)).To(BeTrue(), "unexpected error: %v", err)
				g.Expect(callOp(err)).To(Equal(etcd.OpMemberAddAsLearner))
				g.Expect(f.Members()).To(Equal(before))
				g.Expect(f.AddedLearners).To(BeEmpty())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(added.ID).NotTo(BeZero())
			g.Expect(added.Name).To(BeEmpty())
			g.Expect(added.IsLearner).To(BeTrue())
			g.Expect(added.PeerURLs).To(Equal(tc.peerURLs))
			g.Expect(list.ClusterID).To(Equal(etcdfake.DefaultClusterID))
			g.Expect(list.Members).To(ContainElements(m1, added))
			g.Expect(f.AddedLearners).To(Equal([][]string{tc.peerURLs}))
		})
	}
}

func TestDeterministicIDs(t *testing.T) {
	g := NewWithT(t)
	build := func() []uint64 {
		f, _, c := newCluster(t)
		a, _, err := c.MemberAddAsLearner(context.Background(), []string{peer2})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.MemberRemove(context.Background(), a.ID)
		g.Expect(err).NotTo(HaveOccurred())
		b, _, err := c.MemberAddAsLearner(context.Background(), []string{peer2})
		g.Expect(err).NotTo(HaveOccurred())
		return []uint64{f.Members()[0].ID, a.ID, b.ID}
	}
	first := build()
	g.Expect(build()).To(Equal(first))
	g.Expect(first[2]).NotTo(Equal(first[1]), "a re-added member must not reuse a removed ID")
}

func TestPromote(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f, m1, c := newCluster(t)
	learner, _, err := c.MemberAddAsLearner(ctx, []string{peer2})
	g.Expect(err).NotTo(HaveOccurred())

	_, err = c.MemberPromote(ctx, learner.ID)
	g.Expect(etcd.IsLearnerNotReady(err)).To(BeTrue(), "not started yet: %v", err)

	f.StartMember(learner.ID, "m2", client2)
	f.SetLearnerReady(learner.ID, false)
	_, err = c.MemberPromote(ctx, learner.ID)
	g.Expect(etcd.IsLearnerNotReady(err)).To(BeTrue(), "not caught up: %v", err)

	_, err = c.MemberPromote(ctx, m1.ID)
	g.Expect(etcd.IsMemberNotLearner(err)).To(BeTrue(), "voter: %v", err)
	_, err = c.MemberPromote(ctx, 42)
	g.Expect(etcd.IsMemberNotFound(err)).To(BeTrue(), "unknown: %v", err)
	g.Expect(f.Promoted).To(BeEmpty())

	f.SetLearnerReady(learner.ID, true)
	list, err := c.MemberPromote(ctx, learner.ID)
	g.Expect(err).NotTo(HaveOccurred())
	promoted, ok := list.Find(learner.ID)
	g.Expect(ok).To(BeTrue())
	g.Expect(promoted).To(Equal(etcd.Member{ID: learner.ID, Name: "m2", PeerURLs: []string{peer2}, ClientURLs: []string{client2}}))
	g.Expect(f.Promoted).To(Equal([]uint64{learner.ID}))
	_, err = c.MemberPromote(ctx, learner.ID)
	g.Expect(etcd.IsMemberNotLearner(err)).To(BeTrue(), "promoting twice: %v", err)
}

func TestRemove(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f, m1, c := newCluster(t)
	m2 := f.AddVoter("m2", peer2, client2)
	f.RaiseAlarm(etcd.Alarm{MemberID: m1.ID, Type: etcd.AlarmNoSpace})

	_, err := c.MemberRemove(ctx, 42)
	g.Expect(etcd.IsMemberNotFound(err)).To(BeTrue())

	// Removing the leader hands leadership to a remaining voter.
	list, err := c.MemberRemove(ctx, m1.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Members).To(Equal([]etcd.Member{m2}))
	g.Expect(f.Leader()).To(Equal(m2.ID))
	g.Expect(f.Alarms()).To(BeEmpty(), "alarms of a removed member go with it")
	g.Expect(f.Removed).To(Equal([]uint64{m1.ID}))
}

func TestSingleEndpointCalls(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f, m1, c := newCluster(t)
	learner := f.AddLearner(peer2)
	f.StartMember(learner.ID, "m2", client2)

	st, err := c.Status(ctx, client1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st).To(Equal(etcd.EndpointStatus{
		Endpoint: client1, MemberID: m1.ID, ClusterID: etcdfake.DefaultClusterID, LeaderID: m1.ID,
		RaftTerm: 1, RaftIndex: 1, RaftAppliedIndex: 1, DBSize: 1 << 20, DBSizeInUse: 1 << 19, Version: etcdfake.Version, Revision: 1,
	}))
	st, err = c.Status(ctx, client2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.IsLearner).To(BeTrue())

	cases := []struct {
		name     string
		call     func(endpoint string) error
		learner  func(error) bool
		noLeader func(error) bool
	}{
		{"MemberListAt", func(ep string) error { _, err := c.MemberListAt(ctx, ep); return err }, etcd.IsNotSupportedForLearner, func(err error) bool { return err == nil }},
		{"Health", func(ep string) error { return c.Health(ctx, ep) }, etcd.IsNotSupportedForLearner, etcd.IsUnavailable},
		{"Status", func(ep string) error { _, err := c.Status(ctx, ep); return err }, func(err error) bool { return err == nil }, func(err error) bool { return err == nil }},
		{"Defragment", func(ep string) error { return c.Defragment(ctx, ep) }, func(err error) bool { return err == nil }, func(err error) bool { return err == nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(tc.call(client1)).To(Succeed())
			err := tc.call(client2)
			g.Expect(tc.learner(err)).To(BeTrue(), "on the learner: %v", err)

			err = tc.call("http://nobody:2379")
			g.Expect(etcd.IsUnavailable(err)).To(BeTrue(), "unknown endpoint: %v", err)
			var ce *etcd.CallError
			g.Expect(errors.As(err, &ce)).To(BeTrue())
			g.Expect(ce.Endpoint).To(Equal("http://nobody:2379"))

			f.SetEndpointError(client1, etcdfake.ErrUnreachable)
			err = tc.call(client1)
			g.Expect(etcd.IsUnavailable(err)).To(BeTrue(), "down endpoint: %v", err)
			f.SetEndpointError(client1, nil)

			f.SetLeader(0)
			err = tc.call(client1)
			g.Expect(tc.noLeader(err)).To(BeTrue(), "without a leader: %v", err)
			f.SetLeader(m1.ID)
		})
	}
}

func TestOverrides(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f, m1, c := newCluster(t)

	diverged := etcd.MemberList{ClusterID: 7, Members: []etcd.Member{{ID: 99, Name: "ghost"}}}
	f.SetMemberListAt(client1, diverged)
	got, err := c.MemberListAt(ctx, client1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(diverged))
	list, err := c.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Members).To(Equal([]etcd.Member{m1}), "the override is one member's view only")

	other := etcd.EndpointStatus{Endpoint: client3, MemberID: 5, ClusterID: 6}
	f.SetStatus(client3, other)
	st, err := c.Status(ctx, client3)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st).To(Equal(other))
}

func TestBalancedCallsAndQuorum(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f, _, _ := newCluster(t)
	learner := f.AddLearner(peer2)
	f.StartMember(learner.ID, "m2", client2)

	onlyLearner, err := f.Dial(ctx, []string{client2})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = onlyLearner.MemberList(ctx)
	g.Expect(etcd.IsNotSupportedForLearner(err)).To(BeTrue(), "through a learner only: %v", err)

	both, err := f.Dial(ctx, []string{client2, client1})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = both.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "a voter among the endpoints is enough")

	f.SetEndpointError(client1, etcdfake.ErrUnreachable)
	_, err = both.MemberList(ctx)
	g.Expect(etcd.IsNotSupportedForLearner(err)).To(BeTrue(), "voter down: %v", err)
	f.SetEndpointError(client1, nil)

	f.SetLeader(0)
	checks := map[string]error{}
	_, checks["MemberList"] = both.MemberList(ctx)
	_, _, checks["MemberAddAsLearner"] = both.MemberAddAsLearner(ctx, []string{peer3})
	_, checks["AlarmList"] = both.AlarmList(ctx)
	checks["Compact"] = both.Compact(ctx, 1)
	checks["MoveLeader"] = both.MoveLeader(ctx, learner.ID)
	for op, err := range checks {
		g.Expect(etcd.IsUnavailable(err)).To(BeTrue(), "%s without a leader: %v", op, err)
	}
}

func TestFailNextAndHooks(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f, _, c := newCluster(t)

	f.FailNext(etcd.OpMemberList, rpctypes.ErrGRPCNoLeader, context.DeadlineExceeded)
	for i := range 2 {
		_, err := c.MemberList(ctx)
		g.Expect(etcd.IsUnavailable(err)).To(BeTrue(), "call %d: %v", i, err)
		g.Expect(callOp(err)).To(Equal(etcd.OpMemberList))
	}
	_, err := c.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "injected errors are one-shot")

	// A scripted CallError passes through untouched.
	scripted := &etcd.CallError{Op: etcd.OpStatus, Endpoint: "x", Err: rpctypes.ErrStopped}
	f.FailNext(etcd.OpStatus, scripted)
	_, err = c.Status(ctx, client1)
	g.Expect(err).To(BeIdenticalTo(error(scripted)))

	// Hooks see the call and may change the cluster; here the add succeeds
	// on the server but the response is "lost".
	var seen []etcdfake.Call
	f.SetHook(etcd.OpMemberAddAsLearner, func(call etcdfake.Call) error {
		seen = append(seen, call)
		f.AddLearner(call.PeerURLs[0])
		return context.DeadlineExceeded
	})
	_, _, err = c.MemberAddAsLearner(ctx, []string{peer2})
	g.Expect(etcd.IsUnavailable(err)).To(BeTrue())
	g.Expect(seen).To(HaveLen(1))
	g.Expect(seen[0].PeerURLs).To(Equal([]string{peer2}))
	g.Expect(seen[0].Endpoints).To(Equal([]string{client1}))
	f.SetHook(etcd.OpMemberAddAsLearner, nil)
	_, _, err = c.MemberAddAsLearner(ctx, []string{peer2})
	g.Expect(etcd.IsPeerURLExists(err)).To(BeTrue(), "the retry finds the first add: %v", err)
	g.Expect(f.Members()).To(HaveLen(2))
	g.Expect(f.Calls[len(f.Calls)-1]).To(Equal(etcdfake.Call{Op: etcd.OpMemberAddAsLearner, Endpoints: []string{client1}, PeerURLs: []string{peer2}}))

	g.Expect(func() { f.FailNext("MemberAdd", errors.New("x")) }).To(Panic(), "unknown operation names are test bugs")
}

func TestMoveLeader(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f, m1, c := newCluster(t)
	m2 := f.AddVoter("m2", peer2, client2)
	learner := f.AddLearner(peer3)

	g.Expect(c.MoveLeader(ctx, m1.ID)).To(Succeed())
	g.Expect(f.MovedLeader).To(BeEmpty(), "already the leader: nothing moved")

	err := c.MoveLeader(ctx, learner.ID)
	g.Expect(etcd.IsTransfereeNotReady(err)).To(BeTrue(), "to a learner: %v", err)
	g.Expect(f.MovedLeader).To(BeEmpty())

	err = c.MoveLeader(ctx, 0x1234)
	g.Expect(etcd.IsMemberNotFound(err)).To(BeTrue(), "to an unknown member: %v", err)

	f.SetEndpointError(client2, etcdfake.ErrUnreachable)
	err = c.MoveLeader(ctx, m2.ID)
	g.Expect(etcd.IsUnavailable(err)).To(BeTrue(), "to a member that is down: %v", err)
	f.SetEndpointError(client2, nil)

	before, err := c.Status(ctx, client1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.MoveLeader(ctx, m2.ID)).To(Succeed())
	g.Expect(f.Leader()).To(Equal(m2.ID))
	g.Expect(f.MovedLeader).To(Equal([]uint64{m2.ID}))
	after, err := c.Status(ctx, client1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.LeaderID).To(Equal(m2.ID))
	g.Expect(after.RaftTerm).To(BeNumerically(">", before.RaftTerm))
}

func TestAlarmsAndCompaction(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f, m1, c := newCluster(t)
	alarm := etcd.Alarm{MemberID: m1.ID, Type: etcd.AlarmNoSpace}
	f.RaiseAlarm(alarm)

	alarms, err := c.AlarmList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alarms).To(Equal([]etcd.Alarm{alarm}))
	st, err := c.Status(ctx, client1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Errors).To(HaveLen(1))

	g.Expect(c.AlarmDisarm(ctx, etcd.Alarm{})).NotTo(Succeed())
	g.Expect(f.Alarms()).To(HaveLen(1))
	g.Expect(c.AlarmDisarm(ctx, alarm)).To(Succeed())
	g.Expect(f.Alarms()).To(BeEmpty())
	g.Expect(f.Disarmed).To(Equal([]etcd.Alarm{alarm}))

	f.SetRevision(100)
	g.Expect(c.Compact(ctx, 50)).To(Succeed())
	g.Expect(etcd.IsCompacted(c.Compact(ctx, 50))).To(BeTrue())
	g.Expect(errors.Is(c.Compact(ctx, 101), rpctypes.ErrFutureRev)).To(BeTrue())
	g.Expect(f.Compacted).To(Equal([]int64{50}))
	g.Expect(c.Defragment(ctx, client1)).To(Succeed())
	g.Expect(f.Defragmented).To(Equal([]string{client1}))

	f.SetUsage(client1, etcdfake.Usage{DBSize: 300 << 20, InUse: 100 << 20, Quota: 2 << 30})
	st, err = c.Status(ctx, client1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]int64{st.DBSize, st.DBSizeInUse, st.DBSizeQuota}).To(Equal([]int64{300 << 20, 100 << 20, 2 << 30}))
	g.Expect(c.Defragment(ctx, client1)).To(Succeed())
	g.Expect(f.UsageOf(client1)).To(Equal(etcdfake.Usage{DBSize: 100 << 20, InUse: 100 << 20, Quota: 2 << 30}), "defragmenting shrinks the file to what is in use")
}

func TestFakeAsClient(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := etcdfake.New()
	var c etcd.Client = f
	_, err := c.MemberList(ctx)
	g.Expect(etcd.IsUnavailable(err)).To(BeTrue(), "no members, nobody answers: %v", err)
	m1 := f.AddVoter("m1", peer1, client1)
	list, err := c.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Members).To(Equal([]etcd.Member{m1}))
	g.Expect(c.Endpoints()).To(Equal([]string{client1}))
	g.Expect(c.Close()).To(Succeed())
}

func TestConcurrentUse(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f, _, c := newCluster(t)
	f.SetHook(etcd.OpStatus, func(etcdfake.Call) error { f.SetRevision(2); return nil })
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, _ = c.MemberList(ctx)
			_, _ = c.Status(ctx, client1)
			_ = c.Health(ctx, client1)
		})
	}
	wg.Wait()
	count := map[string]int{}
	for _, call := range f.Calls {
		count[call.Op]++
	}
	g.Expect(count).To(Equal(map[string]int{etcd.OpDial: 1, etcd.OpMemberList: 8, etcd.OpStatus: 8, etcd.OpHealth: 8}))
}

func TestForceNewCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f, m1, c := newCluster(t)
	m2 := f.AddVoter("m2", peer2, client2)
	f.AddVoter("m3", peer3, client3)
	f.SetLeader(0)
	_, err := c.MemberList(ctx)
	g.Expect(err).To(HaveOccurred(), "no leader, no linearizable list")

	f.ForceNewCluster(m2.ID)
	c2, err := f.Dial(ctx, []string{client2})
	g.Expect(err).NotTo(HaveOccurred())
	list, err := c2.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.ClusterID).To(Equal(etcdfake.DefaultClusterID), "the cluster ID is kept")
	g.Expect(list.Members).To(HaveLen(1))
	g.Expect(list.Members[0].ID).To(Equal(m2.ID), "so is the member ID")
	st, err := c2.Status(ctx, client2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.IsLeader()).To(BeTrue())
	g.Expect(f.Removed).To(BeEmpty(), "nobody removed anyone")
	_, err = c.Status(ctx, client1)
	g.Expect(err).To(HaveOccurred(), "%s is no longer a member", etcd.FormatMemberID(m1.ID))
}

func TestUpdate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f, m1, c := newCluster(t)
	m2 := f.AddVoter("m2", peer2, client2)

	_, err := c.MemberUpdate(ctx, 42, []string{"https://m3:2380"})
	g.Expect(etcd.IsMemberNotFound(err)).To(BeTrue(), "unknown: %v", err)
	_, err = c.MemberUpdate(ctx, m2.ID, m1.PeerURLs)
	g.Expect(err).To(HaveOccurred(), "another member's URL is refused")

	const moved = "https://m2:2380"
	list, err := c.MemberUpdate(ctx, m2.ID, []string{moved})
	g.Expect(err).NotTo(HaveOccurred())
	got, ok := list.Find(m2.ID)
	g.Expect(ok).To(BeTrue())
	g.Expect(got.PeerURLs).To(Equal([]string{moved}))
	g.Expect(got.Name).To(Equal("m2"), "only the peer URLs change")
}
