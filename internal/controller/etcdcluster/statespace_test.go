//go:build !race

package etcdcluster

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// The liveness rule (docs/design/0005): from any state in which a quorum of
// voters is alive, every pass takes a step towards the spec or waits on a
// condition named in status that clears by itself, and self-heal runs in
// every state. This test enumerates the states that used to break it and
// runs each until the cluster is what its spec says, with the world moving
// between passes (see world) and caches that lag behind the API server.
//
// A step is a change in what the operator works on (members, Pods,
// ConfigMaps, etcd's membership and leader), not an API write: a pass that
// changes none of it must wait on a named condition and look again. The run
// must reach the spec, never come back to a state it left, and never sit
// still for long. And whatever the state, after every pass the operator has
// not taken a second voter down, nor the leader without a handoff, nor
// promoted a learner whose first boot the API server does not have; after
// every step of the world, a quorum of voters is up.

type pendingStep int

const (
	noPending pendingStep = iota
	pendingCreated
	pendingAddedNotPatched
	pendingLearnerUnstarted
	pendingLearnerCatchingUp
	// pendingLearnerUnlatched: the learner runs and has caught up, and the
	// member controller has not yet recorded its first boot.
	pendingLearnerUnlatched
	// pendingLearnerUnschedulable: a scale-up to a nodeSelector no node
	// has made a learner that cannot be scheduled; the user has since
	// taken the nodeSelector out again.
	pendingLearnerUnschedulable
)

type deletingKind int

const (
	noDeleting deletingKind = iota
	deletingHealthyVoter
	deletingLearnerless
)

type brokenKind int

const (
	noBroken brokenKind = iota
	brokenDataDirLost
	brokenUnresponsive
	brokenNodeLost
	brokenOtherCluster
	brokenLaggingLeader
)

type editKind int

const (
	noEdit editKind = iota
	editScaleDown
	editTemplate
)

// rolloutKind is where a rollout of a template edit stands. demo-a leads
// unless said otherwise; a timeout is one Status call of the first pass.
type rolloutKind int

const (
	noRollout rolloutKind = iota
	// rollRestarted: demo-b was restarted on the new template and its Pod
	// is not back yet.
	rollRestarted
	// rollTimeout: every member is up; demo-b's Status times out.
	rollTimeout
	// rollRestartedTimeout: demo-b is not back; demo-c leads, and the
	// Status of the healthy follower demo-a times out.
	rollRestartedTimeout
	// rollNoLeader: demo-b is not back and demo-c's Status times out, so
	// no quorum of answers names a leader.
	rollNoLeader
)

// reportKind is a condition that changes what a pass reports, never what
// it may do. Each is crossed with everything else on its own; together they
// would only double the run time.
type reportKind int

const (
	noReport reportKind = iota
	// reportDeadline: the progress deadline has passed, so no requeue for
	// it hides a wait that is not looked at again.
	reportDeadline
	// reportPhaseErr: the client Service's name is taken by someone else's.
	reportPhaseErr
)

type state struct {
	pending  pendingStep
	deleting deletingKind
	broken   brokenKind
	edit     editKind
	rollout  rolloutKind
	report   reportKind
	lag      bool
}

func (st state) String() string {
	return fmt.Sprintf("pending=%d/deleting=%d/broken=%d/edit=%d/rollout=%d/report=%d/lag=%t",
		st.pending, st.deleting, st.broken, st.edit, st.rollout, st.report, st.lag)
}

// valid: the state is one the rule speaks of, with a quorum of voters up.
// A rollout stands only on a template edit, and demo-b, restarted, must
// be a voter; with demo-b down, any broken member takes the quorum away,
// and so does one with demo-b gone. A rollout's own states are about what
// it may do, so a failing phase, which changes only what is reported, is
// not crossed with them.
func (st state) valid() bool {
	if st.rollout != noRollout && (st.edit != editTemplate || st.report == reportPhaseErr) {
		return false
	}
	restarted := st.rollout == rollRestarted || st.rollout == rollRestartedTimeout || st.rollout == rollNoLeader
	if restarted && (st.broken != noBroken || st.deleting == deletingLearnerless) {
		return false
	}
	if st.deleting == deletingLearnerless && st.broken != noBroken && st.broken != brokenLaggingLeader {
		return false
	}
	return true
}

// timeoutOn is the member whose Status times out in the first pass.
func (st state) timeoutOn() string {
	switch st.rollout {
	case rollTimeout:
		return "demo-b"
	case rollRestartedTimeout:
		return "demo-a"
	case rollNoLeader:
		return "demo-c"
	}
	return ""
}

var badNodeSelector = map[string]string{"disktype": "none"}

func setUp(w *world, st state) {
	h := w.h
	ctx := context.Background()
	desired := int32(3)
	if st.pending != noPending {
		desired = 4
	}
	w.form(desired)
	// The caches have seen the formed cluster, and nothing of what follows.
	w.beginPass()
	if st.pending != noPending {
		p := h.addMember("demo-p", 0, false, st.pending <= pendingAddedNotPatched)
		p.Spec.PeerURL, p.Spec.ClientURL = peerURL("demo-p"), clientURL("demo-p")
		if st.pending == pendingLearnerUnschedulable {
			p.Spec.NodeSelector = badNodeSelector
		}
		h.g.Expect(h.c.Update(ctx, p)).To(Succeed())
	}
	if st.pending >= pendingAddedNotPatched {
		h.etcd.AddLearner(peerURL("demo-p"))
	}
	switch st.pending {
	case pendingLearnerCatchingUp, pendingLearnerUnlatched, pendingLearnerUnschedulable:
		// One step: the member controller makes the Pod, the kubelet
		// starts it (or cannot place it), and so does its etcd; the first
		// boot is recorded only on the member controller's next look.
		w.settle(1)
	}
	switch st.pending {
	case pendingLearnerCatchingUp:
		p := h.member("demo-p")
		booted := metav1.NewTime(h.now)
		p.Status.FirstReadyTime = &booted
		h.g.Expect(h.c.Status().Update(ctx, p)).To(Succeed())
	case pendingLearnerUnlatched:
		h.etcd.SetLearnerReady(h.etcdIDOf("demo-p"), true)
	case pendingLearnerUnschedulable:
		cl := h.cluster()
		cl.Status.Observed.NodeSelector = badNodeSelector
		h.g.Expect(h.c.Status().Update(ctx, cl)).To(Succeed())
		cl.Generation++
		h.g.Expect(h.c.Update(ctx, cl)).To(Succeed())
	}
	switch st.deleting {
	case deletingHealthyVoter:
		h.g.Expect(h.c.Delete(ctx, h.member("demo-a"))).To(Succeed())
	case deletingLearnerless:
		// demo-b is on its way out and already gone from etcd; its
		// finalizer is about to let go.
		_, err := h.etcd.MemberRemove(ctx, h.etcdIDOf("demo-b"))
		h.g.Expect(err).NotTo(HaveOccurred())
		h.etcd.Removed = nil
		h.g.Expect(h.c.Delete(ctx, h.member("demo-b"))).To(Succeed())
	}
	switch st.broken {
	case brokenDataDirLost:
		h.breakPod("demo-c", "Error", wipedFatal)
		w.faults["demo-c"] = faultDataDirLost
	case brokenUnresponsive:
		p := h.pod("demo-c")
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(h.now.Add(-time.Hour))}}}}
		h.g.Expect(h.c.Status().Update(ctx, p)).To(Succeed())
		h.etcd.SetEndpointError(clientURL("demo-c"), etcdfake.ErrUnreachable)
		w.faults["demo-c"] = faultUnresponsive
	case brokenNodeLost:
		h.node("node-c", corev1.ConditionUnknown, h.now.Add(-5*time.Minute))
		h.etcd.SetEndpointError(clientURL("demo-c"), etcdfake.ErrUnreachable)
	case brokenOtherCluster:
		h.etcd.SetStatus(clientURL("demo-c"), etcdStatus{MemberID: h.etcdIDOf("demo-c"), LeaderID: h.etcd.Leader(), ClusterID: 42, RaftTerm: 1})
		w.faults["demo-c"] = faultForeign
	case brokenLaggingLeader:
		// It catches up after the first pass.
		c := h.etcdIDOf("demo-c")
		h.etcd.SetStatus(clientURL("demo-c"), statusFor(c, c))
		w.resetStatusAt = map[string]int{clientURL("demo-c"): w.steps + 1}
	}
	cl := h.cluster()
	switch st.edit {
	case editScaleDown:
		cl.Spec.Replicas = ptrInt32(desired - 1)
		cl.Generation++
	case editTemplate:
		cl.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
		cl.Generation++
	}
	h.g.Expect(h.c.Update(ctx, cl)).To(Succeed())
	if st.rollout != noRollout {
		// The edit was adopted before, and the rollout is under way.
		cl = h.cluster()
		cl.Status.Observed.MemberTemplate = *cl.Spec.MemberTemplate.DeepCopy()
		cl.Status.Observed.Version = v1alpha1.DefaultEtcdVersion
		cl.Status.ObservedGeneration = cl.Generation
		h.g.Expect(h.c.Status().Update(ctx, cl)).To(Succeed())
	}
	switch st.rollout {
	case rollRestarted, rollRestartedTimeout, rollNoLeader:
		b := h.member("demo-b")
		b.Spec.MemberTemplate = *h.cluster().Status.Observed.MemberTemplate.DeepCopy()
		h.g.Expect(h.c.Update(ctx, b)).To(Succeed())
		rolled := metav1.NewTime(h.now.Add(-10 * time.Second))
		b.Status.RolledAt = &rolled
		h.g.Expect(h.c.Status().Update(ctx, b)).To(Succeed())
		// The member controller has deleted its Pod for the new one.
		h.g.Expect(h.c.Delete(ctx, h.pod("demo-b"))).To(Succeed())
		h.etcd.SetEndpointError(clientURL("demo-b"), etcdfake.ErrUnreachable)
	}
	if st.rollout == rollRestartedTimeout {
		h.etcd.SetLeader(h.etcdIDOf("demo-c"))
	}
	if st.report == reportDeadline {
		cl = h.cluster()
		past := metav1.NewTime(h.now.Add(-time.Minute))
		cl.Status.ProgressDeadline = &past
		h.g.Expect(h.c.Status().Update(ctx, cl)).To(Succeed())
	}
	if st.report == reportPhaseErr {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ClientServiceName(testName), Namespace: testNS},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		h.g.Expect(h.c.Create(ctx, svc)).To(Succeed())
	}
	o := w.observe()
	voters := 0
	for _, em := range o.etcd {
		if !em.IsLearner {
			voters++
		}
	}
	h.g.Expect(2*(voters-len(o.downVoters()))).To(BeNumerically(">", voters), "the state has a quorum of voters up")
}

// namedWaits are the reasons a pass may wait on: each names what it waits
// for in its message, and each clears when that happens (a Pod becomes
// ready, a member leaves, etcd catches a learner up) without a person.
var namedWaits = map[string]bool{
	v1alpha1.ScalingUpReason: true, v1alpha1.ScalingDownReason: true, v1alpha1.PromotingLearnerReason: true,
	v1alpha1.ReplacingMemberReason: true, v1alpha1.WaitingForQuorumReason: true, v1alpha1.MembersNotReadyReason: true,
	v1alpha1.ObjectNotOwnedReason: true, v1alpha1.ReconcileErrorReason: true, v1alpha1.RollingUpdateReason: true,
}

const (
	// maxPasses bounds a run; the longest on today's code takes 31.
	maxPasses = 60
	// stillFor is how many passes in a row may leave the state unchanged
	// before the run counts as stuck. Nothing happens between them but the
	// clock, which moves on by stillTick after each: every wait on time the
	// operator has (a node lost, a member unresponsive, a divergence
	// confirmed, a member down past a bound) is over long before.
	stillFor  = 10
	stillTick = time.Minute
)

func TestStateSpace_EveryPassStepsOrWaitsOnANamedCondition(t *testing.T) {
	// The runs allocate much and keep little; collecting less often saves
	// a tenth of the test's time.
	gc := debug.SetGCPercent(400)
	t.Cleanup(func() { debug.SetGCPercent(gc) })
	var states []state
	for p := noPending; p <= pendingLearnerUnschedulable; p++ {
		for d := noDeleting; d <= deletingLearnerless; d++ {
			for b := noBroken; b <= brokenLaggingLeader; b++ {
				for e := noEdit; e <= editTemplate; e++ {
					for r := noRollout; r <= rollNoLeader; r++ {
						for rep := noReport; rep <= reportPhaseErr; rep++ {
							for _, lag := range []bool{false, true} {
								if st := (state{p, d, b, e, r, rep, lag}); st.valid() {
									states = append(states, st)
								}
							}
						}
					}
				}
			}
		}
	}
	for _, st := range states {
		t.Run(st.String(), func(t *testing.T) {
			t.Parallel()
			run(t, st)
		})
	}
}

func run(t *testing.T, st state) {
	h := newHarness(t)
	w := newWorld(h, st.lag)
	setUp(w, st)
	seen := map[string]int{}
	o := w.observe()
	fp := o.fingerprint()
	seen[fp] = 0
	still := 0
	for pass := 1; pass <= maxPasses; pass++ {
		requeue, done := checkPass(w, st, pass, o)
		if done {
			t.Logf("at the spec after %d passes", pass)
			return
		}
		h.etcd.Removed = nil
		was := o
		o = w.step()
		checkQuorum(h, pass, was, o)
		next := o.fingerprint()
		// The next pass comes when it asked to be looked at again, or when
		// the world's change is seen: a second, say.
		h.now = h.now.Add(min(max(requeue, time.Second), 30*time.Second))
		if next == fp {
			h.now = h.now.Add(stillTick)
			still++
			h.g.Expect(still).To(BeNumerically("<", stillFor), "no progress: %s (unchanged for %d passes; %s)",
				strings.Join(w.stuck(o), "; "), still, readyOf(h))
			continue
		}
		if earlier, ok := seen[next]; ok {
			h.t.Fatalf("no progress: pass %d brought the cluster back to where it was after pass %d (%s)",
				pass, earlier, strings.Join(w.stuck(o), "; "))
		}
		fp, still = next, 0
		seen[fp] = pass
	}
	h.t.Fatalf("no progress: %s after %d passes (%s)", strings.Join(w.stuck(o), "; "), maxPasses, readyOf(h))
}

func readyOf(h *harness) string {
	r := meta.FindStatusCondition(h.storedCluster().Status.Conditions, v1alpha1.ReadyCondition)
	if r == nil {
		return "no Ready condition"
	}
	return fmt.Sprintf("Ready=%s %s: %s", r.Status, r.Reason, r.Message)
}

// checkPass runs one pass from the state before and checks it. It returns
// when the pass asked to be looked at again, and whether the cluster is
// what its spec says and reports so.
func checkPass(w *world, st state, pass int, before *observed) (time.Duration, bool) {
	h := w.h
	h.t.Helper()
	h.etcd.Calls, h.etcd.Removed, h.etcd.Promoted = nil, nil, nil
	w.beginPass()
	if ep := st.timeoutOn(); ep != "" && pass == 1 {
		url := clientURL(ep)
		h.etcd.SetHook(etcd.OpStatus, func(c etcdfake.Call) error {
			if c.Endpoint == url {
				return context.DeadlineExceeded
			}
			return nil
		})
	}
	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNS, Name: testName}})
	h.etcd.SetHook(etcd.OpStatus, nil)
	h.g.Expect(err).NotTo(HaveOccurred(), "pass %d: a pass reports in status, it does not fail", pass)
	after := w.observe()
	checkSafety(h, pass, before, after)

	cl := h.storedCluster()
	conditions := map[string]metav1.Condition{}
	for _, c := range cl.Status.Conditions {
		conditions[c.Type] = c
	}
	for _, ct := range []string{v1alpha1.AvailableCondition, v1alpha1.ReadyCondition, v1alpha1.ProgressingCondition,
		v1alpha1.MembersHealthyCondition, v1alpha1.ReconcilingCondition, v1alpha1.StalledCondition} {
		h.g.Expect(conditions[ct].Reason).NotTo(BeEmpty(), "pass %d: %s has a reason", pass, ct)
	}
	if !st.lag || pass > 1 {
		h.g.Expect(cl.Status.ObservedGeneration).To(Equal(cl.Generation), "pass %d: the spec is adopted whatever the state", pass)
	}
	ready := conditions[v1alpha1.ReadyCondition]
	// The run's history, shown when it fails.
	progressing := conditions[v1alpha1.ProgressingCondition]
	h.t.Logf("pass %d: Ready=%s %s; Progressing=%s %s: %s; down after it: %v", pass, ready.Status, ready.Reason,
		progressing.Status, progressing.Reason, progressing.Message, after.downVoters())
	if after.fingerprint() == before.fingerprint() && ready.Status != metav1.ConditionTrue {
		h.g.Expect(namedWaits[ready.Reason]).To(BeTrue(), "pass %d took no step and waits on %s (%s), which is not a named self-clearing wait", pass, ready.Reason, ready.Message)
		if !w.cacheBehind() {
			h.g.Expect(res.RequeueAfter).To(BeNumerically(">", 0), "pass %d: a wait is looked at again", pass)
		}
	}

	// Self-heal runs in every state: a member judged broken beyond doubt
	// is on its way out after the first pass that can see it (the second,
	// when the cache lags), unless a timeout hid the quorum it needs.
	if replaceable(st.broken) && (pass > 1 || !st.lag && st.timeoutOn() == "") {
		c := after.member("demo-c")
		h.g.Expect(c == nil || !c.DeletionTimestamp.IsZero()).To(BeTrue(), "pass %d: broken demo-c is being replaced", pass)
	}

	// Stale reads never make the operator do a step twice.
	replacements, fresh := 0, 0
	known := map[string]bool{}
	for _, m := range before.members {
		known[m.Name] = true
	}
	for _, m := range after.members {
		if m.Spec.Replaces == "demo-c" {
			replacements++
		}
		if !known[m.Name] {
			fresh++
		}
	}
	h.g.Expect(replacements).To(BeNumerically("<=", 1), "pass %d: demo-c has at most one replacement", pass)
	h.g.Expect(fresh).To(BeNumerically("<=", 1), "pass %d: at most one member is created per pass", pass)
	h.g.Expect(len(h.etcd.Removed)).To(BeNumerically("<=", 1), "pass %d: at most one member leaves etcd per pass", pass)
	for _, id := range h.etcd.Removed {
		for _, em := range before.etcd {
			if m := after.memberByPeerURL(em.PeerURLs[0]); em.ID == id && m != nil {
				h.g.Expect(m.DeletionTimestamp.IsZero()).To(BeFalse(), "pass %d: %s was removed from etcd while its member lives", pass, m.Name)
			}
		}
	}

	return res.RequeueAfter, len(w.stuck(after)) == 0 &&
		(ready.Status == metav1.ConditionTrue || st.report == reportPhaseErr && ready.Reason == v1alpha1.ObjectNotOwnedReason)
}

func replaceable(b brokenKind) bool {
	return b != noBroken && b != brokenLaggingLeader
}
