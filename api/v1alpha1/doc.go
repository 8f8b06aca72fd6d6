// Package v1alpha1 holds the etcd.quorumctl.io/v1alpha1 API: EtcdCluster, the
// object users write, and EtcdMember, one per etcd member, which the operator
// owns. Condition types and reasons, and the names and labels of every child
// object, are defined here so there is one source of truth for them.
//
// +kubebuilder:object:generate=true
// +groupName=etcd.quorumctl.io
package v1alpha1
