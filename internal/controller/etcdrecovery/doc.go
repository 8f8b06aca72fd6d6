// Package etcdrecovery reconciles EtcdRecovery objects: it applies the
// guards of a disaster recovery (internal/recovery) to what each member's
// own endpoint reports, records the plan before anything changes, and then
// follows the recovery that the etcdcluster controller carries out, from
// the EtcdCluster's status.recovery, to its end. It writes the EtcdRecovery's
// status and nothing else: the membership is the etcdcluster controller's.
//
// Source map:
//   - reconciler.go: Reconciler, Reconcile (plan a new recovery, or follow a
//     running one), the conditions, the status patch and the watches.
//   - probe.go: asks every member on its own endpoint, and on its metrics
//     endpoint when the client endpoint does not answer.
//   - snapshots.go: the EtcdSnapshots a recovery from a snapshot may use.
//   - keycheck.go: the Job that checks an encrypted snapshot's key against
//     the snapshot the plan chose, before the plan is recorded.
//   - keyretry.go: the pure decisions of that check: the agent's verdict
//     told from a Job that did not run it, and the backoff of the next.
package etcdrecovery
