// Package etcdmember reconciles EtcdMember objects: it makes a member real
// (its data volume and Pod), reflects its etcd role onto the Pod label the
// client Service selects, reports readiness and the running version, and on
// deletion removes the member from etcd through a quorum-gated finalizer.
// Which members exist is the etcdcluster controller's decision.
package etcdmember
