package service

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// Port names match the container ports of member Pods.
const (
	clientPortName  = "client"
	peerPortName    = "peer"
	metricsPortName = "metrics"
)

// BuildPeer returns the headless Service that gives each member the DNS name
// v1alpha1.MemberHost, through the Pods' hostname and subdomain.
//
// It publishes members that are not ready: a member is only ready once it has
// joined, and to join it must reach its peers by name, so gating DNS on
// readiness would deadlock every bootstrap and every scale-up.
func BuildPeer(cluster *v1alpha1.EtcdCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: objectMeta(cluster, v1alpha1.PeerServiceName(cluster.Name)),
		Spec: corev1.ServiceSpec{
			Type:                     corev1.ServiceTypeClusterIP,
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{v1alpha1.ClusterLabel: cluster.Name},
			PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{
				port(clientPortName, v1alpha1.ClientPort),
				port(peerPortName, v1alpha1.PeerPort),
				port(metricsPortName, v1alpha1.MetricsPort),
			},
		},
	}
}

// BuildClient returns the Service clients connect to. It selects voters only:
// a learner refuses most client requests, so routing to one would fail them.
// Readiness then narrows it to voters that are healthy.
func BuildClient(cluster *v1alpha1.EtcdCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: objectMeta(cluster, v1alpha1.ClientServiceName(cluster.Name)),
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP,
			Selector: map[string]string{
				v1alpha1.ClusterLabel: cluster.Name,
				v1alpha1.RoleLabel:    v1alpha1.RoleLabelVoter,
			},
			PublishNotReadyAddresses: false,
			Ports:                    []corev1.ServicePort{port(clientPortName, v1alpha1.ClientPort)},
		},
	}
}

// port sets protocol and target port explicitly, to what the API server would
// default them to, so a live Service compares equal to a freshly built one.
func port(name string, number int32) corev1.ServicePort {
	return corev1.ServicePort{
		Name:       name,
		Protocol:   corev1.ProtocolTCP,
		Port:       number,
		TargetPort: intstr.FromInt32(number),
	}
}

// objectMeta takes additional metadata from the cluster's spec rather than its
// latched target: unlike a member, a Service can change in place at any time.
func objectMeta(cluster *v1alpha1.EtcdCluster, name string) metav1.ObjectMeta {
	labels := map[string]string{}
	var annotations map[string]string
	if md := cluster.Spec.AdditionalMetadata; md != nil {
		maps.Copy(labels, md.Labels)
		if len(md.Annotations) > 0 {
			annotations = maps.Clone(md.Annotations)
		}
	}
	maps.Copy(labels, v1alpha1.ClusterLabels(cluster.Name))

	return metav1.ObjectMeta{
		Name:        name,
		Namespace:   cluster.Namespace,
		Labels:      labels,
		Annotations: annotations,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion:         v1alpha1.GroupVersion.String(),
			Kind:               "EtcdCluster",
			Name:               cluster.Name,
			UID:                cluster.UID,
			Controller:         ptr.To(true),
			BlockOwnerDeletion: ptr.To(true),
		}},
	}
}
