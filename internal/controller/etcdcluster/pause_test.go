package etcdcluster

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

func TestPause_LastMemberGoesDormantNotRemoved(t *testing.T) {
	h := newHarness(t)
	h.formed(0, "demo-a")
	h.reconcile()
	h.g.Expect(h.member("demo-a").Spec.Dormant).To(BeTrue())
	h.g.Expect(h.etcd.Removed).To(BeEmpty(), "pausing never touches etcd's membership")
}

func TestPause_ConditionsOnceThePodIsGone(t *testing.T) {
	h := newHarness(t)
	h.formed(0, "demo-a")
	m := h.member("demo-a")
	m.Spec.Dormant = true
	h.g.Expect(h.c.Update(context.Background(), m)).To(Succeed())
	p := h.pod("demo-a")
	h.g.Expect(h.c.Delete(context.Background(), p)).To(Succeed())
	h.reconcile()
	av := h.condition(v1alpha1.AvailableCondition)
	h.g.Expect(av.Reason).To(Equal(v1alpha1.PausedReason))
	h.g.Expect(av.Message).To(ContainSubstring("data-demo-a"))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue), "paused is what the spec asks for")
}

func TestResume_WakesTheDormantMemberFirst(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a")
	m := h.member("demo-a")
	m.Spec.Dormant = true
	h.g.Expect(h.c.Update(context.Background(), m)).To(Succeed())
	h.reconcile()
	h.g.Expect(h.member("demo-a").Spec.Dormant).To(BeFalse())
	h.g.Expect(h.members()).To(HaveLen(1), "no new member before the dormant one is back")
}

func TestCreatedPaused_NothingWritten(t *testing.T) {
	h := newHarness(t)
	h.createCluster(0)
	h.reconcile()
	h.g.Expect(h.members()).To(BeEmpty())
	h.g.Expect(h.condition(v1alpha1.AvailableCondition).Reason).To(Equal(v1alpha1.NoDataWrittenReason))
}

// CI saw Ready=True/Paused while the Pod of a member removed on the way
// down to replicas 0 was still shutting down, its EtcdMember already gone.
func TestPause_NotReachedWhileARemovedMembersPodShutsDown(t *testing.T) {
	h := newHarness(t)
	h.formed(0, "demo-a")
	m := h.member("demo-a")
	m.Spec.Dormant = true
	h.g.Expect(h.c.Update(context.Background(), m)).To(Succeed())
	h.g.Expect(h.c.Delete(context.Background(), h.pod("demo-a"))).To(Succeed())
	h.readyPod("demo-b")
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionFalse), "demo-b's etcd may still run")
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Reason).NotTo(Equal(v1alpha1.PausedReason))

	h.g.Expect(h.c.Delete(context.Background(), h.pod("demo-b"))).To(Succeed())
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.PausedReason))
}
