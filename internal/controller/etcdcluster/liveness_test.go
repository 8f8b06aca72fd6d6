package etcdcluster

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
	"github.com/quorumctl/etcd-operator/internal/remediation"
)

func TestLiveness_PendingMemberYieldsToABrokenVoter(t *testing.T) {
	h := newHarness(t)
	h.formed(4, "demo-a", "demo-b", "demo-c")
	// A scale-up created demo-d; its add waits for every member to be ready,
	// and demo-c never will be.
	h.addMember("demo-d", 0, false, true)
	h.breakPod("demo-c", "Error", wipedFatal)
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeFalse(), "self-heal does not wait for the pending add")
	y := h.replacementOf("demo-c")
	h.g.Expect(y).NotTo(BeNil(), "a replacement takes demo-c's place")
	h.g.Expect(y.Spec.Replaces).To(Equal("demo-c"))
	h.g.Expect(h.exists("demo-d")).To(BeTrue())
}

func TestLiveness_AMissedDeadlineDoesNotStopSelfHeal(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.setReplicas(4)
	h.reconcile()
	h.g.Expect(h.etcd.AddedLearners).To(HaveLen(1), "the fourth member is a learner whose Pod never starts")
	h.now = h.now.Add(11 * time.Minute)
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionTrue))

	h.breakPod("demo-c", "Error", wipedFatal)
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeFalse(), "a broken voter is replaced past the deadline, with no spec edit")
	h.g.Expect(h.replacementOf("demo-c")).NotTo(BeNil())
}

func TestLiveness_ThePassingOfADeadlineIsNoticed(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.setReplicas(4)
	h.etcd.FailNext(etcd.OpMemberAddAsLearner, etcdfake.ErrUnreachable)
	res := h.reconcile()
	deadline := h.cluster().Status.ProgressDeadline
	h.g.Expect(deadline).NotTo(BeNil())
	h.g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
	h.g.Expect(h.now.Add(res.RequeueAfter)).To(BeTemporally("<=", deadline.Add(time.Second)),
		"a pass is due by the deadline, whatever else happens")
}

func TestLiveness_ScalingDownShedsTheBrokenMember(t *testing.T) {
	h := newHarness(t)
	h.formed(5, "demo-a", "demo-b", "demo-c", "demo-d", "demo-e")
	h.withFinalizers()
	h.breakPod("demo-b", "Error", wipedFatal)
	h.setReplicas(3)
	for i := 0; i < 10 && len(h.members()) > 3; i++ {
		h.reconcile()
		h.g.Expect(h.cluster().Status.Observed.Replicas).To(BeEquivalentTo(3), "the edit is adopted while degraded")
		h.g.Expect(h.replacementOf("demo-b")).To(BeNil(), "no replacement for a member the target has no room for")
		h.runFinalizers()
	}
	names := []string{}
	for _, m := range h.members() {
		names = append(names, m.Name)
	}
	h.g.Expect(names).To(HaveLen(3))
	h.g.Expect(names).NotTo(ContainElement("demo-b"), "the broken member is among those removed")
	h.g.Expect(names).To(ContainElements("demo-a", "demo-c"), "the oldest healthy ones stay")
}

func TestLiveness_ATemplateEditIsAdoptedWhileAMemberIsBroken(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.breakPod("demo-c", "OOMKilled", "")
	cl := h.cluster()
	cl.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}
	cl.Generation++
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
	h.reconcile()
	cl = h.cluster()
	h.g.Expect(cl.Status.Observed.Resources).NotTo(BeNil())
	h.g.Expect(cl.Status.ObservedGeneration).To(Equal(cl.Generation))
}

func TestLiveness_ADeletedHealthyMemberAndABrokenOneDoNotDeadlock(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.withFinalizers()
	h.breakPod("demo-c", "Error", wipedFatal)
	// A user replaces demo-a while demo-c is broken.
	h.g.Expect(h.c.Delete(context.Background(), h.member("demo-a"))).To(Succeed())

	for i := 0; i < 20; i++ {
		h.reconcile()
		h.runFinalizers()
		h.collectGarbage()
		if y := h.replacementOf("demo-c"); y != nil && y.Spec.InitialCluster != "" {
			if em, ok := h.etcdMember(y.Spec.PeerURL); ok && em.Name == "" {
				h.startLearner(y.Name)
			}
		}
		h.g.Expect(h.healthyVoters()).To(BeNumerically(">=", 2), "quorum of the target is never given up (pass %d)", i)
		if h.condition(v1alpha1.ReadyCondition).Status == metav1.ConditionTrue {
			break
		}
		// Whatever a pass adds, start it, as its Pod would, and label
		// voters as the member controller does.
		for _, m := range h.members() {
			if m.Status.Role == v1alpha1.MemberRoleVoter && h.hasPod(m.Name) && h.pod(m.Name).Labels[v1alpha1.RoleLabel] == "" {
				h.labelVoter(m.Name)
			}
			if m.Spec.InitialCluster != "" && m.Spec.Replaces == "" && !h.hasPod(m.Name) {
				if em, ok := h.etcdMember(m.Spec.PeerURL); ok && em.Name == "" {
					h.startLearner(m.Name)
				}
			}
		}
	}
	h.g.Expect(h.exists("demo-a")).To(BeFalse(), "the user's delete went through")
	h.g.Expect(h.exists("demo-c")).To(BeFalse(), "the broken member was replaced")
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue), h.condition(v1alpha1.ReadyCondition).Message)
	h.g.Expect(h.members()).To(HaveLen(3))
}

func TestLiveness_AMemberOnALostNodeIsReplacedLikeForLike(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	for _, n := range []string{"a", "b", "c"} {
		h.node("node-"+n, corev1.ConditionTrue, h.now.Add(-time.Hour))
		h.placeOn("demo-"+n, "node-"+n)
	}
	// demo-c runs a template of its own: a rollout to the cluster's is
	// paused half-way.
	c := h.member("demo-c")
	c.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}
	h.g.Expect(h.c.Update(context.Background(), c)).To(Succeed())
	cl := h.cluster()
	cl.Spec.Rollout.Paused = true
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())

	h.node("node-c", corev1.ConditionUnknown, h.now.Add(-30*time.Second))
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeTrue(), "not before the node-loss bound")

	h.now = h.now.Add(31 * time.Second)
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeFalse())
	y := h.replacementOf("demo-c")
	h.g.Expect(y).NotTo(BeNil())
	h.g.Expect(y.Spec.Resources.Requests.Cpu().String()).To(Equal("250m"), "the replacement is demo-c's own template")
	h.g.Expect(h.drainEvents()).To(ContainElement(ContainSubstring(string(remediation.NodeLost))))
}

func TestLiveness_TheNodeLossBoundCountsFromTheLastLeaseRenewal(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	// The node controller marked node-c only 10 s ago, after its grace
	// period; its kubelet last renewed its Lease 61 s ago.
	h.node("node-c", corev1.ConditionUnknown, h.now.Add(-10*time.Second))
	h.placeOn("demo-c", "node-c")
	renewed := metav1.NewMicroTime(h.now.Add(-61 * time.Second))
	h.g.Expect(h.c.Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: "node-c"},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &renewed},
	})).To(Succeed())
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeFalse(), "node-c has been silent for longer than the 60 s bound")
	h.g.Expect(h.drainEvents()).To(ContainElement(ContainSubstring("for 1m1s")))
}

func TestLiveness_TheNodeLossBoundIsSettable(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	cl := h.cluster()
	cl.Spec.SelfHeal.NodeLostAfterSeconds = ptr.To[int32](600)
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
	h.node("node-c", corev1.ConditionFalse, h.now.Add(-5*time.Minute))
	h.placeOn("demo-c", "node-c")
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeTrue())
}

func TestLiveness_AStrandedPodOnACordonedNodeIsReplaced(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.node("node-c", corev1.ConditionTrue, h.now.Add(-time.Hour))
	n := &corev1.Node{}
	h.g.Expect(h.c.Get(context.Background(), clientKey("node-c"), n)).To(Succeed())
	n.Spec.Unschedulable = true
	h.g.Expect(h.c.Update(context.Background(), n)).To(Succeed())
	m := h.member("demo-c")
	m.Status.NodeName = "node-c"
	h.g.Expect(h.c.Status().Update(context.Background(), m)).To(Succeed())
	// Drained: the Pod was evicted and re-created, and cannot be scheduled
	// because its volume is bound to node-c.
	p := h.pod("demo-c")
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionFalse},
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.NewTime(h.now.Add(-2 * time.Minute))},
	}
	p.Status.Phase = corev1.PodPending
	p.Status.ContainerStatuses = nil
	h.g.Expect(h.c.Status().Update(context.Background(), p)).To(Succeed())
	h.etcd.SetEndpointError(clientURL("demo-c"), etcdfake.ErrUnreachable)
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeFalse())
	h.g.Expect(h.replacementOf("demo-c")).NotTo(BeNil())
}

func TestLiveness_AFailingPhaseDoesNotStopSelfHeal(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	// Someone else's Service has the client Service's name.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ClientServiceName(testName), Namespace: testNS},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	h.g.Expect(h.c.Create(context.Background(), svc)).To(Succeed())
	h.breakPod("demo-c", "Error", wipedFatal)
	res := h.reconcile()
	h.g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
	h.g.Expect(h.exists("demo-c")).To(BeFalse(), "self-heal ran despite the failing Service step")
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.ObjectNotOwnedReason))
	h.g.Expect(ready.Message).To(ContainSubstring(v1alpha1.ClientServiceName(testName)))
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionTrue))
}

func TestIdentity_URLsAreRecordedAndSurviveADomainChange(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.reconcile()
	for _, m := range h.members() {
		h.g.Expect(m.Spec.PeerURL).To(Equal(peerURL(m.Name)), "recorded for members made before URLs were")
		h.g.Expect(m.Status.MemberID).NotTo(BeEmpty())
	}
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))

	// The operator restarts with another idea of the cluster domain.
	h.r.ClusterDomain = "elsewhere.example"
	h.reconcile()
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue), "members are still found")
	for _, m := range h.members() {
		h.g.Expect(m.Status.Role).To(Equal(v1alpha1.MemberRoleVoter))
	}
	h.g.Expect(h.etcd.Removed).To(BeEmpty())
}

func TestQuorumGate_AMemberWithoutALeaderIsNotHealthy(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.breakPod("demo-c", "Error", wipedFatal)
	b := h.etcd.Members()[1]
	// demo-b answers, but follows no leader.
	h.etcd.SetStatus(clientURL("demo-b"), etcdStatus{MemberID: b.ID, ClusterID: etcdfake.DefaultClusterID})
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeTrue())
	h.g.Expect(h.condition(v1alpha1.MembersHealthyCondition).Reason).To(Equal(v1alpha1.QuorumGateHoldingReason))
}

func TestMemos_AreDroppedWithTheCluster(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.reconcile()
	h.g.Expect(h.r.memos.len()).To(Equal(1))
	h.g.Expect(h.c.Delete(context.Background(), h.cluster())).To(Succeed())
	h.reconcile()
	h.g.Expect(h.r.memos.len()).To(BeZero())
}

func TestLiveness_ScalingDownShedsTwoDownMembersOfFive(t *testing.T) {
	h := newHarness(t)
	h.formed(5, "demo-a", "demo-b", "demo-c", "demo-d", "demo-e")
	h.withFinalizers()
	// demo-b and demo-d are on a node that went away; the node-loss bound
	// is long, so self-heal has no verdict on them yet.
	for _, n := range []string{"demo-b", "demo-d"} {
		h.setPodReady(n, false)
		h.etcd.SetEndpointError(clientURL(n), etcdfake.ErrUnreachable)
	}
	h.setReplicas(3)
	for i := 0; i < 10 && len(h.members()) > 3; i++ {
		h.reconcile()
		h.runFinalizers()
	}
	var names []string
	for _, m := range h.members() {
		names = append(names, m.Name)
	}
	h.g.Expect(names).To(ConsistOf("demo-a", "demo-c", "demo-e"), "the two that are down go, one after the other")
}
