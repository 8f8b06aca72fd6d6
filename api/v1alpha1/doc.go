// Package v1alpha1 holds the etcd.quorumctl.io/v1alpha1 API: EtcdCluster, the
// object users write, EtcdMember, one per etcd member, which the operator
// owns, and the backups: EtcdSnapshot (one snapshot) and EtcdSnapshotSchedule
// (snapshots on a cron schedule, with retention). Condition types and reasons, and the names and labels of every child
// object, are defined here so there is one source of truth for them.
//
// +kubebuilder:object:generate=true
// +groupName=etcd.quorumctl.io
package v1alpha1
