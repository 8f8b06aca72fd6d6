package v1alpha1

// Condition types of an EtcdRecovery. Both are written by the recovery
// controller on every pass until the recovery is finished.
const (
	// RecoveryPlannedCondition is True once the guards passed and the plan
	// is recorded in status.plan, before anything is changed; False with a
	// refusal reason when a guard refused.
	RecoveryPlannedCondition = "Planned"
	// RecoveredCondition is True once the cluster has a quorum again,
	// rebuilt from the source.
	RecoveredCondition = "Recovered"
)

// Reasons of the Planned condition. Every reason but PlanRecorded,
// Planning, SurvivorNotAnswering, RecoveryKeyChecking and
// RecoveryKeyCheckNotRun is a refusal (phase Refused): nothing was
// changed, and a new EtcdRecovery must be created to try again.
const (
	// PlanningReason: the operator is looking at the members; a transient
	// failure to do so is retried.
	PlanningReason = "Planning"
	// SurvivorNotAnsweringReason: the named survivor answers on neither its
	// client nor its metrics endpoint, and self-heal has not judged it gone,
	// so it may still be starting. The recovery stays Pending, nothing is
	// changed, and it is planned again until the member answers (and is
	// then judged by the other guards) or the EtcdRecovery is deleted.
	SurvivorNotAnsweringReason = "SurvivorNotAnswering"
	// PlanRecordedReason: the guards passed and status.plan says what is
	// done and what is lost.
	PlanRecordedReason = "PlanRecorded"
	// ClusterNotFoundReason (declared with the EtcdSnapshot's reasons,
	// whose meaning it shares): no EtcdCluster of spec.clusterName exists
	// in the namespace.
	// ClusterNotFormedReason: the cluster has never formed, so it holds no
	// data to recover; it is still bootstrapping.
	ClusterNotFormedReason = "ClusterNotFormed"
	// ClusterPausedReason: the cluster is paused (replicas 0); its one
	// dormant member holds the data and wakes with it.
	ClusterPausedReason = "ClusterPaused"
	// QuorumReachableReason: a quorum of voters answers with a leader, so
	// the cluster needs no recovery. spec.force does not override this.
	QuorumReachableReason = "QuorumReachable"
	// MembersNotJudgedGoneReason: too many of the members that do not
	// answer have no self-heal verdict (lost or corrupt data, a lost node):
	// they may only be unreachable, and could still form the old cluster
	// while a survivor forms a new one. Wait for the cluster's QuorumLost
	// condition, or set spec.force once they are known to be gone.
	MembersNotJudgedGoneReason = "MembersNotJudgedGone"
	// NoSurvivorReason: no member answers on its own endpoint; only a
	// snapshot can bring the data back.
	NoSurvivorReason = "NoSurvivor"
	// SurvivorNotFoundReason: the named member is not a member of the
	// cluster, is a learner, or does not answer and is judged gone.
	SurvivorNotFoundReason = "SurvivorNotFound"
	// SurvivorBehindReason: the named member has applied less than another
	// member that still answers; recovering from it would lose what the
	// other has. The message names both. spec.force overrides it.
	SurvivorBehindReason = "SurvivorBehind"
	// MemoryStorageReason: the cluster keeps its data in memory
	// (storage.medium Memory), which does not survive the restart a
	// survivor recovery needs; recover from a snapshot instead.
	MemoryStorageReason = "MemoryStorage"
	// SnapshotNotFoundReason: the named EtcdSnapshot does not exist, is not
	// of this cluster, or did not succeed; or, with no name, the cluster
	// has no successful snapshot.
	SnapshotNotFoundReason = "SnapshotNotFound"
	// SnapshotTooOldReason: the snapshot completed longer ago than
	// source.snapshot.maxAge. spec.force overrides it.
	SnapshotTooOldReason = "SnapshotTooOld"
	// SnapshotEncryptedReason: the snapshot is encrypted and
	// source.snapshot.encryption names no key to decrypt it; checked before
	// anything changes, as the restore would be refused only after the
	// members were gone. Name its age identity, or pick an unencrypted
	// snapshot.
	SnapshotEncryptedReason = "SnapshotEncrypted"
	// RecoveryKeyCheckingReason: the snapshot is encrypted and a Job is
	// checking the key source.snapshot.encryption names, before anything
	// changes (the operator never reads the key itself). The recovery
	// stays Pending; the check's result plans or refuses it.
	RecoveryKeyCheckingReason = "RecoveryKeyChecking"
	// RecoveryKeyCheckNotRunReason: the key check's agent has given no
	// verdict because its Pod could not run: it cannot be scheduled, its
	// image cannot be pulled, a volume does not mount, the API server
	// refused it (a quota), or its Job failed or reached its deadline
	// before the agent wrote a result. That says nothing of the key or the
	// snapshot, so it is no refusal: the recovery stays Pending, nothing is
	// changed, and the message names the Pod's waiting reason, the Event,
	// or the Job's failure. A Job that has ended, or whose Pod cannot start
	// (its image), is replaced after a backoff (30 s, doubling to 10 min;
	// status.keyCheck records the last), for as long as the EtcdRecovery
	// exists. Fix the cause, or delete the EtcdRecovery to give up.
	RecoveryKeyCheckNotRunReason = "RecoveryKeyCheckNotRun"
	// RecoveryKeyMissingReason: the Secret or the key in it that
	// source.snapshot.encryption names does not exist. Nothing was changed.
	RecoveryKeyMissingReason = "RecoveryKeyMissing"
	// RecoveryKeyInvalidReason: the named key is not an age identity
	// (AGE-SECRET-KEY-1…); a recipient (age1…) can encrypt but not
	// decrypt. Nothing was changed.
	RecoveryKeyInvalidReason = "RecoveryKeyInvalid"
	// RecoveryKeyWrongReason: the named key is not the one the snapshot
	// was encrypted to: its fingerprint differs from the one the metadata
	// records, or the snapshot's age header does not open with it. The
	// message gives both fingerprints, never a key. Nothing was changed.
	RecoveryKeyWrongReason = "RecoveryKeyWrong"
	// SnapshotUnreadableReason: the key check's agent ran and could not
	// read the snapshot or its metadata (the object, the bucket or the
	// credentials, a metadata this release does not know); the message
	// carries the agent's code. Nothing was changed. A check whose agent
	// never reported is RecoveryKeyCheckNotRun, not this.
	SnapshotUnreadableReason = "SnapshotUnreadable"
	// SnapshotRecoveryUnavailableReason: this operator cannot restore
	// snapshots yet; recover from a survivor.
	SnapshotRecoveryUnavailableReason = "SnapshotRecoveryUnavailable"
	// The snapshot's destination may also be refused with
	// AmbientCredentialsRefusedReason (an EtcdSnapshot reason): it names no
	// credentials Secret and the operator may not use ambient credentials
	// for it, so no restore could read it; nothing is changed.

	// AnotherRecoveryReason: another EtcdRecovery of the same cluster is
	// running or was taken up first.
	AnotherRecoveryReason = "AnotherRecovery"
)

// Reasons of the Recovered condition.
const (
	// NotStartedReason: the recovery has not begun (it is being planned or
	// was refused).
	NotStartedReason = "NotStarted"
	// RecoveryInProgressReason: the cluster controller is rebuilding the
	// cluster; the message says which step it is on.
	RecoveryInProgressReason = "InProgress"
	// ClusterRestoredReason: the cluster answers again as a one-member
	// cluster rebuilt from the source, and grows back to spec.replicas by
	// ordinary scale-up (the EtcdCluster's Ready condition says when).
	ClusterRestoredReason = "ClusterRestored"
	// RecoveryFailedReason: the recovery began but cannot finish; the
	// message says why and what is left.
	RecoveryFailedReason = "RecoveryFailed"
)
