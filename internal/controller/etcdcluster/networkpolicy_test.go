package etcdcluster

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/netpol"
)

func (h *harness) networkPolicy() (*networkingv1.NetworkPolicy, bool) {
	h.t.Helper()
	np := &networkingv1.NetworkPolicy{}
	err := h.c.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: v1alpha1.NetworkPolicyName(testName)}, np)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	h.g.Expect(err).NotTo(HaveOccurred())
	return np, true
}

func (h *harness) editSpec(edit func(*v1alpha1.EtcdClusterSpec)) {
	h.t.Helper()
	cl := h.cluster()
	edit(&cl.Spec)
	cl.Generation++
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
}

// networkPolicyWrites counts the controller's writes of NetworkPolicies and
// refuses them as RBAC would while forbid is set.
type networkPolicyWrites struct {
	n      int
	forbid bool
}

func (h *harness) countNetworkPolicyWrites() *networkPolicyWrites {
	w := &networkPolicyWrites{}
	write := func(obj client.Object) error {
		if _, ok := obj.(*networkingv1.NetworkPolicy); !ok {
			return nil
		}
		w.n++
		if w.forbid {
			return apierrors.NewForbidden(schema.GroupResource{Group: "networking.k8s.io", Resource: "networkpolicies"},
				obj.GetName(), errors.New("no RBAC rule allows it"))
		}
		return nil
	}
	h.r.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := write(obj); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			if err := write(obj); err != nil {
				return err
			}
			return c.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := write(obj); err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
	return w
}

func TestNetworkPolicy_KeptAsBuiltWithoutIdleWrites(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	writes := h.countNetworkPolicyWrites()
	h.reconcile()
	np, ok := h.networkPolicy()
	h.g.Expect(ok).To(BeTrue(), "on by default")
	h.g.Expect(np.Spec).To(Equal(netpol.Build(h.cluster(), testNetworkPolicy.Sources).Spec))
	h.g.Expect(metav1.IsControlledBy(np, h.cluster())).To(BeTrue(), "garbage collection removes it with the cluster")
	h.g.Expect(writes.n).To(Equal(1))

	h.reconcile()
	h.g.Expect(writes.n).To(Equal(1), "an idle pass writes nothing")
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))

	t.Log("a client added to the spec is let in on the next pass")
	h.editSpec(func(s *v1alpha1.EtcdClusterSpec) {
		s.NetworkPolicy.AllowedClients = []v1alpha1.NetworkPolicyClient{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}}}
	})
	h.reconcile()
	np, _ = h.networkPolicy()
	h.g.Expect(np.Spec.Ingress[0].From).To(ContainElement(networkingv1.NetworkPolicyPeer{
		PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}}))
	h.g.Expect(writes.n).To(Equal(2))
}

// A policy deleted or opened up by hand is put back; the watch on owned
// policies brings the pass that does it.
func TestNetworkPolicy_Restored(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.reconcile()
	want, _ := h.networkPolicy()

	np, _ := h.networkPolicy()
	np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
	h.g.Expect(h.c.Update(context.Background(), np)).To(Succeed())
	h.reconcile()
	np, _ = h.networkPolicy()
	h.g.Expect(np.Spec).To(Equal(want.Spec), "an edit is undone")

	h.g.Expect(h.c.Delete(context.Background(), np)).To(Succeed())
	h.reconcile()
	np, ok := h.networkPolicy()
	h.g.Expect(ok).To(BeTrue(), "a deleted policy is created again")
	h.g.Expect(np.Spec).To(Equal(want.Spec))
}

func TestNetworkPolicy_TurnedOffIsDeleted(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.reconcile()
	_, ok := h.networkPolicy()
	h.g.Expect(ok).To(BeTrue())
	h.editSpec(func(s *v1alpha1.EtcdClusterSpec) { s.NetworkPolicy.Enabled = ptr.To(false) })
	h.reconcile()
	_, ok = h.networkPolicy()
	h.g.Expect(ok).To(BeFalse())
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
}

// Pausing must not open the cluster: the policy stays, unlike the
// PodDisruptionBudget, and guards the member that wakes from its start.
func TestNetworkPolicy_KeptWhilePaused(t *testing.T) {
	h := newHarness(t)
	h.formed(1, "demo-a")
	h.reconcile()
	h.setReplicas(0)
	h.reconcile()
	_, ok := h.networkPolicy()
	h.g.Expect(ok).To(BeTrue())
}

// Without the permission to watch NetworkPolicies the operator keeps none,
// says so on every cluster that wants one, and goes on with everything else.
func TestNetworkPolicy_NotPermittedDoesNotStopSelfHeal(t *testing.T) {
	h := newHarness(t)
	h.r.NetworkPolicy.Permitted = false
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.breakPod("demo-c", "Error", wipedFatal)
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeFalse(), "self-heal ran")
	_, ok := h.networkPolicy()
	h.g.Expect(ok).To(BeFalse())
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.NetworkPolicyNotPermittedReason))
	h.g.Expect(ready.Message).To(ContainSubstring("may not list and watch NetworkPolicies"))
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionTrue), "it needs a person")

	t.Log("a cluster that turned its policy off is not held up")
	h.editSpec(func(s *v1alpha1.EtcdClusterSpec) { s.NetworkPolicy.Enabled = ptr.To(false) })
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).NotTo(Equal(v1alpha1.NetworkPolicyNotPermittedReason))
}

// A write the API server refuses (a role that allows watching only, an
// admission policy) is reported the same way, and self-heal goes on.
func TestNetworkPolicy_RefusedWriteDoesNotStopSelfHeal(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	writes := h.countNetworkPolicyWrites()
	writes.forbid = true
	h.breakPod("demo-c", "Error", wipedFatal)
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeFalse(), "self-heal ran")
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.NetworkPolicyNotPermittedReason))
	h.g.Expect(ready.Message).To(ContainSubstring("may not create NetworkPolicy ns/demo"))

	writes.forbid = false
	h.reconcile()
	_, ok := h.networkPolicy()
	h.g.Expect(ok).To(BeTrue(), "created once allowed")
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).NotTo(Equal(v1alpha1.NetworkPolicyNotPermittedReason))
}
