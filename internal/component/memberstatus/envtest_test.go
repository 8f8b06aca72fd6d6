//go:build envtest

package memberstatus_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/memberstatus"
	"github.com/quorumctl/etcd-operator/test/testenv"
)

var k8s client.Client

// TestMain: field ownership is a real API server's, not a fake's.
func TestMain(m *testing.M) {
	testenv.Main(m, filepath.Join("..", "..", ".."), func(cfg *rest.Config) error {
		scheme := runtime.NewScheme()
		_ = v1alpha1.AddToScheme(scheme)
		var err error
		k8s, err = client.New(cfg, client.Options{Scheme: scheme})
		return err
	})
}

func get(g *WithT, name string) *v1alpha1.EtcdMember {
	m := &v1alpha1.EtcdMember{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, m)).To(Succeed())
	return m
}

func create(g *WithT, name string) *v1alpha1.EtcdMember {
	m := &v1alpha1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1alpha1.EtcdMemberSpec{ClusterName: "c", ClusterToken: "c-token"}}
	g.Expect(k8s.Create(context.Background(), m)).To(Succeed())
	return m
}

// managersOf maps each top-level status field to the managers whose entry
// of the status subresource holds it, and fails on an Update entry there:
// after the first apply nothing may write status by merge patch.
func managersOf(g *WithT, m *v1alpha1.EtcdMember) map[string][]string {
	out := map[string][]string{}
	for _, e := range m.ManagedFields {
		if e.Subresource != "status" {
			continue
		}
		g.Expect(e.Operation).To(Equal(metav1.ManagedFieldsOperationApply), "manager %s writes status by %s", e.Manager, e.Operation)
		var fields map[string]map[string]any
		g.Expect(json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields)).To(Succeed())
		for k := range fields["f:status"] {
			if k != "." {
				out[k[len("f:"):]] = append(out[k[len("f:"):]], e.Manager)
			}
		}
	}
	return out
}

// expectOneWriter: every status field the member holds has exactly one
// manager, the one of its concern.
func expectOneWriter(g *WithT, m *v1alpha1.EtcdMember) {
	owners := managersOf(g, m)
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&m.Status)
	g.Expect(err).NotTo(HaveOccurred())
	for field := range u {
		want := ""
		for _, c := range memberstatus.Concerns {
			if slices.Contains(c.Fields(), field) {
				want = c.Manager
			}
		}
		g.Expect(owners[field]).To(Equal([]string{want}), "status.%s", field)
	}
	for field := range owners {
		g.Expect(u).To(HaveKey(field), "status.%s is owned but not set", field)
	}
}

// writeLegacy writes status the way the operator did before the split: one
// merge patch of every field, under the binary's manager, operation Update.
func writeLegacy(g *WithT, m *v1alpha1.EtcdMember) {
	before := m.DeepCopy()
	now := metav1.Now()
	m.Status = v1alpha1.EtcdMemberStatus{
		ObservedGeneration: 1, MemberID: "a1", Role: v1alpha1.MemberRoleVoter, PodName: m.Name, PodUID: "uid",
		Version: "3.6.0", RolledAt: &now, RestartApproved: "h1", NodeName: "n1", FirstReadyTime: &now,
		Fenced: "diverged", ForceNewCluster: true, LastDefragTime: &now,
		Maintenance: &v1alpha1.MemberMaintenance{Kind: v1alpha1.MemberMaintenanceDefragment, Since: now},
		Conditions: []metav1.Condition{{Type: v1alpha1.MemberReadyCondition, Status: metav1.ConditionTrue,
			Reason: v1alpha1.MemberReadyReason, LastTransitionTime: now}},
	}
	g.Expect(k8s.Status().Patch(context.Background(), m, client.MergeFrom(before), client.FieldOwner("manager"))).To(Succeed())
}

// TestUpgradeHandsFieldsToTheirConcerns: a member written by the old
// operator gets one manager per field on its first apply, and each concern
// can then clear what the old operator set.
func TestUpgradeHandsFieldsToTheirConcerns(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	writeLegacy(g, create(g, "upgrade"))

	m := get(g, "upgrade")
	m.Status.Version = "3.6.1"
	g.Expect(memberstatus.Apply(ctx, k8s, m, memberstatus.Member)).To(Succeed())
	m = get(g, "upgrade")
	g.Expect(m.Status.Version).To(Equal("3.6.1"))
	g.Expect(m.Status.Fenced).To(Equal("diverged"))
	expectOneWriter(g, m)

	for _, clear := range []struct {
		concern memberstatus.Concern
		edit    func(*v1alpha1.EtcdMemberStatus)
	}{
		{memberstatus.Fence, func(s *v1alpha1.EtcdMemberStatus) { s.Fenced = "" }},
		{memberstatus.Role, func(s *v1alpha1.EtcdMemberStatus) { s.Role = "" }},
		{memberstatus.Maintenance, func(s *v1alpha1.EtcdMemberStatus) { s.Maintenance = nil }},
		{memberstatus.Defrag, func(s *v1alpha1.EtcdMemberStatus) { s.LastDefragTime = nil }},
		{memberstatus.Member, func(s *v1alpha1.EtcdMemberStatus) { s.ForceNewCluster = false }},
	} {
		m = get(g, "upgrade")
		clear.edit(&m.Status)
		g.Expect(memberstatus.Apply(ctx, k8s, m, clear.concern)).To(Succeed(), clear.concern.Manager)
	}
	m = get(g, "upgrade")
	g.Expect(m.Status.Fenced).To(BeEmpty())
	g.Expect(m.Status.Role).To(BeEmpty())
	g.Expect(m.Status.Maintenance).To(BeNil())
	g.Expect(m.Status.LastDefragTime).To(BeNil())
	g.Expect(m.Status.ForceNewCluster).To(BeFalse())
	g.Expect(m.Status.MemberID).To(Equal("a1"))
	g.Expect(m.Status.PodName).To(Equal("upgrade"))
	g.Expect(m.Status.RestartApproved).To(Equal("h1"))
	expectOneWriter(g, m)
}

// TestStaleApplyKeepsOtherConcerns: a writer whose read predates another
// concern's writes neither sets them back nor clears them.
func TestStaleApplyKeepsOtherConcerns(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	stale := create(g, "stale")

	m := get(g, "stale")
	m.Status.MemberID = "b2"
	g.Expect(memberstatus.Apply(ctx, k8s, m, memberstatus.MemberID)).To(Succeed())
	m.Status.Role = v1alpha1.MemberRoleLearner
	g.Expect(memberstatus.Apply(ctx, k8s, m, memberstatus.Role)).To(Succeed())
	m.Status.Fenced = "diverged"
	g.Expect(memberstatus.Apply(ctx, k8s, m, memberstatus.Fence)).To(Succeed())
	now := metav1.Now()
	m.Status.RolledAt, m.Status.RestartApproved = &now, "h2"
	g.Expect(memberstatus.Apply(ctx, k8s, m, memberstatus.Restart)).To(Succeed())

	// The member controller and the maintenance step, from the first read.
	stale.Status.PodName = "stale"
	g.Expect(memberstatus.Apply(ctx, k8s, stale.DeepCopy(), memberstatus.Member)).To(Succeed())
	stale.Status.Maintenance = &v1alpha1.MemberMaintenance{Kind: v1alpha1.MemberMaintenanceExpandVolume, Since: now}
	g.Expect(memberstatus.Apply(ctx, k8s, stale.DeepCopy(), memberstatus.Maintenance)).To(Succeed())
	// The role goes from a read that has no ID: the ID stays.
	stale.Status.Role = ""
	g.Expect(memberstatus.Apply(ctx, k8s, stale.DeepCopy(), memberstatus.Role)).To(Succeed())

	m = get(g, "stale")
	g.Expect(m.Status.MemberID).To(Equal("b2"))
	g.Expect(m.Status.Role).To(BeEmpty())
	g.Expect(m.Status.Fenced).To(Equal("diverged"))
	g.Expect(m.Status.RestartApproved).To(Equal("h2"))
	g.Expect(m.Status.PodName).To(Equal("stale"))
	g.Expect(m.Status.Maintenance).NotTo(BeNil())
	expectOneWriter(g, m)

	// Clearing rolledAt restates the approval read: refused from the stale
	// read, which would set it back; done from a current one.
	stale.Status.RolledAt, stale.Status.RestartApproved = nil, "h1"
	err := memberstatus.Apply(ctx, k8s, stale.DeepCopy(), memberstatus.Restart, memberstatus.IfUnchanged())
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "%v", err)
	m = get(g, "stale")
	m.Status.RolledAt = nil
	g.Expect(memberstatus.Apply(ctx, k8s, m, memberstatus.Restart, memberstatus.IfUnchanged())).To(Succeed())
	m = get(g, "stale")
	g.Expect(m.Status.RolledAt).To(BeNil())
	g.Expect(m.Status.RestartApproved).To(Equal("h2"))
	expectOneWriter(g, m)
}
