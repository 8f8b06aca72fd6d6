package service_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/service"
)

const (
	testCluster = "demo"
	testNS      = "prod"
)

func newCluster(mutate ...func(*v1alpha1.EtcdCluster)) *v1alpha1.EtcdCluster {
	c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: testCluster, Namespace: testNS, UID: "cluster-uid"}}
	for _, f := range mutate {
		f(c)
	}
	return c
}

func svcPort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(port)}
}

func TestBuilders(t *testing.T) {
	tests := []struct {
		name         string
		build        func(*v1alpha1.EtcdCluster) *corev1.Service
		wantName     string
		wantSpec     corev1.ServiceSpec
		wantHeadless bool
	}{
		{
			name:     "peer",
			build:    service.BuildPeer,
			wantName: "demo",
			wantSpec: corev1.ServiceSpec{
				Type:                     corev1.ServiceTypeClusterIP,
				ClusterIP:                corev1.ClusterIPNone,
				Selector:                 map[string]string{v1alpha1.ClusterLabel: testCluster},
				PublishNotReadyAddresses: true,
				Ports:                    []corev1.ServicePort{svcPort("client", 2379), svcPort("peer", 2380), svcPort("metrics", 2381)},
			},
		},
		{
			name:     "client",
			build:    service.BuildClient,
			wantName: "demo-client",
			wantSpec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeClusterIP,
				Selector: map[string]string{v1alpha1.ClusterLabel: testCluster, v1alpha1.RoleLabel: v1alpha1.RoleLabelVoter},
				Ports:    []corev1.ServicePort{svcPort("client", 2379)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := tt.build(newCluster())

			g.Expect(got.Name).To(Equal(tt.wantName))
			g.Expect(got.Namespace).To(Equal(testNS))
			g.Expect(got.Spec).To(Equal(tt.wantSpec))
			g.Expect(got.Labels).To(Equal(v1alpha1.ClusterLabels(testCluster)))
			g.Expect(got.Annotations).To(BeEmpty())
			g.Expect(got.OwnerReferences).To(Equal([]metav1.OwnerReference{{
				APIVersion:         "etcd.quorumctl.io/v1alpha1",
				Kind:               "EtcdCluster",
				Name:               testCluster,
				UID:                "cluster-uid",
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}}))
		})
	}
}

func TestBuilders_Names(t *testing.T) {
	g := NewWithT(t)
	c := newCluster()
	g.Expect(service.BuildPeer(c).Name).To(Equal(v1alpha1.PeerServiceName(testCluster)))
	g.Expect(service.BuildClient(c).Name).To(Equal(v1alpha1.ClientServiceName(testCluster)))
}

func TestBuilders_AdditionalMetadata(t *testing.T) {
	tests := []struct {
		name            string
		metadata        *v1alpha1.AdditionalMetadata
		wantLabels      map[string]string
		wantAnnotations map[string]string
	}{
		{name: "none", wantLabels: v1alpha1.ClusterLabels(testCluster)},
		{
			name: "added",
			metadata: &v1alpha1.AdditionalMetadata{
				Labels:      map[string]string{"team": "storage"},
				Annotations: map[string]string{"prometheus.io/scrape": "true"},
			},
			wantLabels:      with(v1alpha1.ClusterLabels(testCluster), "team", "storage"),
			wantAnnotations: map[string]string{"prometheus.io/scrape": "true"},
		},
		{
			name: "operator labels win",
			metadata: &v1alpha1.AdditionalMetadata{Labels: map[string]string{
				v1alpha1.ClusterLabel: "other", "app.kubernetes.io/managed-by": "helm",
			}},
			wantLabels: v1alpha1.ClusterLabels(testCluster),
		},
	}
	for _, tt := range tests {
		for name, build := range map[string]func(*v1alpha1.EtcdCluster) *corev1.Service{
			"peer": service.BuildPeer, "client": service.BuildClient,
		} {
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				g := NewWithT(t)
				c := newCluster(func(c *v1alpha1.EtcdCluster) { c.Spec.AdditionalMetadata = tt.metadata })
				snapshot := c.DeepCopy()

				got := build(c)
				g.Expect(got.Labels).To(Equal(tt.wantLabels))
				if tt.wantAnnotations == nil {
					g.Expect(got.Annotations).To(BeEmpty())
				} else {
					g.Expect(got.Annotations).To(Equal(tt.wantAnnotations))
				}
				// The selector is never widened or narrowed by user labels.
				g.Expect(got.Spec.Selector).To(HaveKeyWithValue(v1alpha1.ClusterLabel, testCluster))

				got.Labels["team"] = "x"
				if got.Annotations != nil {
					got.Annotations["prometheus.io/scrape"] = "x"
				}
				g.Expect(c).To(Equal(snapshot))
			})
		}
	}
}

func with(l map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for lk, lv := range l {
		out[lk] = lv
	}
	return out
}
