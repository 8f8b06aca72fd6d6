package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxAllowedClients bounds spec.networkPolicy.allowedClients; the CEL rules
// on each entry are costed against it.
const MaxAllowedClients = 32

// NetworkPolicySpec controls the NetworkPolicy the operator keeps for the
// cluster. It protects the members' ports: the client port (2379) admits the
// operator, the cluster's own snapshot Jobs, its members and AllowedClients;
// the peer port (2380) admits the members only; the metrics port (2381)
// admits the operator and the monitoring namespaces the operator was
// installed with. Everything else is refused, except traffic from the node a
// member runs on (the kubelet's probes), which NetworkPolicy always admits.
// The policy does nothing on a network plugin that does not enforce
// NetworkPolicy.
type NetworkPolicySpec struct {
	// Enabled switches the policy on (the default) or off. Off, the operator
	// deletes the policy it made and every Pod that reaches a member can use
	// it, as without any policy.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// AllowedClients are let in on the client port besides the operator,
	// the cluster's Jobs and its members. Each entry is a NetworkPolicy
	// peer: podSelector alone selects Pods in the cluster's namespace,
	// namespaceSelector alone every Pod of the namespaces it selects
	// (namespaceSelector: {} is every namespace), both together the
	// selected Pods of the selected namespaces, and ipBlock addresses
	// outside the Pod network, such as an API server or an operator that
	// does not run in the cluster.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	AllowedClients []NetworkPolicyClient `json:"allowedClients,omitempty"`
}

// On reports whether the cluster gets a NetworkPolicy.
func (n NetworkPolicySpec) On() bool { return n.Enabled == nil || *n.Enabled }

// NetworkPolicyClient selects clients by Pod and namespace labels, or by
// address. An empty entry would select nothing in the NetworkPolicy API and
// is refused; so is ipBlock together with a selector, which the
// NetworkPolicy API does not allow either.
//
// +kubebuilder:validation:XValidation:rule="has(self.podSelector) || has(self.namespaceSelector) || has(self.ipBlock)",message="networkPolicy.allowedClients: each entry needs podSelector, namespaceSelector or ipBlock"
// +kubebuilder:validation:XValidation:rule="!has(self.ipBlock) || !(has(self.podSelector) || has(self.namespaceSelector))",message="networkPolicy.allowedClients: ipBlock cannot be combined with podSelector or namespaceSelector in one entry; use two entries"
type NetworkPolicyClient struct {
	// PodSelector selects Pods: in the cluster's namespace, or in the
	// namespaces NamespaceSelector selects when it is set too. {} is every
	// Pod.
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`

	// NamespaceSelector selects namespaces by their labels; every namespace
	// carries kubernetes.io/metadata.name with its own name. {} is every
	// namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// IPBlock admits addresses by CIDR. NetworkPolicy means it for
	// addresses outside the Pod network: whether it matches Pod addresses,
	// or traffic whose source address was rewritten on the way, depends on
	// the network plugin.
	// +optional
	IPBlock *IPBlock `json:"ipBlock,omitempty"`
}

// IPBlock is a CIDR with exceptions, as in a NetworkPolicy.
type IPBlock struct {
	// CIDR such as 192.168.1.0/24 or 2001:db8::/64.
	// +kubebuilder:validation:Format=cidr
	// +kubebuilder:validation:MaxLength=64
	CIDR string `json:"cidr"`

	// Except are CIDRs inside CIDR that are not admitted.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Format=cidr
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=atomic
	// +optional
	Except []string `json:"except,omitempty"`
}
