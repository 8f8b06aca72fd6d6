//go:build !race

package etcdcluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// The liveness rule (docs/design/0005): from any state in which a quorum of
// voters is alive, every pass takes a step towards the spec or waits on a
// condition named in status that clears by itself, and self-heal runs in
// every state. This test enumerates the states that used to break it and
// checks each pass against the rule, with a cache that lags behind the API
// server so that the guards against stale reads are exercised too.

type pendingStep int

const (
	noPending pendingStep = iota
	pendingCreated
	pendingAddedNotPatched
	pendingLearnerUnstarted
	pendingLearnerCatchingUp
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

type state struct {
	pending  pendingStep
	deleting deletingKind
	broken   brokenKind
	deadline bool
	edit     editKind
	phaseErr bool
	lag      bool
}

func (st state) String() string {
	return fmt.Sprintf("pending=%d/deleting=%d/broken=%d/deadline=%t/edit=%d/phaseErr=%t/lag=%t",
		st.pending, st.deleting, st.broken, st.deadline, st.edit, st.phaseErr, st.lag)
}

// lagClient serves EtcdMember reads from a frozen copy, as a cache that has
// not yet seen the latest writes does; everything else, and every write,
// goes to the API server.
type lagClient struct {
	client.Client
	scheme *runtime.Scheme
	// stale is what reads see; next is what they see after advance.
	stale, next client.Client
}

func (c *lagClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1alpha1.EtcdMember); ok && c.stale != nil {
		return c.stale.Get(ctx, key, obj, opts...)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *lagClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*v1alpha1.EtcdMemberList); ok && c.stale != nil {
		return c.stale.List(ctx, list, opts...)
	}
	return c.Client.List(ctx, list, opts...)
}

// advance moves the cache one step: reads now see what was frozen last, and
// what the API server holds now is frozen for the step after. A pass thus
// reads the members as they were before the previous pass wrote anything.
func (c *lagClient) advance(t *testing.T) {
	c.stale = c.next
	c.freeze(t)
}

// freeze records the EtcdMembers as they are now, for the next advance.
func (c *lagClient) freeze(t *testing.T) {
	var members v1alpha1.EtcdMemberList
	if err := c.Client.List(context.Background(), &members); err != nil {
		t.Fatal(err)
	}
	objs := make([]client.Object, 0, len(members.Items))
	for i := range members.Items {
		m := members.Items[i].DeepCopy()
		m.ResourceVersion = ""
		objs = append(objs, m)
	}
	tracker := clienttesting.NewObjectTracker(c.scheme, serializer.NewCodecFactory(c.scheme).UniversalDecoder())
	c.next = fakeclient.NewClientBuilder().WithScheme(c.scheme).WithObjectTracker(tracker).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.EtcdMember{}).Build()
}

// stateHarness is a harness whose reconciler reads through a lagClient and
// whose API writes are counted.
func stateHarness(t *testing.T, st state) (*harness, *lagClient, *int) {
	h := newHarness(t)
	writes := new(int)
	count := func() { *writes++ }
	truth := interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			count()
			return c.Create(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			count()
			return c.Delete(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			count()
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			// The cluster's own status is the report, not a step.
			if _, ok := obj.(*v1alpha1.EtcdCluster); !ok {
				count()
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	lc := &lagClient{Client: truth, scheme: h.c.Scheme()}
	h.r = &Reconciler{Client: lc, APIReader: truth, Dialer: h.etcd, ClusterDomain: testDomain,
		Recorder: events.NewFakeRecorder(1000), Now: func() time.Time { return h.now }}
	return h, lc, writes
}

func setUp(h *harness, lc *lagClient, st state) {
	desired := int32(3)
	if st.pending != noPending {
		desired = 4
	}
	h.formed(desired, "demo-a", "demo-b", "demo-c")
	for _, n := range []string{"a", "b", "c"} {
		h.node("node-"+n, corev1.ConditionTrue, h.now.Add(-time.Hour))
		h.placeOn("demo-"+n, "node-"+n)
	}
	h.withFinalizers()
	if st.lag {
		lc.freeze(h.t)
	}
	switch st.pending {
	case pendingCreated:
		h.addMember("demo-p", 0, false, true)
	case pendingAddedNotPatched:
		h.addMember("demo-p", 0, false, true)
		h.etcd.AddLearner(peerURL("demo-p"))
	case pendingLearnerUnstarted:
		h.addMember("demo-p", 0, false, false)
		h.etcd.AddLearner(peerURL("demo-p"))
	case pendingLearnerCatchingUp:
		h.addMember("demo-p", 0, false, false)
		l := h.etcd.AddLearner(peerURL("demo-p"))
		h.readyPod("demo-p")
		h.etcd.StartMember(l.ID, "demo-p", clientURL("demo-p"))
		h.etcd.SetLearnerReady(l.ID, false)
	}
	switch st.deleting {
	case deletingHealthyVoter:
		h.g.Expect(h.c.Delete(context.Background(), h.member("demo-a"))).To(Succeed())
	case deletingLearnerless:
		// demo-b is on its way out and already gone from etcd; its
		// finalizer is about to let go.
		b := h.member("demo-b")
		id, _ := etcd.ParseMemberID(b.Status.MemberID)
		_, err := h.etcd.MemberRemove(context.Background(), id)
		h.g.Expect(err).NotTo(HaveOccurred())
		h.etcd.Removed = nil
		h.g.Expect(h.c.Delete(context.Background(), b)).To(Succeed())
	}
	c, _ := h.etcdMember(peerURL("demo-c"))
	switch st.broken {
	case brokenDataDirLost:
		h.breakPod("demo-c", "Error", wipedFatal)
	case brokenUnresponsive:
		p := h.pod("demo-c")
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(h.now.Add(-time.Hour))}}}}
		h.g.Expect(h.c.Status().Update(context.Background(), p)).To(Succeed())
		h.etcd.SetEndpointError(clientURL("demo-c"), etcdfake.ErrUnreachable)
	case brokenNodeLost:
		h.node("node-c", corev1.ConditionUnknown, h.now.Add(-5*time.Minute))
		h.etcd.SetEndpointError(clientURL("demo-c"), etcdfake.ErrUnreachable)
	case brokenOtherCluster:
		h.etcd.SetStatus(clientURL("demo-c"), etcdStatus{MemberID: c.ID, LeaderID: h.etcd.Leader(), ClusterID: 42, RaftTerm: 1})
	case brokenLaggingLeader:
		h.etcd.SetStatus(clientURL("demo-c"), statusFor(c.ID, c.ID))
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
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
	if st.deadline {
		cl = h.cluster()
		past := metav1.NewTime(h.now.Add(-time.Minute))
		cl.Status.ProgressDeadline = &past
		h.g.Expect(h.c.Status().Update(context.Background(), cl)).To(Succeed())
	}
	if st.phaseErr {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ClientServiceName(testName), Namespace: testNS},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		h.g.Expect(h.c.Create(context.Background(), svc)).To(Succeed())
	}
}

// namedWaits are the reasons a pass may wait on: each names what it waits
// for in its message, and each clears when that happens (a Pod becomes
// ready, a member leaves, etcd catches a learner up) without a person.
var namedWaits = map[string]bool{
	v1alpha1.ScalingUpReason: true, v1alpha1.ScalingDownReason: true, v1alpha1.PromotingLearnerReason: true,
	v1alpha1.ReplacingMemberReason: true, v1alpha1.WaitingForQuorumReason: true, v1alpha1.MembersNotReadyReason: true,
	v1alpha1.ObjectNotOwnedReason: true, v1alpha1.ReconcileErrorReason: true,
}

func membershipCalls(f *etcdfake.Fake) int {
	n := 0
	for _, c := range f.Calls {
		switch c.Op {
		case etcd.OpMemberAddAsLearner, etcd.OpMemberPromote, etcd.OpMemberRemove, etcd.OpMoveLeader:
			n++
		}
	}
	return n
}

func TestStateSpace_EveryPassStepsOrWaitsOnANamedCondition(t *testing.T) {
	var states []state
	for p := noPending; p <= pendingLearnerCatchingUp; p++ {
		for d := noDeleting; d <= deletingLearnerless; d++ {
			for b := noBroken; b <= brokenLaggingLeader; b++ {
				for e := noEdit; e <= editTemplate; e++ {
					for _, deadline := range []bool{false, true} {
						for _, phaseErr := range []bool{false, true} {
							for _, lag := range []bool{false, true} {
								states = append(states, state{p, d, b, deadline, e, phaseErr, lag})
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
			h, lc, writes := stateHarness(t, st)
			setUp(h, lc, st)
			for pass := 1; pass <= 3; pass++ {
				checkPass(h, lc, writes, st, pass)
			}
		})
	}
}

func checkPass(h *harness, lc *lagClient, writes *int, st state, pass int) {
	h.t.Helper()
	*writes = 0
	h.etcd.Calls, h.etcd.Removed = nil, nil
	before := h.members()
	urls := map[uint64]string{}
	for _, em := range h.etcd.Members() {
		urls[em.ID] = em.PeerURLs[0]
	}
	if st.lag {
		lc.advance(h.t)
	}
	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNS, Name: testName}})
	h.g.Expect(err).NotTo(HaveOccurred(), "pass %d: a pass reports in status, it does not fail", pass)
	cl := h.cluster()
	for _, ct := range []string{v1alpha1.AvailableCondition, v1alpha1.ReadyCondition, v1alpha1.ProgressingCondition,
		v1alpha1.MembersHealthyCondition, v1alpha1.ReconcilingCondition, v1alpha1.StalledCondition} {
		c := h.condition(ct)
		h.g.Expect(c.Reason).NotTo(BeEmpty(), "pass %d: %s has a reason", pass, ct)
	}
	if !st.lag || pass > 1 {
		h.g.Expect(cl.Status.ObservedGeneration).To(Equal(cl.Generation), "pass %d: the spec is adopted whatever the state", pass)
	}

	acted := *writes > 0 || membershipCalls(h.etcd) > 0
	ready := h.condition(v1alpha1.ReadyCondition)
	if !acted && ready.Status != metav1.ConditionTrue {
		h.g.Expect(namedWaits[ready.Reason]).To(BeTrue(), "pass %d waits on %s (%s), which is not a named self-clearing wait", pass, ready.Reason, ready.Message)
		h.g.Expect(res.RequeueAfter).To(BeNumerically(">", 0), "pass %d: a wait is looked at again", pass)
	}

	// Self-heal runs in every state: a member judged broken beyond doubt
	// is on its way out after the first pass that can see it.
	if replaceable(st.broken) {
		c := &v1alpha1.EtcdMember{}
		err := h.c.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: "demo-c"}, c)
		h.g.Expect(err != nil || !c.DeletionTimestamp.IsZero()).To(BeTrue(), "pass %d: broken demo-c is being replaced", pass)
	}

	// Stale reads never make the operator do a step twice.
	replacements, fresh := 0, 0
	known := map[string]bool{}
	for _, m := range before {
		known[m.Name] = true
	}
	for _, m := range h.members() {
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
		for _, m := range h.members() {
			if peerURL(m.Name) == urls[id] {
				h.g.Expect(m.DeletionTimestamp.IsZero()).To(BeFalse(), "pass %d: %s was removed from etcd while its member lives", pass, m.Name)
			}
		}
	}
}

func replaceable(b brokenKind) bool {
	return b != noBroken && b != brokenLaggingLeader
}
