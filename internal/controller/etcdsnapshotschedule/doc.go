// Package etcdsnapshotschedule reconciles EtcdSnapshotSchedule objects: at
// each cron tick it creates an owned EtcdSnapshot (one for the whole
// backlog after downtime, and none while one of its own is still running),
// and it prunes what the retention rules release, deleting each pruned
// snapshot's stored objects (through a Job) before its EtcdSnapshot. It
// takes no snapshot itself; the etcdsnapshot controller does, one per
// cluster at a time.
//
// Source map: all of it is in reconciler.go: schedule (the tick's
// snapshot), prune and pruneOne (retention, and the Job that deletes
// stored objects), and updateStatus (the Scheduled and Pruned conditions).
package etcdsnapshotschedule
