// Package etcdmember reconciles EtcdMember objects: it makes a member real
// (its data volume and Pod), reflects its etcd role onto the Pod label the
// client Service selects, reports readiness and the running version, and on
// deletion removes the member from etcd through a quorum-gated finalizer.
// Which members exist is the etcdcluster controller's decision, and so is
// when a member restarts: this controller re-creates a Pod only once that
// controller has approved it (status.restartApproved). So is when a volume
// grows: this controller, the only writer of the member's claim, grows it
// to spec.volumeSize once that controller has set it.
//
// Source map:
//   - reconciler.go: Reconciler, Reconcile (finalizer, volume, startup
//     ConfigMap, Pod, approved restarts, role label, version), the status
//     patch and the watches.
//   - volume.go: grows the member's claim to spec.volumeSize
//     (internal/component/pvc), and reports a refusal.
//   - status.go: updateStatus, the status fields this controller writes and
//     the Ready condition. patchStatus applies them, and only them, under
//     the field manager of memberstatus.Member; memberID, role, fenced,
//     rolledAt, restartApproved, maintenance and lastDefragTime are the
//     etcdcluster controller's, each under its own manager
//     (internal/component/memberstatus, docs/design/0030).
//   - finalizer.go: on deletion, the quorum-gated removal from etcd, and the
//     forced deletion of a Pod stranded on a lost node.
//   - disruption.go: keeps a cluster's removals and restarts from
//     interleaving, and asks etcd right before a restart (restartAllowed).
//   - drain.go: takes a Pod out of the client Service before an approved
//     restart deletes it.
//   - force.go: restarts a disaster recovery's survivor so that it starts
//     with --force-new-cluster.
//   - peerurl.go: moves a member's peer URL to https before its Pod starts,
//     while TLS is being turned on.
//   - tls.go: holds a Pod back until the TLS Secrets and ConfigMaps it
//     mounts exist.
//   - auth.go: the other members a password dial needs, since a learner
//     alone refuses the token exchange.
//
// Tests: finalizer_test.go holds the fixture (newFixture) the other tests
// share.
package etcdmember
