package service_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/owner"
	"github.com/quorumctl/etcd-operator/internal/component/service"
)

// writes counts every mutating call a client makes.
type writes struct{ creates, updates, patches, deletes, applies int }

func (w *writes) total() int { return w.creates + w.updates + w.patches + w.deletes + w.applies }

func newClient(w *writes, objs ...client.Object) client.Client {
	return interceptor.NewClient(fakeclient.NewClientBuilder().WithObjects(objs...).Build(), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.creates++
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.updates++
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			w.patches++
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.deletes++
			return c.Delete(ctx, obj, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			w.applies++
			return c.Apply(ctx, obj, opts...)
		},
	})
}

func get(g Gomega, c client.Client, name string) *corev1.Service {
	s := &corev1.Service{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: name}, s)).To(Succeed())
	return s
}

func TestSync_CreatesThenIsIdle(t *testing.T) {
	for name, build := range map[string]func(*v1alpha1.EtcdCluster) *corev1.Service{
		"peer": service.BuildPeer, "client": service.BuildClient,
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			w := &writes{}
			c := newClient(w)
			cluster := newCluster(func(c *v1alpha1.EtcdCluster) {
				c.Spec.AdditionalMetadata = &v1alpha1.AdditionalMetadata{
					Labels: map[string]string{"team": "storage"}, Annotations: map[string]string{"a": "b"},
				}
			})
			desired := build(cluster)

			g.Expect(service.Sync(ctx, c, desired)).To(Succeed())
			g.Expect(w.creates).To(Equal(1))
			g.Expect(desired.ResourceVersion).To(BeEmpty(), "Sync must not modify the caller's object")

			stored := get(g, c, desired.Name)
			g.Expect(stored.Spec).To(Equal(desired.Spec))
			g.Expect(stored.Labels).To(Equal(desired.Labels))
			g.Expect(stored.Annotations).To(Equal(desired.Annotations))
			g.Expect(stored.OwnerReferences).To(Equal(desired.OwnerReferences))

			// Every reconcile of an idle cluster rebuilds and syncs: no writes.
			for range 5 {
				g.Expect(service.Sync(ctx, c, build(cluster))).To(Succeed())
			}
			g.Expect(w.total()).To(Equal(1))
		})
	}
}

func TestSync_NoWriteWhenOnlyUnownedFieldsDiffer(t *testing.T) {
	g := NewWithT(t)
	desired := service.BuildClient(newCluster())

	// What the API server and other controllers add to a live Service.
	live := desired.DeepCopy()
	live.Labels["other.example.com/tier"] = "db"
	live.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}
	live.Spec.ClusterIP = "10.96.0.42"
	live.Spec.ClusterIPs = []string{"10.96.0.42"}
	live.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	live.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
	live.Spec.SessionAffinity = corev1.ServiceAffinityNone
	live.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)

	w := &writes{}
	c := newClient(w, live)
	g.Expect(service.Sync(context.Background(), c, desired)).To(Succeed())
	g.Expect(w.total()).To(BeZero())
}

func TestSync_RepairsDrift(t *testing.T) {
	tests := []struct {
		name  string
		build func(*v1alpha1.EtcdCluster) *corev1.Service
		drift func(*corev1.Service)
	}{
		{
			name:  "client selector lost the role",
			build: service.BuildClient,
			drift: func(s *corev1.Service) { delete(s.Spec.Selector, v1alpha1.RoleLabel) },
		},
		{
			name:  "extra selector key",
			build: service.BuildPeer,
			drift: func(s *corev1.Service) { s.Spec.Selector["extra"] = "x" },
		},
		{
			name:  "selector points elsewhere",
			build: service.BuildPeer,
			drift: func(s *corev1.Service) { s.Spec.Selector[v1alpha1.ClusterLabel] = "other" },
		},
		{
			name:  "peer stopped publishing unready members",
			build: service.BuildPeer,
			drift: func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = false },
		},
		{
			name:  "client started publishing unready members",
			build: service.BuildClient,
			drift: func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true },
		},
		{
			name:  "port removed",
			build: service.BuildPeer,
			drift: func(s *corev1.Service) { s.Spec.Ports = s.Spec.Ports[:1] },
		},
		{
			name:  "port changed",
			build: service.BuildClient,
			drift: func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(12379) },
		},
		{
			name:  "extra port",
			build: service.BuildClient,
			drift: func(s *corev1.Service) {
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "debug", Port: 9999, Protocol: corev1.ProtocolTCP})
			},
		},
		{
			name:  "operator label removed",
			build: service.BuildPeer,
			drift: func(s *corev1.Service) { delete(s.Labels, v1alpha1.ClusterLabel) },
		},
		{
			name:  "additional label changed",
			build: service.BuildClient,
			drift: func(s *corev1.Service) { s.Labels["team"] = "other" },
		},
		{
			name:  "additional annotation removed",
			build: service.BuildPeer,
			drift: func(s *corev1.Service) { s.Annotations = nil },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			cluster := newCluster(func(c *v1alpha1.EtcdCluster) {
				c.Spec.AdditionalMetadata = &v1alpha1.AdditionalMetadata{
					Labels: map[string]string{"team": "storage"}, Annotations: map[string]string{"a": "b"},
				}
			})
			desired := tt.build(cluster)
			live := desired.DeepCopy()
			live.Labels["other.example.com/tier"] = "db"
			live.Spec.ClusterIP = clusterIP(desired)
			tt.drift(live)
			w := &writes{}
			c := newClient(w, live)

			g.Expect(service.Sync(ctx, c, desired)).To(Succeed())
			g.Expect(w.patches).To(Equal(1))
			g.Expect(w.total()).To(Equal(1))

			stored := get(g, c, desired.Name)
			g.Expect(stored.Spec.Selector).To(Equal(desired.Spec.Selector))
			g.Expect(stored.Spec.Ports).To(Equal(desired.Spec.Ports))
			g.Expect(stored.Spec.PublishNotReadyAddresses).To(Equal(desired.Spec.PublishNotReadyAddresses))
			for k, v := range desired.Labels {
				g.Expect(stored.Labels).To(HaveKeyWithValue(k, v))
			}
			g.Expect(stored.Annotations).To(Equal(desired.Annotations))
			// Fields Sync does not own survive.
			g.Expect(stored.Labels).To(HaveKeyWithValue("other.example.com/tier", "db"))
			g.Expect(stored.Spec.ClusterIP).To(Equal(clusterIP(desired)))
			g.Expect(stored.OwnerReferences).To(Equal(desired.OwnerReferences))

			// Converged: the next pass is a read.
			g.Expect(service.Sync(ctx, c, tt.build(cluster))).To(Succeed())
			g.Expect(w.total()).To(Equal(1))
		})
	}
}

// clusterIP is what the API server would have allocated.
func clusterIP(s *corev1.Service) string {
	if s.Spec.ClusterIP == corev1.ClusterIPNone {
		return corev1.ClusterIPNone
	}
	return "10.96.0.42"
}

func TestSync_KeepsAllocatedNodePorts(t *testing.T) {
	g := NewWithT(t)
	desired := service.BuildClient(newCluster())
	live := desired.DeepCopy()
	live.Spec.Type = corev1.ServiceTypeNodePort
	live.Spec.Ports[0].NodePort = 31379
	w := &writes{}
	c := newClient(w, live)

	g.Expect(service.Sync(context.Background(), c, desired)).To(Succeed())
	g.Expect(w.total()).To(BeZero(), "a node port the server allocated is not drift")

	// Drift elsewhere is repaired without dropping the node port.
	live.Spec.Selector = map[string]string{"x": "y"}
	c = newClient(w, live)
	g.Expect(service.Sync(context.Background(), c, desired)).To(Succeed())
	g.Expect(w.patches).To(Equal(1))
	g.Expect(get(g, c, desired.Name).Spec.Ports[0].NodePort).To(BeEquivalentTo(31379))
}

func TestSync_RefusesServicesItDoesNotControl(t *testing.T) {
	desired := service.BuildPeer(newCluster())
	tests := []struct {
		name           string
		refs           []metav1.OwnerReference
		wantController bool
	}{
		{name: "a user's Service of the same name"},
		{
			name: "a previous cluster of the same name",
			refs: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "EtcdCluster", Name: testCluster, UID: "old-uid", Controller: ptr.To(true),
			}},
			wantController: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			live := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: desired.Name, Namespace: testNS, OwnerReferences: tt.refs},
				Spec: corev1.ServiceSpec{
					Selector: map[string]string{"app": "mine"},
					Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
				},
			}
			w := &writes{}
			c := newClient(w, live)

			err := service.Sync(context.Background(), c, desired)
			var notOwned *owner.NotOwnedError
			g.Expect(errors.As(err, &notOwned)).To(BeTrue(), "got %v", err)
			g.Expect(notOwned.OwnerUID).To(BeEquivalentTo("cluster-uid"))
			g.Expect(notOwned.Controller != nil).To(Equal(tt.wantController))
			g.Expect(w.total()).To(BeZero())
			g.Expect(get(g, c, desired.Name).Spec.Selector).To(Equal(map[string]string{"app": "mine"}))
		})
	}
}
