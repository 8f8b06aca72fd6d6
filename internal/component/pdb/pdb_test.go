package pdb_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pdb"
)

func TestMinAvailable(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct{ live, target, want int }{
		{3, 3, 2}, {3, 5, 3}, {5, 3, 3}, {4, 5, 3}, {1, 1, 1}, {1, 3, 2}, {2, 1, 2},
	} {
		g.Expect(pdb.MinAvailable(tc.live, tc.target)).To(BeEquivalentTo(tc.want), "live=%d target=%d", tc.live, tc.target)
	}
}

func TestBuild(t *testing.T) {
	g := NewWithT(t)
	c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns", UID: "u"}}
	b := pdb.Build(c, 2)
	g.Expect(b.Spec.MinAvailable.IntValue()).To(Equal(2))
	g.Expect(b.Spec.Selector.MatchLabels).To(Equal(map[string]string{
		v1alpha1.ClusterLabel: "demo", v1alpha1.RoleLabel: v1alpha1.RoleLabelVoter,
	}), "learners are not counted")
	g.Expect(b.OwnerReferences[0].UID).To(BeEquivalentTo("u"))
}

func TestSync_WritesOnlyOnChange(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	writes := 0
	c := fakeclient.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			writes++
			return cl.Patch(ctx, obj, p, opts...)
		},
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			writes++
			return cl.Create(ctx, obj, opts...)
		},
	}).Build()
	cluster := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns", UID: "u"}}
	ctx := context.Background()
	g.Expect(pdb.Sync(ctx, c, pdb.Build(cluster, 2))).To(Succeed())
	g.Expect(pdb.Sync(ctx, c, pdb.Build(cluster, 2))).To(Succeed())
	g.Expect(writes).To(Equal(1), "an unchanged budget is not written")
	g.Expect(pdb.Sync(ctx, c, pdb.Build(cluster, 3))).To(Succeed())
	g.Expect(writes).To(Equal(2))
	live := &policyv1.PodDisruptionBudget{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo"}, live)).To(Succeed())
	g.Expect(live.Spec.MinAvailable.IntValue()).To(Equal(3))
}
