package etcdcluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
	"github.com/quorumctl/etcd-operator/internal/unreachable"
)

func (h *harness) silence(names ...string) {
	for _, n := range names {
		h.etcd.SetEndpointError(clientURL(n), status.Error(codes.Unavailable, "dropped"))
	}
}

func (h *harness) unsilence(names ...string) {
	for _, n := range names {
		h.etcd.SetEndpointError(clientURL(n), nil)
	}
}

// A cluster none of whose members answers is looked at less and less
// often, up to every 30 s, and says so; a spec edit is acted on at once
// and starts the count again; the first answer ends it.
func TestAClusterThatDoesNotAnswerIsBackedOff(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	healthy := h.reconcile().RequeueAfter
	h.g.Expect(healthy).To(BeNumerically(">", 0))
	h.g.Expect(h.r.memos.get(h.cluster()).unreachableStreak()).To(BeZero())

	h.silence("demo-a", "demo-b", "demo-c")
	var waits []time.Duration
	for range 5 {
		waits = append(waits, h.reconcile().RequeueAfter)
	}
	// 5, 10, 20, 30, 30 s, each past the first shortened by the cluster's
	// own fraction of a quarter (unreachable.Streak.Delay).
	uid := string(h.cluster().UID)
	var want []time.Duration
	for i := range 5 {
		want = append(want, unreachable.Streak{Passes: i + 1}.Delay(uid))
	}
	h.g.Expect(waits).To(Equal(want))
	h.g.Expect(waits[0]).To(Equal(unreachable.First))
	h.g.Expect(waits[3]).To(BeNumerically(">=", unreachable.Max*3/4))
	h.g.Expect(waits[3]).To(Equal(waits[4]), "the wait stays at its longest")
	longest := fmt.Sprintf("asking again in %s", waits[4])
	avail := h.condition(v1alpha1.AvailableCondition)
	h.g.Expect(avail.Reason).To(Equal(v1alpha1.EtcdUnreachableReason))
	h.g.Expect(avail.Message).To(ContainSubstring(longest))
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Message).To(ContainSubstring(longest))

	// The edit's pass is its watch event's; it adopts the edit, and the
	// look after it comes as soon as after a first failure.
	h.setReplicas(5)
	h.g.Expect(h.reconcile().RequeueAfter).To(Equal(unreachable.First))
	h.g.Expect(h.cluster().Status.Observed.Replicas).To(BeEquivalentTo(5), "the edit is adopted while no member answers")
	h.g.Expect(h.condition(v1alpha1.AvailableCondition).Message).NotTo(ContainSubstring("asking again"))
	h.g.Expect(h.reconcile().RequeueAfter).To(Equal(want[1]), "and the count goes on under the new spec")

	h.unsilence("demo-a", "demo-b", "demo-c")
	h.reconcile()
	h.g.Expect(h.r.memos.get(h.cluster()).unreachableStreak()).To(BeZero(), "an answer ends the streak")
	h.g.Expect(h.condition(v1alpha1.AvailableCondition).Reason).NotTo(Equal(v1alpha1.EtcdUnreachableReason))
}

// Backoff is for silence only: a cluster that lost its quorum but whose
// members answer (serializably, or through their metrics) is looked at as
// often as ever, since self-heal and recovery judge it from those answers.
func TestAClusterThatAnswersWithoutAQuorumIsNotBackedOff(t *testing.T) {
	t.Run("members answer with their own lists", func(t *testing.T) {
		h := newHarness(t)
		h.formed(3, "demo-a", "demo-b", "demo-c")
		h.reconcile()
		h.etcd.SetLeader(0)
		for range 4 {
			h.g.Expect(h.reconcile().RequeueAfter).To(BeNumerically("<=", requeueUnreachable))
		}
		h.g.Expect(h.r.memos.get(h.cluster()).unreachableStreak()).To(BeZero())
	})
	t.Run("a member answers through its metrics alone", func(t *testing.T) {
		h := newHarness(t)
		h.formed(3, "demo-a", "demo-b", "demo-c")
		h.reconcile()
		h.silence("demo-a", "demo-b", "demo-c")
		url, err := etcd.MetricsURLFor(clientURL("demo-a"), v1alpha1.MetricsPort)
		h.g.Expect(err).NotTo(HaveOccurred())
		id, err := etcd.ParseMemberID(h.member("demo-a").Status.MemberID)
		h.g.Expect(err).NotTo(HaveOccurred())
		h.r.Metrics = metricsByURL{url: {MemberID: id, AppliedIndex: 1, CommittedIndex: 1, Revision: 1}}
		for range 4 {
			h.g.Expect(h.reconcile().RequeueAfter).To(BeNumerically("<=", requeueUnreachable))
		}
		h.g.Expect(h.r.memos.get(h.cluster()).unreachableStreak()).To(BeZero())
	})
}

// recordingDialer hands out clients whose every call records the deadline
// it ran under, whose linearizable list fails as without a quorum, and
// whose own-list asks each wait for all of them to have started: asked in
// turn, the first would wait out its deadline alone.
type recordingDialer struct {
	etcd.Dialer
	mu        sync.Mutex
	deadlines map[string][]time.Time
	asks      int
	together  chan struct{}
	n         int
	inTurn    bool
}

func (d *recordingDialer) record(ctx context.Context, op string) {
	dl, ok := ctx.Deadline()
	d.mu.Lock()
	defer d.mu.Unlock()
	if !ok {
		dl = time.Time{}
	}
	d.deadlines[op] = append(d.deadlines[op], dl)
}

func (d *recordingDialer) Dial(ctx context.Context, eps []string, opts ...etcd.DialOption) (etcd.Client, error) {
	d.record(ctx, etcd.OpDial)
	c, err := d.Dialer.Dial(ctx, eps, opts...)
	return &recordingClient{Client: c, d: d}, err
}

type recordingClient struct {
	etcd.Client
	d *recordingDialer
}

func (c *recordingClient) MemberList(ctx context.Context) (etcd.MemberList, error) {
	c.d.record(ctx, etcd.OpMemberList)
	return etcd.MemberList{}, &etcd.CallError{Op: etcd.OpMemberList, Err: context.DeadlineExceeded}
}

func (c *recordingClient) MemberListAt(ctx context.Context, ep string) (etcd.MemberList, error) {
	c.d.record(ctx, etcd.OpMemberListAt)
	c.d.mu.Lock()
	c.d.asks++
	if c.d.asks == c.d.n {
		close(c.d.together)
	}
	c.d.mu.Unlock()
	select {
	case <-c.d.together:
	case <-ctx.Done():
		c.d.mu.Lock()
		c.d.inTurn = true
		c.d.mu.Unlock()
		return etcd.MemberList{}, &etcd.CallError{Op: etcd.OpMemberListAt, Endpoint: ep, Err: ctx.Err()}
	}
	return etcd.MemberList{}, &etcd.CallError{Op: etcd.OpMemberListAt, Endpoint: ep, Err: status.Error(codes.Unavailable, "dropped")}
}

// One look at etcd is bounded as a whole, every call in it under the
// look's deadline, and the members are asked for their own lists at once.
func TestALookAtEtcdIsBoundedAndAsksMembersTogether(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	d := &recordingDialer{Dialer: h.etcd, deadlines: map[string][]time.Time{}, together: make(chan struct{}), n: 3}
	h.r.Dialer = d
	began := time.Now()
	h.reconcile()
	d.mu.Lock()
	defer d.mu.Unlock()
	h.g.Expect(d.inTurn).To(BeFalse(), "every member was asked before any ask ended")
	h.g.Expect(d.asks).To(Equal(3))
	for _, op := range []string{etcd.OpDial, etcd.OpMemberList, etcd.OpMemberListAt} {
		h.g.Expect(d.deadlines[op]).NotTo(BeEmpty(), op)
		for _, dl := range d.deadlines[op] {
			h.g.Expect(dl.IsZero()).To(BeFalse(), "%s runs under a deadline", op)
			h.g.Expect(dl).To(BeTemporally("<=", began.Add(inspectDeadline).Add(time.Second)), "%s runs within the look's deadline", op)
		}
	}
}

// A look at a cluster that does not answer fits its deadline step by step:
// the dial, the quorum's list, then the members' own lists and metrics
// together. Raising one of them past it would cut the metrics a lost
// quorum is judged by.
func TestTheLookAtASilentClusterFitsItsDeadline(t *testing.T) {
	if worst := etcd.DefaultDialTimeout + quorumReadTimeout + endpointTimeout; worst > inspectDeadline {
		t.Fatalf("a silent cluster's look takes up to %v, past its deadline of %v", worst, inspectDeadline)
	}
}

// A look at a cluster that was silent on the last one starts with the
// members' own lists, asked at once, and stops there when none answers:
// the linearizable list, which waits out its timeout, is not tried. Once a
// member answers, the full look follows in the same pass.
func TestALookAtAClusterSilentBeforeStartsWithTheCheapAsks(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.reconcile()
	h.silence("demo-a", "demo-b", "demo-c")
	// Counted by hooks, under the fake's own discipline: asks still being
	// cancelled when a pass returns may yet come in.
	var linearizable, own atomic.Int32
	h.etcd.SetHook(etcd.OpMemberList, func(etcdfake.Call) error { linearizable.Add(1); return nil })
	h.etcd.SetHook(etcd.OpMemberListAt, func(etcdfake.Call) error { own.Add(1); return nil })
	lists := func() (int, int) {
		return int(linearizable.Swap(0)), int(own.Swap(0))
	}
	h.reconcile()
	lin, asked := lists()
	h.g.Expect(lin).To(Equal(1), "a first silent look tries the quorum")
	h.g.Expect(asked).To(Equal(3))
	h.reconcile()
	lin, asked = lists()
	h.g.Expect(lin).To(BeZero(), "the next one does not")
	h.g.Expect(asked).To(Equal(3))
	h.g.Expect(h.condition(v1alpha1.AvailableCondition).Reason).To(Equal(v1alpha1.EtcdUnreachableReason))

	h.unsilence("demo-b")
	h.reconcile()
	lin, _ = lists()
	h.g.Expect(lin).To(BeNumerically(">=", 1), "a member answered: the full look follows")
	h.g.Expect(h.condition(v1alpha1.AvailableCondition).Reason).NotTo(Equal(v1alpha1.EtcdUnreachableReason))
	h.g.Expect(h.r.memos.get(h.cluster()).unreachableStreak()).To(BeZero())
}
