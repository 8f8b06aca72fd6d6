package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

func dial(t *testing.T, endpoints []string, opts ...etcd.Option) etcd.Client {
	t.Helper()
	c, err := etcd.NewDialer(opts...).Dial(testCtx(t), endpoints)
	if err != nil {
		t.Fatalf("failed to dial %v: %v", endpoints, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func expectCallError(g *WithT, err error, op, endpoint string) {
	var ce *etcd.CallError
	g.ExpectWithOffset(1, errors.As(err, &ce)).To(BeTrue(), "want *CallError, got %T: %v", err, err)
	g.ExpectWithOffset(1, ce.Op).To(Equal(op))
	g.ExpectWithOffset(1, ce.Endpoint).To(Equal(endpoint))
}

func TestSingleMember(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := testCtx(t)
	m := startCluster(t, memberOpts{})
	c := dial(t, []string{m.clientURL})
	clusterID := uint64(m.etcd.Server.Cluster().ID())
	self := etcd.Member{ID: m.id(), Name: "m1", PeerURLs: []string{m.peerURL}, ClientURLs: []string{m.clientURL}}

	g.Expect(c.Endpoints()).To(Equal([]string{m.clientURL}))

	list, err := c.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list).To(Equal(etcd.MemberList{ClusterID: clusterID, Members: []etcd.Member{self}}))

	local, err := c.MemberListAt(ctx, m.clientURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(local).To(Equal(list))

	st, err := c.Status(ctx, m.clientURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Endpoint).To(Equal(m.clientURL))
	g.Expect(st.MemberID).To(Equal(m.id()))
	g.Expect(st.ClusterID).To(Equal(clusterID))
	g.Expect(st.LeaderID).To(Equal(m.id()))
	g.Expect(st.IsLeader()).To(BeTrue())
	g.Expect(st.IsLearner).To(BeFalse())
	g.Expect(st.RaftTerm).To(BeNumerically(">", 0))
	g.Expect(st.RaftIndex).To(BeNumerically(">", 0))
	g.Expect(st.RaftAppliedIndex).To(BeNumerically(">", 0))
	g.Expect(st.DBSize).To(BeNumerically(">", 0))
	g.Expect(st.DBSizeInUse).To(BeNumerically(">", 0))
	g.Expect(st.Version).To(MatchRegexp(`^3\.\d+\.\d+`))
	g.Expect(st.Errors).To(BeEmpty())

	g.Expect(c.Health(ctx, m.clientURL)).To(Succeed())

	alarms, err := c.AlarmList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alarms).To(BeEmpty())

	raw := rawClient(t, m)
	var rev int64
	for i := range 3 {
		resp, err := raw.Put(ctx, fmt.Sprintf("k%d", i), "v")
		g.Expect(err).NotTo(HaveOccurred())
		rev = resp.Header.Revision
	}
	g.Expect(c.Compact(ctx, rev)).To(Succeed())
	err = c.Compact(ctx, rev)
	g.Expect(classify(err)).To(Equal([]string{"Compacted"}))
	expectCallError(g, err, "Compact", "")
	err = c.Compact(ctx, rev+1000)
	g.Expect(errors.Is(err, rpctypes.ErrFutureRev)).To(BeTrue(), "got %v", err)
	g.Expect(classify(err)).To(BeEmpty())

	g.Expect(c.Defragment(ctx, m.clientURL)).To(Succeed())

	// The leader already leads: nothing to do.
	g.Expect(c.MoveLeader(ctx, m.id())).To(Succeed())
	err = c.MoveLeader(ctx, 0x1234)
	g.Expect(classify(err)).To(Equal([]string{"MemberNotFound"}), "got %v", err)
	expectCallError(g, err, "MoveLeader", "")

	g.Expect(c.Close()).To(Succeed())
	g.Expect(c.Close()).To(Succeed(), "Close must be idempotent")
}

// TestMembershipErrors provokes each membership error from a real server and
// checks that exactly the intended classifier recognises it.
func TestMembershipErrors(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := testCtx(t)
	m := startCluster(t, memberOpts{maxLearners: 1})
	c := dial(t, []string{m.clientURL})
	// Nobody listens on these: the learner is added but never starts.
	peerA, peerB := freeURL(t), freeURL(t)

	learner, list, err := c.MemberAddAsLearner(ctx, []string{peerA})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(learner.ID).NotTo(BeZero())
	g.Expect(learner.Name).To(BeEmpty())
	g.Expect(learner.PeerURLs).To(Equal([]string{peerA}))
	g.Expect(learner.IsLearner).To(BeTrue())
	g.Expect(list.ClusterID).To(Equal(uint64(m.etcd.Server.Cluster().ID())))
	g.Expect(list.Members).To(ConsistOf(
		HaveField("ID", m.id()),
		etcd.Member{ID: learner.ID, PeerURLs: []string{peerA}, IsLearner: true},
	))

	steps := []struct {
		name string
		call func() error
		op   string
		want []string
	}{
		{"remove unknown member", func() error { _, err := c.MemberRemove(ctx, 0xdeadbeef); return err }, "MemberRemove", []string{"MemberNotFound"}},
		{"promote unknown member", func() error { _, err := c.MemberPromote(ctx, 0xdeadbeef); return err }, "MemberPromote", []string{"MemberNotFound"}},
		{"promote a voter", func() error { _, err := c.MemberPromote(ctx, m.id()); return err }, "MemberPromote", []string{"MemberNotLearner"}},
		{"promote a learner that never started", func() error { _, err := c.MemberPromote(ctx, learner.ID); return err }, "MemberPromote", []string{"LearnerNotReady"}},
		// Within the same second etcd reports ErrMemberExist here, later
		// ErrPeerURLExist; the classifier treats them alike.
		{"add the learner's peer URL again", func() error { _, _, err := c.MemberAddAsLearner(ctx, []string{peerA}); return err }, "MemberAddAsLearner", []string{"PeerURLExists"}},
		{"add the voter's peer URL", func() error { _, _, err := c.MemberAddAsLearner(ctx, []string{m.peerURL}); return err }, "MemberAddAsLearner", []string{"PeerURLExists"}},
		{"add a second learner", func() error { _, _, err := c.MemberAddAsLearner(ctx, []string{peerB}); return err }, "MemberAddAsLearner", []string{"TooManyLearners"}},
		{"add an invalid URL", func() error { _, _, err := c.MemberAddAsLearner(ctx, []string{"not a url"}); return err }, "MemberAddAsLearner", []string{}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			g := NewWithT(t)
			err := s.call()
			g.Expect(err).To(HaveOccurred())
			g.Expect(classify(err)).To(Equal(s.want), "error: %v", err)
			expectCallError(g, err, s.op, "")
		})
	}

	list, err = c.MemberRemove(ctx, learner.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Members).To(ConsistOf(HaveField("ID", m.id())))
	_, err = c.MemberRemove(ctx, learner.ID)
	g.Expect(classify(err)).To(Equal([]string{"MemberNotFound"}), "removing a removed member: %v", err)
}

// TestLearnerLifecycle runs a second real member through learner, voter,
// leader and removal.
func TestLearnerLifecycle(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := testCtx(t)
	m1 := startCluster(t, memberOpts{})
	c := dial(t, []string{m1.clientURL})

	m2 := newMember(t, "m2")
	learner, _, err := c.MemberAddAsLearner(ctx, []string{m2.peerURL})
	g.Expect(err).NotTo(HaveOccurred())
	m2.start(t, memberOpts{initialCluster: []string{initialClusterEntry(m1)}})
	g.Expect(m2.id()).To(Equal(learner.ID))

	st, err := c.Status(ctx, m2.clientURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.MemberID).To(Equal(learner.ID))
	g.Expect(st.IsLearner).To(BeTrue())
	g.Expect(st.LeaderID).To(Equal(m1.id()))

	// Learners serve Status only; both per-endpoint reads are refused.
	_, err = c.MemberListAt(ctx, m2.clientURL)
	g.Expect(classify(err)).To(Equal([]string{"NotSupportedForLearner"}), "MemberListAt: %v", err)
	expectCallError(g, err, "MemberListAt", m2.clientURL)
	err = c.Health(ctx, m2.clientURL)
	g.Expect(classify(err)).To(Equal([]string{"NotSupportedForLearner"}), "Health: %v", err)

	// Round robin hands every other call to the learner; the client must
	// still get through to the voter every time.
	both := dial(t, []string{m2.clientURL, m1.clientURL})
	for range 6 {
		list, err := both.MemberList(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(list.Members).To(HaveLen(2))
	}

	// Leadership cannot go to a learner: refused at once, not after the
	// call's deadline.
	err = both.MoveLeader(ctx, learner.ID)
	g.Expect(classify(err)).To(Equal([]string{"TransfereeNotReady"}), "to a learner: %v", err)
	expectCallError(g, err, "MoveLeader", m2.clientURL)
	err = c.MoveLeader(ctx, learner.ID)
	g.Expect(classify(err)).To(Equal([]string{"TransfereeNotReady"}), "to a learner not among the endpoints: %v", err)
	expectCallError(g, err, "MoveLeader", "")

	g.Eventually(func() error {
		_, err := c.MemberPromote(ctx, learner.ID)
		if err != nil && !etcd.IsLearnerNotReady(err) {
			return StopTrying("unexpected promote error").Wrap(err)
		}
		return err
	}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())

	// Right after the promotion m2 may not have applied it yet (it learns
	// the entry committed with the leader's next message); until it has,
	// the move is refused as not ready rather than timing out.
	g.Eventually(func() error {
		err := both.MoveLeader(ctx, m2.id())
		if err != nil && !etcd.IsTransfereeNotReady(err) {
			return StopTrying("unexpected move error").Wrap(err)
		}
		return err
	}).WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(Succeed())
	st, err = c.Status(ctx, m1.clientURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.LeaderID).To(Equal(m2.id()))

	local, err := c.MemberListAt(ctx, m2.clientURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(local.Members).To(ContainElements(
		etcd.Member{ID: m1.id(), Name: "m1", PeerURLs: []string{m1.peerURL}, ClientURLs: []string{m1.clientURL}},
		etcd.Member{ID: m2.id(), Name: "m2", PeerURLs: []string{m2.peerURL}, ClientURLs: []string{m2.clientURL}},
	))

	// c only knows m1, which no longer leads: it must find m2 through the
	// member list to hand leadership back.
	g.Expect(c.MoveLeader(ctx, m1.id())).To(Succeed())
	st, err = c.Status(ctx, m2.clientURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.LeaderID).To(Equal(m1.id()))

	g.Eventually(func() error {
		_, err := c.MemberRemove(ctx, m2.id())
		if err != nil && !etcd.IsUnhealthyCluster(err) {
			return StopTrying("unexpected remove error").Wrap(err)
		}
		return err
	}).WithTimeout(15 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

	list, err := c.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Members).To(ConsistOf(HaveField("ID", m1.id())))
	g.Eventually(m2.etcd.Server.StopNotify()).WithTimeout(10 * time.Second).Should(BeClosed())
}

func TestAlarms(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := testCtx(t)
	m := startCluster(t, memberOpts{quotaBytes: 1 << 20})
	c := dial(t, []string{m.clientURL})

	raw := rawClient(t, m)
	val := strings.Repeat("x", 128<<10)
	var putErr error
	// The quota is checked against the backend's size as of its last
	// commit, which runs every 100 ms; puts faster than that all fit until
	// the next one, so keep going until etcd says no (at most 64 MiB).
	for i := 0; i < 512 && putErr == nil; i++ {
		_, putErr = raw.Put(ctx, fmt.Sprintf("k%d", i), val)
	}
	g.Expect(errors.Is(putErr, rpctypes.ErrNoSpace)).To(BeTrue(), "filling the quota: %v", putErr)
	g.Expect(etcd.IsNoSpace(putErr)).To(BeTrue())

	want := etcd.Alarm{MemberID: m.id(), Type: etcd.AlarmNoSpace}
	alarms, err := c.AlarmList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alarms).To(Equal([]etcd.Alarm{want}))

	st, err := c.Status(ctx, m.clientURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Errors).NotTo(BeEmpty())
	g.Expect(st.DBSizeQuota).To(Equal(int64(1<<20)), "the member reports the quota it runs with")

	for _, bad := range []etcd.Alarm{{}, {MemberID: m.id()}, {MemberID: m.id(), Type: "NONE"}, {Type: etcd.AlarmNoSpace}} {
		err := c.AlarmDisarm(ctx, bad)
		g.Expect(err).To(HaveOccurred(), "disarming %+v", bad)
		expectCallError(g, err, "AlarmDisarm", "")
	}
	alarms, err = c.AlarmList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alarms).To(Equal([]etcd.Alarm{want}), "a rejected disarm must not touch the alarms")

	g.Expect(c.AlarmDisarm(ctx, want)).To(Succeed())
	alarms, err = c.AlarmList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alarms).To(BeEmpty())
}

// TestCompactAndDefragment checks what maintenance relies on: the quota
// as the member reports it, and a compaction followed by a defragmentation
// giving the space of the history back to the file system. What Status
// calls in use right after a compaction is not relied on: bbolt frees the
// pages of the last batch only with the next write.
func TestCompactAndDefragment(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := testCtx(t)
	m := startCluster(t, memberOpts{})
	c := dial(t, []string{m.clientURL})
	raw := rawClient(t, m)
	val := strings.Repeat("x", 64<<10)
	var rev int64
	// 16 MiB of revisions of 16 keys: almost all of it is history. Written
	// as 16 transactions of 1 MiB (under etcd's 1.5 MiB request limit)
	// rather than 256 puts: each write is an fsync, and 256 of them did
	// not always fit the test's deadline on a loaded 2-core machine.
	for range 16 {
		var puts []clientv3.Op
		for k := range 16 {
			puts = append(puts, clientv3.OpPut(fmt.Sprintf("k%d", k), val))
		}
		resp, err := raw.Txn(ctx).Then(puts...).Commit()
		g.Expect(err).NotTo(HaveOccurred())
		rev = resp.Header.Revision
	}
	// The backend commits every 100 ms; Status reports the last commit.
	var before etcd.EndpointStatus
	g.Eventually(func() (int64, error) {
		var err error
		before, err = c.Status(ctx, m.clientURL)
		return before.DBSize, err
	}).WithTimeout(10 * time.Second).Should(BeNumerically(">", 12<<20))
	g.Expect(before.DBSizeQuota).To(Equal(int64(2<<30)), "etcd's default quota when none is set")

	g.Expect(c.Compact(ctx, rev)).To(Succeed())
	g.Expect(c.Defragment(ctx, m.clientURL)).To(Succeed())
	after, err := c.Status(ctx, m.clientURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.DBSize).To(BeNumerically("<", before.DBSize/2), "the file shrinks: %d from %d", after.DBSize, before.DBSize)
	g.Expect(after.DBSizeInUse).To(BeNumerically("<=", after.DBSize))
}

func TestAuth(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := testCtx(t)
	m := startCluster(t, memberOpts{})
	eps := []string{m.clientURL}

	raw := rawClient(t, m)
	_, err := raw.RoleAdd(ctx, "root")
	g.Expect(err).NotTo(HaveOccurred())
	for _, u := range []string{"root", "viewer"} {
		_, err = raw.UserAdd(ctx, u, u+"-pw")
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err = raw.UserGrantRole(ctx, "root", "root")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = raw.AuthEnable(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	anonymous := dial(t, eps)
	_, _, err = anonymous.MemberAddAsLearner(ctx, []string{freeURL(t)})
	g.Expect(classify(err)).To(Equal([]string{"AuthRequired"}), "anonymous add: %v", err)
	err = anonymous.Health(ctx, m.clientURL)
	g.Expect(classify(err)).To(Equal([]string{"AuthRequired"}), "anonymous health: %v", err)

	_, err = etcd.NewDialer(etcd.WithCredentials("root", "wrong")).Dial(ctx, eps)
	g.Expect(classify(err)).To(Equal([]string{"AuthFailed"}), "wrong password: %v", err)
	expectCallError(g, err, "Dial", "")

	viewer := dial(t, eps, etcd.WithCredentials("viewer", "viewer-pw"))
	_, _, err = viewer.MemberAddAsLearner(ctx, []string{freeURL(t)})
	g.Expect(classify(err)).To(Equal([]string{"AuthFailed"}), "add without root role: %v", err)
	// The read went through raft before permission was checked.
	g.Expect(viewer.Health(ctx, m.clientURL)).To(Succeed())

	root := dial(t, eps, etcd.WithCredentials("root", "root-pw"))
	g.Expect(root.Health(ctx, m.clientURL)).To(Succeed())
	added, _, err := root.MemberAddAsLearner(ctx, []string{freeURL(t)})
	g.Expect(err).NotTo(HaveOccurred())
	// Single-endpoint calls must carry the token too.
	_, err = root.MemberListAt(ctx, m.clientURL)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = root.MemberRemove(ctx, added.ID)
	g.Expect(err).NotTo(HaveOccurred())
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := testCtx(t)
	dead := freeURL(t) // nothing listens here

	// Dial does not wait for the endpoint: nothing listens there, so a Dial
	// that waited for a connection could only end in an error.
	c, err := etcd.NewDialer().Dial(ctx, []string{dead})
	g.Expect(err).NotTo(HaveOccurred(), "Dial must not wait for the endpoint")
	t.Cleanup(func() { _ = c.Close() })

	// Calls aimed at one endpoint fail as soon as the connection is refused:
	// with the connection error, not at their deadline, which would surface
	// as context.DeadlineExceeded.
	single := map[string]func() error{
		"Status":       func() error { _, err := c.Status(ctx, dead); return err },
		"MemberListAt": func() error { _, err := c.MemberListAt(ctx, dead); return err },
		"Health":       func() error { return c.Health(ctx, dead) },
		"Defragment":   func() error { return c.Defragment(ctx, dead) },
	}
	for op, call := range single {
		err := call()
		g.Expect(classify(err)).To(Equal([]string{"Unavailable"}), "%s: %v", op, err)
		expectCallError(g, err, op, dead)
		g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeFalse(), "%s must fail fast, not at its deadline: %v", op, err)
	}
	err = c.MoveLeader(ctx, 1)
	g.Expect(classify(err)).To(Equal([]string{"Unavailable"}), "MoveLeader: %v", err)

	// Balanced calls wait for some endpoint to come up, but only until
	// their own timeout: the call ends with context.DeadlineExceeded while
	// the caller's context is still live, so the deadline that ran out was
	// the call's.
	short := dial(t, []string{dead}, etcd.WithCallTimeout(300*time.Millisecond))
	_, err = short.MemberList(ctx)
	g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue(), "got %v", err)
	g.Expect(ctx.Err()).NotTo(HaveOccurred(), "the caller's context must not be what ended the call")
	g.Expect(classify(err)).To(Equal([]string{"Unavailable"}))

	// The caller giving up is not the cluster being unavailable.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.MemberList(cancelled)
	g.Expect(errors.Is(err, context.Canceled)).To(BeTrue(), "got %v", err)
	g.Expect(classify(err)).To(BeEmpty())

	// With credentials Dial must fetch a token, bounded by the dial timeout:
	// it ends with context.DeadlineExceeded while the caller's context is
	// still live.
	_, err = etcd.NewDialer(etcd.WithCredentials("root", "pw"), etcd.WithDialTimeout(300*time.Millisecond)).Dial(ctx, []string{dead})
	g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue(), "dial with credentials: %v", err)
	g.Expect(ctx.Err()).NotTo(HaveOccurred(), "the caller's context must not be what ended the dial")
	g.Expect(classify(err)).To(Equal([]string{"Unavailable"}), "dial with credentials: %v", err)
	expectCallError(g, err, "Dial", "")

	// The caller's deadline bounds the token fetch too, however long the
	// dial timeout: Dial takes no other context, so without folding the
	// caller's deadline in, this Dial would wait for an hour.
	callerShort, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	_, err = etcd.NewDialer(etcd.WithCredentials("root", "pw"), etcd.WithDialTimeout(time.Hour)).Dial(callerShort, []string{dead})
	g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue(), "dial with credentials under a short caller deadline: %v", err)
	g.Expect(classify(err)).To(Equal([]string{"Unavailable"}), "dial with credentials under a short caller deadline: %v", err)

	expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	_, err = etcd.NewDialer().Dial(expired, []string{dead})
	g.Expect(classify(err)).To(Equal([]string{"Unavailable"}))

	_, err = etcd.NewDialer().Dial(ctx, nil)
	g.Expect(err).To(HaveOccurred())
	g.Expect(classify(err)).To(BeEmpty())
}

// TestQuorumLoss checks what a member cut off from quorum says: reads that
// need a leader fail fast as unavailable, while its serializable local view
// and its status still answer.
func TestQuorumLoss(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := testCtx(t)
	m1 := startCluster(t, memberOpts{})
	// A generous call timeout: the calls that must fail fast show it by the
	// error they fail with, and a slow machine has room to answer.
	c := dial(t, []string{m1.clientURL}, etcd.WithCallTimeout(10*time.Second))

	m2 := newMember(t, "m2")
	learner, _, err := c.MemberAddAsLearner(ctx, []string{m2.peerURL})
	g.Expect(err).NotTo(HaveOccurred())
	m2.start(t, memberOpts{initialCluster: []string{initialClusterEntry(m1)}})
	g.Eventually(func() error {
		_, err := c.MemberPromote(ctx, learner.ID)
		if err != nil && !etcd.IsLearnerNotReady(err) {
			return StopTrying("unexpected promote error").Wrap(err)
		}
		return err
	}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())

	// With one of two voters gone, m1 steps down once it notices.
	m2.stop()
	g.Eventually(func(g Gomega) {
		st, err := c.Status(ctx, m1.clientURL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.LeaderID).To(BeZero())
	}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())

	// Health does not wait for a leader: a read left to wait would end at the
	// call's deadline, with context.DeadlineExceeded, not with ErrNoLeader.
	err = c.Health(ctx, m1.clientURL)
	g.Expect(errors.Is(err, rpctypes.ErrNoLeader)).To(BeTrue(), "got %v", err)
	g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeFalse(), "Health must not wait for a leader: %v", err)
	g.Expect(classify(err)).To(Equal([]string{"Unavailable"}))

	// etcd refuses a reconfiguration unless the voters it has been connected
	// to for the last 5 s (its health interval), itself included, would form
	// a quorum of the membership with the new member in it, counted as down.
	// With m2 down that never holds, so the refusal does not depend on how
	// fast this test runs. The operator retries it.
	_, _, err = c.MemberAddAsLearner(ctx, []string{freeURL(t)})
	g.Expect(classify(err)).To(Equal([]string{"Unavailable", "UnhealthyCluster"}), "add with a voter down: %v", err)

	local, err := c.MemberListAt(ctx, m1.clientURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(local.Members).To(ConsistOf(HaveField("ID", m1.id()), HaveField("ID", m2.id())))

	// A linearizable read without a leader waits, until its own deadline.
	short := dial(t, []string{m1.clientURL}, etcd.WithCallTimeout(time.Second))
	_, err = short.MemberList(ctx)
	g.Expect(classify(err)).To(Equal([]string{"Unavailable"}), "linearizable MemberList without a leader: %v", err)

	err = c.MoveLeader(ctx, m1.id())
	g.Expect(errors.Is(err, rpctypes.ErrNoLeader)).To(BeTrue(), "got %v", err)
	g.Expect(classify(err)).To(Equal([]string{"Unavailable"}))
}

func TestAdvanceLog(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := testCtx(t)
	m := startCluster(t, memberOpts{})
	c := dial(t, []string{m.clientURL})
	before, err := c.Status(ctx, m.clientURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.AdvanceLog(ctx, 200)).To(Succeed())
	after, err := c.Status(ctx, m.clientURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.RaftIndex-before.RaftIndex).To(BeNumerically(">=", 200), "every call is a committed entry")
	g.Expect(after.Revision).To(Equal(before.Revision), "and no key changes")
	leases, err := rawClient(t, m).Leases(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(leases.Leases).To(BeEmpty(), "nor is a lease left")
}
