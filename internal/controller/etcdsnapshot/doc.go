// Package etcdsnapshot reconciles EtcdSnapshot objects: it runs each
// snapshot once, in a Job of the operator's own image, one snapshot per
// cluster at a time (oldest first), and copies the Job's typed result into
// the snapshot's status. It never touches storage itself: the Jobs hold the
// credentials, the operator does not.
//
// Source map:
//   - reconciler.go: Reconciler, Reconcile; start (the Job, once the cluster
//     is Available and no older snapshot of it waits), observe (the Job's
//     result), lostJob, releaseLock (deleting a finished snapshot's Job,
//     which frees the cluster for the next one), and the watches.
//   - status.go: setPhase, succeed and fail: the phase, the Succeeded
//     condition and the result fields.
package etcdsnapshot
