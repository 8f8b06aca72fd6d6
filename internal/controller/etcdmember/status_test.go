package etcdmember

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/memberstatus"
)

// TestStatus_LeavesTheClusterControllersFields: the member controller's
// status write, from a read that predates the cluster controller's, neither
// clears nor sets back the fields that controller owns.
func TestStatus_LeavesTheClusterControllersFields(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false, "demo-a")
	stale := f.member("demo-a")
	m := f.member("demo-a")
	m.Status.MemberID = "a1"
	f.g.Expect(memberstatus.Apply(ctx, f.c, m, memberstatus.MemberID)).To(Succeed())
	m.Status.Role = v1alpha1.MemberRoleVoter
	f.g.Expect(memberstatus.Apply(ctx, f.c, m, memberstatus.Role)).To(Succeed())
	m.Status.Fenced = "diverged"
	f.g.Expect(memberstatus.Apply(ctx, f.c, m, memberstatus.Fence)).To(Succeed())

	stale.Status.Version = "3.6.0"
	f.g.Expect(f.r.patchStatus(ctx, f.member("demo-a"), stale)).To(Succeed())
	got := f.member("demo-a")
	f.g.Expect(got.Status.Version).To(Equal("3.6.0"))
	f.g.Expect(got.Status.MemberID).To(Equal("a1"))
	f.g.Expect(got.Status.Role).To(Equal(v1alpha1.MemberRoleVoter))
	f.g.Expect(got.Status.Fenced).To(Equal("diverged"))

	f.start("demo-a")
	got = f.member("demo-a")
	f.g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	f.g.Expect(got.Status.MemberID).To(Equal("a1"))
	f.g.Expect(got.Status.Fenced).To(Equal("diverged"))
}

// TestStatus_UnchangedWritesNothing: a pass that changes none of the
// member controller's fields sends no write.
func TestStatus_UnchangedWritesNothing(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false, "demo-a")
	m := f.member("demo-a")
	f.g.Expect(f.r.patchStatus(ctx, m.DeepCopy(), m)).To(Succeed())
	f.g.Expect(f.member("demo-a").ResourceVersion).To(Equal(m.ResourceVersion))
}
