package etcdcluster

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/memberstatus"
)

// TestMemberStatus_EachWriteKeepsToItsConcern: the cluster controller's
// status writes, from a read that predates the others, neither clear nor
// set back fields of another concern, the member controller's included;
// and each clears its own.
func TestMemberStatus_EachWriteKeepsToItsConcern(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	ctx := context.Background()
	stale := h.member("demo-a")
	m := h.member("demo-a")
	m.Status.PodName, m.Status.Version = "demo-a", "3.6.0"
	h.g.Expect(memberstatus.Apply(ctx, h.c, m, memberstatus.Member)).To(Succeed())

	h.g.Expect(h.r.setFenced(ctx, stale.DeepCopy(), "diverged")).To(Succeed())
	rec := &v1alpha1.MemberMaintenance{Kind: v1alpha1.MemberMaintenanceDefragment, Since: metav1.NewTime(h.now)}
	h.g.Expect(h.r.setMaintenanceRecord(ctx, stale.DeepCopy(), rec, stale.Status.LastDefragTime)).To(Succeed())
	h.g.Expect(h.r.patchMemberStatus(ctx, stale.DeepCopy(), stale.Status.MemberID, "")).To(Succeed())
	got := h.member("demo-a")
	h.g.Expect(got.Status.Version).To(Equal("3.6.0"))
	h.g.Expect(got.Status.Fenced).To(Equal("diverged"))
	h.g.Expect(got.Status.Maintenance).NotTo(BeNil())
	h.g.Expect(got.Status.Role).To(BeEmpty())
	h.g.Expect(got.Status.MemberID).To(Equal(stale.Status.MemberID))

	done := metav1.NewTime(h.now)
	h.g.Expect(h.r.setMaintenanceRecord(ctx, got, nil, &done)).To(Succeed())
	h.g.Expect(h.r.setFenced(ctx, got, "")).To(Succeed())
	got = h.member("demo-a")
	h.g.Expect(got.Status.Fenced).To(BeEmpty())
	h.g.Expect(got.Status.Maintenance).To(BeNil())
	h.g.Expect(got.Status.LastDefragTime).NotTo(BeNil())
	h.g.Expect(got.Status.Version).To(Equal("3.6.0"))
}
