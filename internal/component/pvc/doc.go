// Package pvc builds, creates and grows the PersistentVolumeClaim that holds
// one etcd member's data dir.
//
// The claim is owned by the EtcdMember, not by its Pod, so the data outlives
// any number of Pod restarts and re-creations and is only garbage-collected
// when the member itself is gone (after it has been removed from etcd).
// Members on the Memory medium have no claim at all. The member controller
// is the claim's only writer: it grows the claim to the member's
// spec.volumeSize, which the cluster controller sets when a rollout grows
// the volume online.
package pvc
