package netpol_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/netpol"
	"github.com/quorumctl/etcd-operator/internal/component/owner"
)

// writeCounter is a fake API server that counts writes and can refuse them.
type writeCounter struct {
	client.WithWatch
	writes int
	// forbid makes every write fail as RBAC would refuse it.
	forbid bool
}

func newFake(t *testing.T) *writeCounter {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := networkingv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	w := &writeCounter{}
	write := func() error {
		w.writes++
		if w.forbid {
			return apierrors.NewForbidden(schema.GroupResource{Group: "networking.k8s.io", Resource: "networkpolicies"}, "main", errors.New("RBAC says no"))
		}
		return nil
	}
	w.WithWatch = fakeclient.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := write(); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			if err := write(); err != nil {
				return err
			}
			return c.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := write(); err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	return w
}

func (w *writeCounter) live(g *WithT) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{}
	g.Expect(w.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "main"}, np)).To(Succeed())
	return np
}

func TestSync_WritesOnlyOnChange(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := newFake(t)
	c := newCluster("main", func(c *v1alpha1.EtcdCluster) {
		// Empty selectors and a CIDR without exceptions survive the JSON
		// round trip as equal, or every pass would write.
		c.Spec.NetworkPolicy.AllowedClients = []v1alpha1.NetworkPolicyClient{
			{NamespaceSelector: &metav1.LabelSelector{}},
			{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{}}},
			{IPBlock: &v1alpha1.IPBlock{CIDR: "192.0.2.0/24"}},
		}
	})
	g.Expect(netpol.Sync(ctx, w, netpol.Build(c, sources()))).To(Succeed())
	g.Expect(w.writes).To(Equal(1))
	g.Expect(netpol.Sync(ctx, w, netpol.Build(c, sources()))).To(Succeed())
	g.Expect(w.writes).To(Equal(1), "an unchanged policy is not written")

	c.Spec.NetworkPolicy.AllowedClients = c.Spec.NetworkPolicy.AllowedClients[:1]
	g.Expect(netpol.Sync(ctx, w, netpol.Build(c, sources()))).To(Succeed())
	g.Expect(w.writes).To(Equal(2), "a changed spec is written")
	g.Expect(w.live(g).Spec).To(Equal(netpol.Build(c, sources()).Spec))
}

// A policy edited by hand, to let more in, is brought back as built.
func TestSync_RestoresAnEditedPolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := newFake(t)
	c := newCluster("main")
	g.Expect(netpol.Sync(ctx, w, netpol.Build(c, sources()))).To(Succeed())
	edited := w.live(g)
	edited.Spec.Ingress = append(edited.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
	edited.Spec.Ingress[1].From = append(edited.Spec.Ingress[1].From, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}})
	g.Expect(w.Update(ctx, edited)).To(Succeed())

	g.Expect(netpol.Sync(ctx, w, netpol.Build(c, sources()))).To(Succeed())
	g.Expect(w.live(g).Spec).To(Equal(netpol.Build(c, sources()).Spec))
}

func TestSync_LeavesAnotherOwnersPolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := newFake(t)
	theirs := netpol.Build(newCluster("main"), sources())
	theirs.OwnerReferences[0].UID = "someone-else"
	theirs.Spec.Ingress = nil
	g.Expect(w.Create(ctx, theirs)).To(Succeed())
	writes := w.writes

	err := netpol.Sync(ctx, w, netpol.Build(newCluster("main"), sources()))
	var notOwned *owner.NotOwnedError
	g.Expect(errors.As(err, &notOwned)).To(BeTrue(), "got %v", err)
	g.Expect(w.live(g).Spec.Ingress).To(BeEmpty(), "left as it was")

	g.Expect(netpol.Delete(ctx, w, newCluster("main"))).To(Succeed())
	g.Expect(w.writes).To(Equal(writes), "neither patched nor deleted")
	w.live(g)
}

// A refused write is a *NotPermittedError, which the cluster's status
// names; nothing is retried inside Sync.
func TestSync_Forbidden(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		prep func(g *WithT, w *writeCounter)
		run  func(w *writeCounter) error
		verb string
	}{
		{"create", func(*WithT, *writeCounter) {}, func(w *writeCounter) error {
			return netpol.Sync(ctx, w, netpol.Build(newCluster("main"), sources()))
		}, "create"},
		{"patch", func(g *WithT, w *writeCounter) {
			g.Expect(netpol.Sync(ctx, w, netpol.Build(newCluster("main"), netpol.Sources{}))).To(Succeed())
		}, func(w *writeCounter) error {
			return netpol.Sync(ctx, w, netpol.Build(newCluster("main"), sources()))
		}, "patch"},
		{"delete", func(g *WithT, w *writeCounter) {
			g.Expect(netpol.Sync(ctx, w, netpol.Build(newCluster("main"), sources()))).To(Succeed())
		}, func(w *writeCounter) error {
			return netpol.Delete(ctx, w, newCluster("main"))
		}, "delete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			w := newFake(t)
			tc.prep(g, w)
			w.forbid = true
			err := tc.run(w)
			var np *netpol.NotPermittedError
			g.Expect(errors.As(err, &np)).To(BeTrue(), "got %v", err)
			g.Expect(np.Verb).To(Equal(tc.verb))
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the API server's error is kept")
			g.Expect(err.Error()).To(ContainSubstring("spec.networkPolicy.enabled"), "the message says the way out")
		})
	}
}

func TestDelete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := newFake(t)
	g.Expect(netpol.Delete(ctx, w, newCluster("main"))).To(Succeed(), "nothing to delete")
	g.Expect(w.writes).To(BeZero())

	on := newCluster("main")
	g.Expect(netpol.Sync(ctx, w, netpol.Build(on, sources()))).To(Succeed())
	off := newCluster("main", func(c *v1alpha1.EtcdCluster) { c.Spec.NetworkPolicy.Enabled = ptr.To(false) })
	g.Expect(netpol.Build(off, sources())).To(BeNil())
	g.Expect(netpol.Delete(ctx, w, off)).To(Succeed())
	err := w.Get(ctx, client.ObjectKey{Namespace: ns, Name: "main"}, &networkingv1.NetworkPolicy{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
}

func TestNotPermittedAtStart(t *testing.T) {
	g := NewWithT(t)
	err := &netpol.NotPermittedError{Verb: "list and watch"}
	g.Expect(err.Error()).To(ContainSubstring("may not list and watch NetworkPolicies"))
	g.Expect(err.Error()).To(ContainSubstring("restart it"))
	g.Expect(errors.Unwrap(err)).To(BeNil())
}
