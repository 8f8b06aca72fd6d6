package v1alpha1

// Condition types of an EtcdSnapshot.
const (
	// SnapshotSucceededCondition is Unknown while the snapshot is pending or
	// running, True once the snapshot and its metadata are stored and
	// verified, and False when it failed; the reason says why. Wait on it
	// with kubectl wait --for=condition=Succeeded.
	SnapshotSucceededCondition = "Succeeded"
)

// Reasons of the Succeeded condition while it is Unknown.
const (
	// SnapshotPendingReason: the snapshot has not started yet.
	SnapshotPendingReason = "Pending"
	// ClusterNotReadyReason: the cluster has not formed or has no quorum; the
	// snapshot waits for it rather than copying a member that may be
	// behind.
	ClusterNotReadyReason = "ClusterNotReady"
	// WaitingForTurnReason: another snapshot of the same cluster is running;
	// snapshots of one cluster run one at a time, oldest first.
	WaitingForTurnReason = "WaitingForTurn"
	// SnapshotRunningReason: the snapshot Job is streaming the snapshot.
	SnapshotRunningReason = "Running"
)

// Reason of the Succeeded condition when it is True.
const (
	// SnapshotSavedReason: the snapshot is stored, etcd's own SHA-256 of it
	// was verified, and its metadata object is written beside it.
	SnapshotSavedReason = "SnapshotSaved"
)

// Reasons of the Succeeded condition when it is False. In every case no
// object that could be taken for a good snapshot was left: a snapshot
// counts only with its metadata object beside it, which is written last.
const (
	// ClusterNotFoundReason: spec.clusterName names no EtcdCluster.
	ClusterNotFoundReason = "ClusterNotFound"
	// CredentialsInvalidReason: the storage refused the credentials (or the
	// Secret that should hold them is missing or lacks a key).
	CredentialsInvalidReason = "CredentialsInvalid"
	// AmbientCredentialsRefusedReason: the S3 destination names no
	// credentialsSecretName, and the operator may not use ambient cloud
	// credentials (the node's instance role, say) for it: its
	// --allow-ambient-s3-credentials is off, or the bucket is not in its
	// --ambient-s3-buckets. No Job was created. The same reason refuses an
	// EtcdRecovery from such a snapshot.
	AmbientCredentialsRefusedReason = "AmbientCredentialsRefused"
	// BucketNotFoundReason: the bucket does not exist.
	BucketNotFoundReason = "BucketNotFound"
	// ObjectExistsReason: an object already exists at the snapshot's key; a
	// snapshot never overwrites one.
	ObjectExistsReason = "ObjectExists"
	// ChecksumMismatchReason: the SHA-256 that etcd appends to the snapshot
	// stream did not match the bytes received, or was missing.
	ChecksumMismatchReason = "ChecksumMismatch"
	// NoHealthyMemberReason: no member of the cluster was healthy when the
	// snapshot Job looked.
	NoHealthyMemberReason = "NoHealthyMember"
	// EtcdErrorReason: the member's snapshot stream failed.
	EtcdErrorReason = "EtcdError"
	// EncryptionKeyMissingReason: destination.encryption names a Secret,
	// or a key in it, that does not exist.
	EncryptionKeyMissingReason = "EncryptionKeyMissing"
	// EncryptionKeyInvalidReason: the key destination.encryption names is
	// neither an age identity (AGE-SECRET-KEY-1…) nor an age recipient
	// (age1…).
	EncryptionKeyInvalidReason = "EncryptionKeyInvalid"
	// StorageErrorReason: writing to the destination failed for another
	// reason (a full volume, a network error); the message has it.
	StorageErrorReason = "StorageError"
	// JobFailedReason: the snapshot Job failed without reporting a result
	// (killed, out of memory, past its deadline, its image not pulled).
	JobFailedReason = "JobFailed"
	// SnapshotPodCreateFailedReason: the API server refused the snapshot's
	// Job, or the Job controller's Pod for it (a quota, an admission
	// policy, a field it rejects); the message is the API server's. The
	// snapshot fails at once rather than at the Job's deadline.
	SnapshotPodCreateFailedReason = "PodCreateFailed"
)
