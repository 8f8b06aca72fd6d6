// Package etcdcluster reconciles EtcdCluster objects. It decides which members
// exist and drives etcd's membership through single-seed bootstrap,
// learner-first scale-up and quorum-safe scale-down, one change at a time.
// It keeps the cluster's Services, PodDisruptionBudget, NetworkPolicy and TLS
// material. Each member's Pod and volume are the etcdmember controller's
// concern, and it is their only writer: this controller decides when a
// volume grows online and says so in the member's spec.volumeSize
// (volumes.go), and reads Pods and claims to decide.
//
// A pass: Reconcile observes into a scope (newScope), runs the phase list it
// hands to runPhases, and, deferred, computes the status (updateStatus) and
// patches it once. The order of the phases is that list; the order of the
// membership steps is the body of reconcileMembership. Neither is restated
// here. docs/development/architecture.md describes the pass and who writes
// what. Member status is written only through memberstatus.Apply, one
// field manager per concern (docs/design/0030-one-writer-per-field.md).
//
// Source map. The pass:
//   - reconciler.go: Reconciler, Reconcile and its phase list, the status
//     patch, the Events of transitions, and the watches.
//   - phases.go: runPhases, which runs every phase whatever the others did.
//   - scope.go: scope, what one pass observed and decided; newScope; the
//     etcdView and its queries.
//   - survey.go: inspectEtcd, the pass's look at etcd: the member list, each
//     member's status, members' own lists, alarms, metrics self-reports.
//   - memo.go: memo, what is kept in memory between passes of one cluster.
//   - consts.go: requeue intervals and timeouts.
//   - target.go: latchTarget (status.observed), the progress deadline, and
//     whether the target is reached.
//   - status.go: updateStatus, the one place conditions are set;
//     status_maintenance.go: the Maintenance condition.
//   - metrics.go: the cluster's metrics, recorded with the status.
//
// The phases besides membership:
//   - tls.go: reconcileTLS; tls_sources.go: CAs, certificate sources and
//     trust bundles; tls_certmanager.go: cert-manager Certificates;
//     tls_publish.go: member and client certificate Secrets; tls_rotation.go
//     and tls_sourceca.go: CA rotation; tls_sourceswitch.go: switching a
//     side's certificate source; tls_transition.go: turning TLS on for a
//     running cluster.
//   - services.go, pdb.go, networkpolicy.go: the Services, the
//     PodDisruptionBudget and the NetworkPolicy.
//   - auth.go: reconcileAuth, turning etcd's authentication on.
//   - maintenance.go: observeMaintenance and the maintenance step;
//     maintenance_job.go: the call running in the background and what it
//     leaves in the memo; maintenance_records.go: members' maintenance
//     records.
//
// The membership phase and its steps:
//   - members.go: syncMemberStatus (memberID, role, recorded URLs) and
//     reconcileMembership; adding learners, handing joiners etcd's member
//     list; promote.go: promoting learners once their first boot is
//     recorded, and removing learners no member owns.
//   - bootstrap.go: forming the cluster from its seed, and createMember and
//     patchMemberStatus (memberID and role), which other steps use; restore.go and
//     restore_asof.go: a cluster created from a snapshot.
//   - scale.go: scaling up and down, an add ahead of a promotion,
//     moving the leader away.
//   - remediate.go: assessMembers, replacing and fencing broken members;
//     quorumloss.go: assessQuorum and the QuorumLost report; recovery.go:
//     carrying out a disaster recovery.
//   - rollout.go: reconcileRollout and retiring replaced members;
//     restarts.go: restart approvals and members restarting on purpose;
//     volumes.go: growing (through spec.volumeSize) or replacing a
//     member's volume; preupgrade.go: the snapshot before a version
//     upgrade.
//   - pause.go: parking the last member at zero replicas, and waking it.
//
// Tests: harness_test.go and liveness_harness_test.go hold the harness (the
// reconciler against a fake API server and internal/etcd/fake;
// harness_apply_test.go stands in for the API server's apply of member
// status);
// statespace_*_test.go is the state-space test, built without -race. See
// docs/development/testing.md.
package etcdcluster
