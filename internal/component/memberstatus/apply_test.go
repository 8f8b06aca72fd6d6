package memberstatus

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// newFake is controller-runtime's fake API server with its default
// tracker, which keeps managed fields and applies as the API server does,
// holding member m.
func newFake(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	m := &v1alpha1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns"}}
	return fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(m).
		WithStatusSubresource(&v1alpha1.EtcdMember{}).WithReturnManagedFields().Build()
}

func read(g *WithT, c client.Client, name string) *v1alpha1.EtcdMember {
	m := &v1alpha1.EtcdMember{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, m)).To(Succeed())
	return m
}

// TestApplyWritesOnlyItsConcern: each writer sets and clears its own
// fields; none removes or sets back another's, even from a stale read.
func TestApplyWritesOnlyItsConcern(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := newFake(t)

	stale := read(g, c, "m")
	m := read(g, c, "m")
	m.Status.MemberID = "a1"
	g.Expect(Apply(ctx, c, m, MemberID)).To(Succeed())
	m.Status.Role = v1alpha1.MemberRoleVoter
	g.Expect(Apply(ctx, c, m, Role)).To(Succeed())
	m.Status.Fenced = "diverged"
	g.Expect(Apply(ctx, c, m, Fence)).To(Succeed())

	// The member controller, from a read before all of that.
	stale.Status.PodName, stale.Status.Version = "m", "3.6.0"
	g.Expect(Apply(ctx, c, stale, Member)).To(Succeed())
	got := read(g, c, "m")
	g.Expect(got.Status.MemberID).To(Equal("a1"))
	g.Expect(got.Status.Role).To(Equal(v1alpha1.MemberRoleVoter))
	g.Expect(got.Status.Fenced).To(Equal("diverged"))
	g.Expect(got.Status.PodName).To(Equal("m"))

	// Clearing: the role and the fence go, the ID and the Pod stay.
	got.Status.Role, got.Status.Fenced = "", ""
	g.Expect(Apply(ctx, c, got.DeepCopy(), Role)).To(Succeed())
	g.Expect(Apply(ctx, c, got.DeepCopy(), Fence)).To(Succeed())
	got = read(g, c, "m")
	g.Expect(got.Status.Role).To(BeEmpty())
	g.Expect(got.Status.Fenced).To(BeEmpty())
	g.Expect(got.Status.MemberID).To(Equal("a1"))
	g.Expect(got.Status.PodName).To(Equal("m"))
	g.Expect(got.Status.Version).To(Equal("3.6.0"))
}

// TestApplyUpdatesTheObject: the caller's member becomes what the API
// server holds, other writers' fields included.
func TestApplyUpdatesTheObject(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := newFake(t)
	m := read(g, c, "m")
	m.Status.PodName = "m"
	g.Expect(Apply(ctx, c, m, Member)).To(Succeed())

	other := read(g, c, "m")
	other.Status.Fenced = "diverged"
	g.Expect(Apply(ctx, c, other, Fence)).To(Succeed())
	g.Expect(other.Status.PodName).To(Equal("m"))
	g.Expect(other.ResourceVersion).NotTo(Equal(m.ResourceVersion))
}

// TestApplyIfUnchanged: an apply that restates a field from its read is
// refused once the member has changed since.
func TestApplyIfUnchanged(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := newFake(t)
	m := read(g, c, "m")
	stale := m.DeepCopy()
	now := metav1.Now()
	m.Status.RolledAt, m.Status.RestartApproved = &now, "h2"
	g.Expect(Apply(ctx, c, m, Restart)).To(Succeed())

	stale.Status.RolledAt = nil
	err := Apply(ctx, c, stale, Restart, IfUnchanged())
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "%v", err)
	g.Expect(read(g, c, "m").Status.RestartApproved).To(Equal("h2"))

	fresh := read(g, c, "m")
	fresh.Status.RolledAt = nil
	g.Expect(Apply(ctx, c, fresh, Restart, IfUnchanged())).To(Succeed())
	got := read(g, c, "m")
	g.Expect(got.Status.RolledAt).To(BeNil())
	g.Expect(got.Status.RestartApproved).To(Equal("h2"))
}
