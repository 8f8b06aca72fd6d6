package setup

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quorumctl/etcd-operator/internal/component/netpol"
)

func TestNetworkPolicySources(t *testing.T) {
	g := NewWithT(t)
	src, err := NetworkPolicySources("etcd-operator-system", "app.kubernetes.io/name=etcd-operator, app.kubernetes.io/instance=op",
		"kubernetes.io/metadata.name in (monitoring, observability)")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(src.OperatorNamespace).To(Equal("etcd-operator-system"))
	g.Expect(src.OperatorPodLabels).To(Equal(map[string]string{"app.kubernetes.io/name": "etcd-operator", "app.kubernetes.io/instance": "op"}))
	g.Expect(src.MetricsNamespaces).To(Equal(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"monitoring", "observability"},
	}}}))

	src, err = NetworkPolicySources("", "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(src).To(Equal(netpol.Sources{}), "outside the cluster nothing is known")

	for _, bad := range [][3]string{
		{"ns", "app", ""},
		{"", "app=op", ""},
		{"ns", "", "a in b"},
	} {
		_, err := NetworkPolicySources(bad[0], bad[1], bad[2])
		g.Expect(err).To(HaveOccurred(), "%q", bad)
	}
}

// reviewer answers SelfSubjectAccessReviews from a list of allowed
// attributes, and records what it was asked.
func reviewer(allowed map[authorizationv1.ResourceAttributes]bool, asked *[]authorizationv1.ResourceAttributes, fail error) client.Client {
	return fakeclient.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			if fail != nil {
				return fail
			}
			r := obj.(*authorizationv1.SelfSubjectAccessReview)
			*asked = append(*asked, *r.Spec.ResourceAttributes)
			r.Status.Allowed = allowed[*r.Spec.ResourceAttributes]
			return nil
		},
	}).Build()
}

func TestMayWatch(t *testing.T) {
	gr := schema.GroupResource{Group: "networking.k8s.io", Resource: "networkpolicies"}
	attr := func(ns, verb string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: gr.Group, Resource: gr.Resource}
	}
	ctx := context.Background()

	t.Run("cluster-wide", func(t *testing.T) {
		g := NewWithT(t)
		var asked []authorizationv1.ResourceAttributes
		ok, denied, err := MayWatch(ctx, reviewer(map[authorizationv1.ResourceAttributes]bool{attr("", "list"): true, attr("", "watch"): true}, &asked, nil), gr, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeTrue())
		g.Expect(denied).To(BeEmpty())
		g.Expect(asked).To(ConsistOf(attr("", "list"), attr("", "watch")))
	})
	t.Run("watch refused", func(t *testing.T) {
		g := NewWithT(t)
		var asked []authorizationv1.ResourceAttributes
		ok, denied, err := MayWatch(ctx, reviewer(map[authorizationv1.ResourceAttributes]bool{attr("", "list"): true}, &asked, nil), gr, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeFalse())
		g.Expect(denied).To(Equal("watch networkpolicies.networking.k8s.io in all namespaces"))
	})
	t.Run("every watched namespace is asked", func(t *testing.T) {
		g := NewWithT(t)
		var asked []authorizationv1.ResourceAttributes
		allowed := map[authorizationv1.ResourceAttributes]bool{attr("a", "list"): true, attr("a", "watch"): true, attr("b", "list"): true}
		ok, denied, err := MayWatch(ctx, reviewer(allowed, &asked, nil), gr, []string{"a", "b"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeFalse())
		g.Expect(denied).To(Equal("watch networkpolicies.networking.k8s.io in namespace b"))
		g.Expect(asked).To(HaveLen(4))
	})
	t.Run("the API server does not answer", func(t *testing.T) {
		g := NewWithT(t)
		var asked []authorizationv1.ResourceAttributes
		_, _, err := MayWatch(ctx, reviewer(nil, &asked, errors.New("connection refused")), gr, nil)
		g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
	})
}
