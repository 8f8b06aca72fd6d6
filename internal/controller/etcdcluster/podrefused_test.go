package etcdcluster

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// A member whose Pod the API server refuses is said so on the cluster too,
// with the member's message, and the report clears with the member's.
func TestAMemberWhosePodIsRefusedIsReportedOnTheCluster(t *testing.T) {
	h := newHarness(t)
	h.createCluster(1)
	h.reconcile()
	ms := h.members()
	h.g.Expect(ms).To(HaveLen(1))
	m := &ms[0]
	msg := `the API server refused to create the Pod (retried with backoff): pods "x" is forbidden: no PriorityClass with name etcd-critical was found`
	setReady := func(reason, message string) {
		m = h.member(m.Name)
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: v1alpha1.MemberReadyCondition,
			Status: metav1.ConditionFalse, Reason: reason, Message: message})
		h.g.Expect(h.c.Status().Update(context.Background(), m)).To(Succeed())
	}
	setReady(v1alpha1.MemberPodCreateFailedReason, msg)
	h.reconcile()
	c := h.condition(v1alpha1.MembersHealthyCondition)
	h.g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	h.g.Expect(c.Reason).To(Equal(v1alpha1.MemberPodRefusedReason))
	h.g.Expect(c.Message).To(ContainSubstring(m.Name))
	h.g.Expect(c.Message).To(ContainSubstring("no PriorityClass with name etcd-critical was found"))

	setReady(v1alpha1.MemberPodNotReadyReason, "pod phase Pending")
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.MembersHealthyCondition).Reason).To(Equal(v1alpha1.AllMembersHealthyReason))
}
