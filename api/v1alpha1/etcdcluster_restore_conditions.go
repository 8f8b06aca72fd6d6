package v1alpha1

// Reasons of the Available and Ready conditions (and of Stalled, for a
// refusal) of a cluster created from spec.bootstrap.restore. A refusal is
// bad input: nothing more is done until the spec or the storage changes, no
// seed is created (or the seed never starts etcd), and an Event of the same
// reason is recorded once.
const (
	// RestoreCheckingReason (Ready=False, Available=False): the operator is
	// checking the snapshot before creating the seed.
	RestoreCheckingReason = "RestoreChecking"
	// RestoringReason (Ready=False, Available=False): the seed is downloading
	// and restoring the snapshot.
	RestoringReason = "Restoring"
	// RestoreSnapshotNotFoundReason: spec.bootstrap.restore.snapshotName
	// names no EtcdSnapshot, or the one fromSchedule chose is gone (the
	// choice is latched, so another is never taken in its place).
	RestoreSnapshotNotFoundReason = "RestoreSnapshotNotFound"
	// RestoreNoSnapshotBeforeReason: spec.bootstrap.restore.fromSchedule
	// finds no successful snapshot of the schedule that completed before
	// its time. It clears by itself once one does (a snapshot restored
	// into the namespace, or, for a time still ahead, one the schedule
	// takes); nothing is chosen until then.
	RestoreNoSnapshotBeforeReason = "RestoreNoSnapshotBefore"
	// RestoreSnapshotNotReadyReason: the named EtcdSnapshot has not
	// succeeded yet; the restore waits for it.
	RestoreSnapshotNotReadyReason = "RestoreSnapshotNotReady"
	// RestoreSnapshotFailedReason: the named EtcdSnapshot failed.
	RestoreSnapshotFailedReason = "RestoreSnapshotFailed"
	// RestoreObjectNotFoundReason: no snapshot object (or no metadata object
	// beside it) is at the source.
	RestoreObjectNotFoundReason = "RestoreObjectNotFound"
	// RestoreCredentialsInvalidReason: the storage refused the credentials,
	// or their Secret is missing.
	RestoreCredentialsInvalidReason = "RestoreCredentialsInvalid"
	// RestoreAmbientCredentialsRefusedReason: the S3 source names no
	// credentialsSecretName, and the operator may not use ambient cloud
	// credentials for it (see AmbientCredentialsRefusedReason); nothing
	// was created to read it.
	RestoreAmbientCredentialsRefusedReason = "RestoreAmbientCredentialsRefused"
	// RestoreBucketNotFoundReason: the source bucket does not exist.
	RestoreBucketNotFoundReason = "RestoreBucketNotFound"
	// RestoreMetadataInvalidReason: the metadata beside the snapshot cannot
	// be read, or disagrees with the EtcdSnapshot that names it.
	RestoreMetadataInvalidReason = "RestoreMetadataInvalid"
	// RestoreVersionTooNewReason: the snapshot was taken with a newer etcd
	// minor than the cluster's version; etcd cannot be downgraded that way.
	RestoreVersionTooNewReason = "RestoreVersionTooNew"
	// RestoreSnapshotUnsupportedReason: the metadata beside the snapshot
	// names a compression scheme (or a metadata format) this operator
	// cannot read; an operator that can must restore it.
	RestoreSnapshotUnsupportedReason = "RestoreSnapshotUnsupported"
	// RestoreEncryptionKeyMissingReason: the snapshot is encrypted and
	// spec.bootstrap.restore.encryption names no key, or its Secret (or
	// the key in it) does not exist.
	RestoreEncryptionKeyMissingReason = "RestoreEncryptionKeyMissing"
	// RestoreEncryptionKeyInvalidReason: the named key is not an age
	// identity (AGE-SECRET-KEY-1…); a recipient (age1…) cannot decrypt.
	RestoreEncryptionKeyInvalidReason = "RestoreEncryptionKeyInvalid"
	// RestoreEncryptionKeyWrongReason: the named key is not the one the
	// snapshot was encrypted to: its fingerprint is not the one the
	// metadata records, or the object's header does not open with it.
	RestoreEncryptionKeyWrongReason = "RestoreEncryptionKeyWrong"
	// RestoreChecksumMismatchReason: the downloaded snapshot's SHA-256 is not
	// the recorded one, or etcdutl's check of etcd's own hash failed.
	RestoreChecksumMismatchReason = "RestoreChecksumMismatch"
	// RestoreFailedReason: the restore failed for another reason (storage
	// or etcdutl errors); the message has it.
	RestoreFailedReason = "RestoreFailed"
)
