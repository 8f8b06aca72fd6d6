package etcdcluster

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

func (h *harness) pdbMinAvailable() (int, bool) {
	h.t.Helper()
	p := &policyv1.PodDisruptionBudget{}
	err := h.c.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: testName}, p)
	if apierrors.IsNotFound(err) {
		return 0, false
	}
	h.g.Expect(err).NotTo(HaveOccurred())
	return p.Spec.MinAvailable.IntValue(), true
}

func TestPDB_NoneBeforeTheClusterForms(t *testing.T) {
	h := newHarness(t)
	h.createCluster(3)
	h.reconcile()
	_, exists := h.pdbMinAvailable()
	h.g.Expect(exists).To(BeFalse())
}

func TestPDB_FollowsTheLargerOfVotersAndTarget(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.reconcile()
	minAvailable, exists := h.pdbMinAvailable()
	h.g.Expect(exists).To(BeTrue())
	h.g.Expect(minAvailable).To(Equal(2), "quorum of 3")

	t.Log("scaling to 5: the budget is the quorum of the target at once, before any voter is added")
	h.setReplicas(5)
	h.reconcile()
	minAvailable, _ = h.pdbMinAvailable()
	h.g.Expect(minAvailable).To(Equal(3), "quorum of 5")
}

func TestPDB_DeletedWhilePaused(t *testing.T) {
	h := newHarness(t)
	h.formed(1, "demo-a")
	h.reconcile()
	_, exists := h.pdbMinAvailable()
	h.g.Expect(exists).To(BeTrue())
	h.setReplicas(0)
	h.reconcile()
	_, exists = h.pdbMinAvailable()
	h.g.Expect(exists).To(BeFalse(), "no budget over a paused cluster")
}

func TestVersionsAligned(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.reconcile()
	va := h.condition(v1alpha1.VersionsAlignedCondition)
	h.g.Expect(va.Status).To(BeEquivalentTo("True"))
	h.g.Expect(va.Reason).To(Equal(v1alpha1.SingleVersionReason))

	b := h.etcd.Members()[1]
	st := statusFor(b.ID, h.etcd.Members()[0].ID)
	st.Version = "3.6.16"
	// Same leader and term as the quorum, so only the version stands out.
	lead, err := h.etcd.Status(context.Background(), clientURL("demo-a"))
	h.g.Expect(err).NotTo(HaveOccurred())
	st.LeaderID, st.RaftTerm = lead.LeaderID, lead.RaftTerm
	h.etcd.SetStatus(clientURL("demo-b"), st)
	h.reconcile()
	va = h.condition(v1alpha1.VersionsAlignedCondition)
	h.g.Expect(va.Status).To(BeEquivalentTo("False"))
	h.g.Expect(va.Reason).To(Equal(v1alpha1.MixedVersionsReason))
	h.g.Expect(va.Message).To(ContainSubstring("3.6.16: demo-b"))
	h.g.Expect(va.Message).To(ContainSubstring("3.7.3: demo-a, demo-c"))
}
