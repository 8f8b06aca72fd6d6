package netpol

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/backupjob"
)

// NamespaceNameLabel is the label the API server puts on every namespace,
// with the namespace's own name as its value; a NetworkPolicy can select a
// namespace by name only through it.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// Sources are the operator-wide parts of every cluster's policy, set when
// the operator starts.
type Sources struct {
	// OperatorNamespace is where the operator's Pods run. Empty when it is
	// not known, as when the operator runs outside the cluster: no peer is
	// then added for the operator, whose connections come from outside the
	// Pod network and need an ipBlock in spec.networkPolicy.allowedClients.
	OperatorNamespace string
	// OperatorPodLabels select the operator's Pods in OperatorNamespace;
	// empty admits every Pod there.
	OperatorPodLabels map[string]string
	// MetricsNamespaces selects the namespaces admitted on the metrics
	// port, where Prometheus runs; nil admits no namespace.
	MetricsNamespaces *metav1.LabelSelector
}

// MemberSelector selects a cluster's member Pods and nothing else: the
// snapshot Jobs' Pods do not carry the cluster label, and only member Pods
// carry the member label.
func MemberSelector(cluster string) *metav1.LabelSelector {
	return &metav1.LabelSelector{
		MatchLabels: map[string]string{v1alpha1.ClusterLabel: cluster},
		MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: v1alpha1.MemberLabel, Operator: metav1.LabelSelectorOpExists,
		}},
	}
}

// Build is the cluster's NetworkPolicy, or nil when spec.networkPolicy
// turns it off. The result shares no memory with its arguments.
func Build(c *v1alpha1.EtcdCluster, src Sources) *networkingv1.NetworkPolicy {
	if !c.Spec.NetworkPolicy.On() {
		return nil
	}
	members := networkingv1.NetworkPolicyPeer{PodSelector: MemberSelector(c.Name)}
	// A peer with a pod selector and no namespace selector selects in the
	// policy's namespace, which is the cluster's and its Jobs'.
	jobs := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: backupjob.EtcdClientLabels(c.Name)}}

	clients := []networkingv1.NetworkPolicyPeer{members, jobs}
	peers := []networkingv1.NetworkPolicyPeer{*members.DeepCopy()}
	var metrics []networkingv1.NetworkPolicyPeer
	if op := src.operator(); op != nil {
		clients = append(clients, *op)
		// The operator reads the certificate a member serves on its peer
		// port, to know it took a new one in place (pass 2 of a CA
		// rotation): with a Secret or cert-manager source nothing else
		// tells. It holds every key of the cluster already, and the peer
		// port still demands a peer certificate.
		peers = append(peers, *op.DeepCopy())
		// The operator reads a member's metrics endpoint when its client
		// port does not answer, to judge a lost quorum.
		metrics = append(metrics, *op.DeepCopy())
	}
	for _, a := range c.Spec.NetworkPolicy.AllowedClients {
		clients = append(clients, peer(a))
	}
	if src.MetricsNamespaces != nil {
		metrics = append(metrics, networkingv1.NetworkPolicyPeer{NamespaceSelector: src.MetricsNamespaces.DeepCopy()})
	}

	ingress := []networkingv1.NetworkPolicyIngressRule{
		rule(v1alpha1.ClientPort, clients),
		rule(v1alpha1.PeerPort, peers),
	}
	// A rule without peers admits every source: with no one to admit, the
	// metrics port gets no rule at all and only the node reaches it.
	if len(metrics) > 0 {
		ingress = append(ingress, rule(v1alpha1.MetricsPort, metrics))
	}

	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:      v1alpha1.NetworkPolicyName(c.Name),
			Namespace: c.Namespace,
			// The cluster label puts it in the operator's cache.
			Labels: v1alpha1.ClusterLabels(c.Name),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "EtcdCluster", Name: c.Name, UID: c.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *MemberSelector(c.Name),
			// Ingress only: members dial each other, DNS, and on restore a
			// snapshot's storage; limiting that buys little and would need
			// to know every store's address.
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     ingress,
		},
	}
}

// operator is the peer of the operator's Pods, or nil when the operator's
// namespace is not known.
func (s Sources) operator() *networkingv1.NetworkPolicyPeer {
	if s.OperatorNamespace == "" {
		return nil
	}
	p := &networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{NamespaceNameLabel: s.OperatorNamespace},
	}}
	if len(s.OperatorPodLabels) > 0 {
		p.PodSelector = &metav1.LabelSelector{MatchLabels: maps.Clone(s.OperatorPodLabels)}
	}
	return p
}

func peer(a v1alpha1.NetworkPolicyClient) networkingv1.NetworkPolicyPeer {
	p := networkingv1.NetworkPolicyPeer{
		PodSelector:       a.PodSelector.DeepCopy(),
		NamespaceSelector: a.NamespaceSelector.DeepCopy(),
	}
	if b := a.IPBlock; b != nil {
		p.IPBlock = &networkingv1.IPBlock{CIDR: b.CIDR}
		if len(b.Except) > 0 {
			p.IPBlock.Except = append([]string(nil), b.Except...)
		}
	}
	return p
}

// rule admits peers on one TCP port. Protocol is set to what the API server
// would default it to, so a live policy compares equal to a built one.
func rule(port int32, from []networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicyIngressRule {
	return networkingv1.NetworkPolicyIngressRule{
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(port))}},
		From:  from,
	}
}
