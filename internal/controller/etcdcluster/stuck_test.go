package etcdcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/remediation"
)

var badSelector = map[string]string{"example.com/no-such-node": "true"}

// unschedulable plays the scheduler finding no place for the member's Pod
// since the given time, creating the Pod if the member controller has not.
func (h *harness) unschedulable(name string, since time.Time) {
	h.t.Helper()
	if !h.hasPod(name) {
		m := h.member(name)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: v1alpha1.MemberLabels(testName, name),
			Annotations: map[string]string{pod.TemplateHashAnnotation: pod.TemplateHash(m)}}}
		h.g.Expect(h.c.Create(context.Background(), p)).To(Succeed())
	}
	p := h.pod(name)
	p.Spec.NodeName = ""
	h.g.Expect(h.c.Update(context.Background(), p)).To(Succeed())
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.", LastTransitionTime: metav1.NewTime(since)}}}
	h.g.Expect(h.c.Status().Update(context.Background(), p)).To(Succeed())
}

func (h *harness) learnerNamed() string {
	h.t.Helper()
	for _, m := range h.members() {
		if em, ok := h.etcdMember(m.Spec.PeerURL); ok && em.IsLearner {
			return m.Name
		}
	}
	h.t.Fatal("no learner")
	return ""
}

// Hole 5: scaling 3 -> 4 with a node selector no node meets leaves a learner
// that can never start; setting the selector back while keeping 4 replicas
// gives that learner the new template at once (it holds nothing), instead of
// waiting for ever for it to be promoted.
func TestStuck_BackingOutABadNodeSelectorKeepingReplicas(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.NodeSelector = badSelector })
	h.setReplicas(4)
	for i := 0; i < 5 && len(h.etcd.AddedLearners) == 0; i++ {
		h.reconcile()
	}
	h.g.Expect(h.etcd.AddedLearners).To(HaveLen(1))
	stuck := h.learnerNamed()
	h.g.Expect(h.member(stuck).Spec.NodeSelector).To(Equal(badSelector))
	h.unschedulable(stuck, h.now.Add(-time.Hour))

	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.NodeSelector = nil })
	for i := 0; i < 5 && h.member(stuck).Spec.NodeSelector != nil; i++ {
		h.reconcile()
	}
	m := h.member(stuck)
	h.g.Expect(m.Spec.NodeSelector).To(BeNil(), "the learner that never started takes the new template")
	h.g.Expect(m.Status.RestartApproved).To(Equal(pod.TemplateHash(m)), "and its Pod is re-created")
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		h.g.Expect(h.member(n).Status.RolledAt).To(BeNil(), "%s is never restarted", n)
	}
}

// nodeBound gives the member a volume bound to the node its Pod runs on,
// as local-path's volumes are.
func (h *harness) nodeBound(member, node string) {
	h.t.Helper()
	ctx := context.Background()
	h.node(node, corev1.ConditionTrue, h.now.Add(-time.Hour))
	h.placeOn(member, node)
	pvName := "pv-" + member
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName}, Spec: corev1.PersistentVolumeSpec{
		Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}},
	}}
	h.g.Expect(h.c.Create(ctx, pv)).To(Succeed())
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DataVolumeClaimName(member), Namespace: testNS},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pvName}}
	h.g.Expect(h.c.Create(ctx, pvc)).To(Succeed())
}

// Hole 4: a scheduling change that the node a member's volume is bound to
// cannot meet replaces the member instead of restarting it in place (where
// it could never be scheduled). When no node meets it either, the
// replacement stays unscheduled: the rollout stops there with a reason,
// having touched no other member, and setting the change back drops the
// replacement and leaves every member where it was.
func TestStuck_ASchedulingChangeAVolumeBoundMemberCannotMeet(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	for i, n := range []string{"demo-a", "demo-b", "demo-c"} {
		h.nodeBound(n, []string{"n1", "n2", "n3"}[i])
	}
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.NodeSelector = badSelector })
	var x, y string
	for i := 0; i < 5 && y == ""; i++ {
		h.reconcile()
		for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
			if r := h.replacementOf(n); r != nil {
				x, y = n, r.Name
			}
		}
	}
	h.g.Expect(y).NotTo(BeEmpty(), "a member is replaced, not restarted where its volume is")
	h.g.Expect(h.member(x).Spec.NodeSelector).To(BeNil())
	h.g.Expect(h.member(x).Status.RolledAt).To(BeNil())
	h.g.Expect(strings.Join(h.drainEvents(), "\n")).To(MatchRegexp("its volume is bound to node n[123]"))

	h.unschedulable(y, h.now.Add(-remediation.UnschedulableAfter))
	for i := 0; i < 3; i++ {
		h.reconcile()
	}
	stalled := h.condition(v1alpha1.StalledCondition)
	h.g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(stalled.Reason).To(Equal(v1alpha1.RolloutFailedReason))
	h.g.Expect(stalled.Message).To(ContainSubstring(y + ", made to replace " + x + " with the new template, cannot be scheduled"))
	h.g.Expect(h.condition(v1alpha1.MembersHealthyCondition).Reason).To(Equal(v1alpha1.MemberUnschedulableReason))
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		h.g.Expect(h.exists(n)).To(BeTrue())
		h.g.Expect(h.member(n).Spec.NodeSelector).To(BeNil(), "%s is untouched", n)
	}
	replaced := 0
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		if h.replacementOf(n) != nil {
			replaced++
		}
	}
	h.g.Expect(replaced).To(Equal(1), "one member at a time")

	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.NodeSelector = nil })
	for i := 0; i < 3 && h.exists(y); i++ {
		h.reconcile()
	}
	h.g.Expect(h.exists(y)).To(BeFalse(), "the replacement that never started is dropped")
	h.g.Expect(h.exists(x)).To(BeTrue(), "and the member it was to replace stays")
}

// Hole 6: a joiner that has not started yet is handed etcd's member list
// again when a removal changed it since its add; otherwise etcd refuses its
// first start ("member count is unequal").
func TestStuck_AJoinersListFollowsARemoval(t *testing.T) {
	h := newHarness(t)
	h.formed(4, "demo-a", "demo-b", "demo-c")
	h.addMember("demo-d", 0, false, true)
	d := h.etcd.AddLearner(peerURL("demo-d"))
	h.reconcile()
	h.g.Expect(h.member("demo-d").Spec.InitialCluster).To(ContainSubstring("demo-c="))

	c, _ := h.etcdMember(peerURL("demo-c"))
	cli, err := h.etcd.Dial(context.Background(), []string{clientURL("demo-a")})
	h.g.Expect(err).NotTo(HaveOccurred())
	_, err = cli.MemberRemove(context.Background(), c.ID)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.reconcile()
	ic := h.member("demo-d").Spec.InitialCluster
	h.g.Expect(ic).NotTo(ContainSubstring("demo-c="), "the removed member is gone from the joiner's list")
	h.g.Expect(ic).To(ContainSubstring("demo-d="))

	// Once it has started, its data dir holds the membership: the list is
	// left as it is.
	h.etcd.StartMember(d.ID, "demo-d", clientURL("demo-d"))
	h.latchBoot("demo-d")
	before := h.member("demo-d").Spec.InitialCluster
	h.reconcile()
	h.g.Expect(h.member("demo-d").Spec.InitialCluster).To(Equal(before))
}

// Hole 6: a replacement makes a learner that never started give up its place
// only when that learner cannot be scheduled; one still pulling its image is
// about to hold data, and is waited for.
func TestStuck_OnlyALearnerThatCannotBeScheduledYields(t *testing.T) {
	h := newHarness(t)
	h.formed(4, "demo-a", "demo-b", "demo-c")
	h.addMember("demo-u", 0, false, false)
	h.etcd.AddLearner(peerURL("demo-u"))
	h.readyPod("demo-u")
	h.node("n1", corev1.ConditionTrue, h.now.Add(-time.Hour))
	p := h.pod("demo-u")
	p.Spec.NodeName = "n1"
	h.g.Expect(h.c.Update(context.Background(), p)).To(Succeed())
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}
	h.g.Expect(h.c.Status().Update(context.Background(), p)).To(Succeed())
	y := h.addMember("demo-y", 0, false, true)
	y.Spec.Replaces = "demo-c"
	h.g.Expect(h.c.Update(context.Background(), y)).To(Succeed())

	for i := 0; i < 3; i++ {
		h.reconcile()
	}
	h.g.Expect(h.exists("demo-u")).To(BeTrue(), "a learner pulling its image is waited for: %v", h.drainEvents())
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Message).To(ContainSubstring("waiting for learner demo-u to start"))

	h.unschedulable("demo-u", h.now.Add(-time.Minute))
	h.reconcile()
	h.g.Expect(h.exists("demo-u")).To(BeFalse(), "one that cannot be scheduled yields to the replacement")
}

// Self-heal gives a replacement the template of the member it replaces, so
// that a bad pending edit cannot keep it from starting; the step that gives
// members that never started the target leaves such a replacement alone, as
// it can start.
func TestStuck_AReplacementKeepsTheTemplateThatRuns(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.NodeSelector = badSelector })
	h.setReplicas(4)
	for i := 0; i < 5 && len(h.etcd.AddedLearners) == 0; i++ {
		h.reconcile()
	}
	h.withFinalizers()
	h.unschedulable(h.learnerNamed(), h.now.Add(-time.Hour))
	h.breakPod("demo-b", "Error", wipedFatal)
	var y *v1alpha1.EtcdMember
	for i := 0; i < 10 && y == nil; i++ {
		h.reconcile()
		h.runFinalizers()
		h.collectGarbage()
		y = h.replacementOf("demo-b")
	}
	h.g.Expect(y).NotTo(BeNil(), "demo-b is replaced")
	for i := 0; i < 10; i++ {
		h.reconcile()
		h.runFinalizers()
		h.collectGarbage()
		h.g.Expect(h.member(y.Name).Spec.NodeSelector).To(BeNil(), "pass %d: the replacement keeps the template that runs", i)
	}
}

// A learner no member accounts for (its member went before its finalizer
// could remove it from etcd) is removed when it holds etcd's learner slot
// that a pending member needs; otherwise that member would wait for ever.
func TestStuck_AnOrphanLearnerGivesUpItsSlot(t *testing.T) {
	h := newHarness(t)
	h.formed(4, "demo-a", "demo-b", "demo-c")
	h.etcd.SetMaxLearners(1)
	orphan := h.etcd.AddLearner(peerURL("demo-gone"))
	h.addMember("demo-d", 0, false, true)
	for i := 0; i < 3 && len(h.etcd.AddedLearners) == 0; i++ {
		h.reconcile()
	}
	_, still := h.etcdMember(peerURL("demo-gone"))
	h.g.Expect(still).To(BeFalse(), "the orphan learner %s is removed", orphan.IDString())
	h.g.Expect(h.etcd.AddedLearners).To(HaveLen(1), "and the pending member is added")
}
