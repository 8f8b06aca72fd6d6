package v1alpha1

// Condition types of an EtcdSnapshotSchedule.
const (
	// ScheduledCondition is True while the schedule creates snapshots at its
	// ticks, False when it is suspended or its cron expression is invalid.
	ScheduledCondition = "Scheduled"
	// PrunedCondition is True when every snapshot the retention rules
	// release has been pruned, False while pruning one fails (its stored
	// object could not be deleted; the EtcdSnapshot is kept until it is).
	PrunedCondition = "Pruned"
)

// Reasons of the Scheduled condition.
const (
	// ScheduleActiveReason: snapshots are created at each tick.
	ScheduleActiveReason = "Active"
	// ScheduleSuspendedReason: spec.suspend is true.
	ScheduleSuspendedReason = "Suspended"
	// InvalidScheduleReason: spec.schedule is not a cron expression the
	// operator understands; the message says why.
	InvalidScheduleReason = "InvalidSchedule"
	// SnapshotRefusedReason: the API server refused the EtcdSnapshot of a
	// tick, such as one over http without s3.insecure from a schedule stored
	// before that rule existed; the message is the API server's.
	SnapshotRefusedReason = "SnapshotRefused"
)

// Reasons of the Pruned condition.
const (
	// RetentionMetReason: nothing is left to prune.
	RetentionMetReason = "RetentionMet"
	// PruningReason: a snapshot is being pruned (its object deleted).
	PruningReason = "Pruning"
	// PruneFailedReason: deleting a pruned snapshot's object failed; the
	// EtcdSnapshot is kept and the deletion retried.
	PruneFailedReason = "PruneFailed"
)

// Labels on the EtcdSnapshots and Jobs of backups.
const (
	// ScheduleLabel names the EtcdSnapshotSchedule that created a snapshot.
	ScheduleLabel = "etcd.quorumctl.io/schedule"
	// SnapshotLabel names the EtcdSnapshot a Job works for.
	SnapshotLabel = "etcd.quorumctl.io/snapshot"
	// PreUpgradeLabel marks the snapshot spec.rollout.snapshotBeforeUpgrade
	// took, with the etcd version of the upgrade it precedes.
	PreUpgradeLabel = "etcd.quorumctl.io/pre-upgrade"
	// JobKindLabel says what a Job does: JobKindSnapshot, JobKindPrune,
	// JobKindRestoreCheck or JobKindRecoveryKeyCheck.
	JobKindLabel = "etcd.quorumctl.io/job"

	JobKindSnapshot     = "snapshot"
	JobKindPrune        = "prune"
	JobKindRestoreCheck = "restore-check"
	// JobKindRecoveryKeyCheck checks an EtcdRecovery's key against an
	// encrypted snapshot before the recovery changes anything.
	JobKindRecoveryKeyCheck = "recovery-key-check"
)
