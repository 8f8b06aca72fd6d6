package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultBumpRevision is RestoreSpec.BumpRevision when unset: a billion
// revisions, which etcd's recovery guide gives as about a week of writes at
// well over a thousand a second.
const DefaultBumpRevision int64 = 1000000000

// BootstrapSpec says how the cluster's first member starts. It is used only
// when the cluster is created, so it cannot be added, removed or changed
// afterwards.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.bootstrap cannot be changed after creation"
type BootstrapSpec struct {
	// Restore starts the cluster from a snapshot instead of empty.
	// +optional
	Restore *RestoreSpec `json:"restore,omitempty"`
}

// RestoreSpec is the snapshot a new cluster starts from, and how.
//
// +kubebuilder:validation:XValidation:rule="(has(self.snapshotName) ? 1 : 0) + (has(self.source) ? 1 : 0) + (has(self.fromSchedule) ? 1 : 0) == 1",message="restore must set exactly one of snapshotName, source or fromSchedule"
type RestoreSpec struct {
	// SnapshotName is a succeeded EtcdSnapshot in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +optional
	SnapshotName string `json:"snapshotName,omitempty"`

	// Source is a snapshot in storage, written by the operator (its
	// metadata object must be beside it).
	// +optional
	Source *RestoreSource `json:"source,omitempty"`

	// FromSchedule picks the newest successful snapshot of a schedule
	// that completed before a given time.
	// +optional
	FromSchedule *RestoreFromSchedule `json:"fromSchedule,omitempty"`

	// BumpRevision is added to the snapshot's revision, so that revisions
	// never go backwards for clients that saw the old cluster, as
	// Kubernetes' watch caches do. 0 leaves revisions as they were.
	// +kubebuilder:default=1000000000
	// +kubebuilder:validation:Minimum=0
	// +optional
	BumpRevision *int64 `json:"bumpRevision,omitempty"`

	// MarkCompacted marks every revision up to the bumped one as compacted,
	// so that every watch from before the restore ends with a compacted
	// error and its client relists instead of silently missing changes.
	// +kubebuilder:default=true
	// +optional
	MarkCompacted *bool `json:"markCompacted,omitempty"`

	// Encryption names the age identity (AGE-SECRET-KEY-1…) that decrypts
	// an encrypted snapshot; a recipient (age1…) cannot. It is checked
	// against the key fingerprint the snapshot's metadata records before
	// the seed is created: a missing, invalid or wrong key refuses the
	// restore (RestoreEncryptionKeyMissing, RestoreEncryptionKeyInvalid,
	// RestoreEncryptionKeyWrong). It is ignored for a snapshot that is not
	// encrypted.
	// +optional
	Encryption *SnapshotEncryption `json:"encryption,omitempty"`
}

// RestoreSource is a snapshot in storage: a destination as snapshots are
// written to, and the snapshot's key under it.
//
// +kubebuilder:validation:XValidation:rule="(has(self.s3) ? 1 : 0) + (has(self.persistentVolumeClaim) ? 1 : 0) == 1",message="source must set exactly one of s3 or persistentVolumeClaim"
// +kubebuilder:validation:XValidation:rule="!has(self.s3) || !has(self.s3.endpoint) || self.s3.endpoint.startsWith('https://') || (has(self.s3.insecure) && self.s3.insecure)",message="s3.endpoint must be https:// unless s3.insecure is true: over http the snapshot, every key of the cluster, crosses the network in clear and could be replaced on the way"
type RestoreSource struct {
	// S3 is the bucket; the object is prefix + key.
	// +optional
	S3 *S3Destination `json:"s3,omitempty"`

	// PersistentVolumeClaim is the volume; the file is path/key.
	// +optional
	PersistentVolumeClaim *PVCDestination `json:"persistentVolumeClaim,omitempty"`

	// Key of the snapshot under the prefix or path, as an EtcdSnapshot's
	// status.key gives it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(p, p == '..')",message="source.key must be relative and must not contain '..'"
	Key string `json:"key"`
}

// Destination is the source's storage as a SnapshotDestination.
func (s RestoreSource) Destination() SnapshotDestination {
	return SnapshotDestination{S3: s.S3, PersistentVolumeClaim: s.PersistentVolumeClaim}
}

// BumpRevisionOrDefault is BumpRevision with its default applied.
func (r *RestoreSpec) BumpRevisionOrDefault() int64 {
	if r.BumpRevision == nil {
		return DefaultBumpRevision
	}
	return *r.BumpRevision
}

// MarkCompactedOrDefault is MarkCompacted with its default applied.
func (r *RestoreSpec) MarkCompactedOrDefault() bool {
	return r.MarkCompacted == nil || *r.MarkCompacted
}

// RestoredFrom records the snapshot a cluster was created from.
type RestoredFrom struct {
	// SnapshotName is the EtcdSnapshot restored, when one was named.
	// +optional
	SnapshotName string `json:"snapshotName,omitempty"`
	// Location is the snapshot's place in storage.
	Location string `json:"location"`
	// Key is the snapshot's key under the destination's prefix or path.
	Key string `json:"key"`
	// Revision is the snapshot's revision, from its metadata.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// SHA256 is the hex SHA-256 the downloaded snapshot was checked against.
	SHA256 string `json:"sha256"`
	// SizeBytes is the stored object's size.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// Compression of the stored object, from its metadata.
	// +optional
	Compression SnapshotCompression `json:"compression,omitempty"`
	// Encryption of the stored object, from its metadata (Age), or empty.
	// +optional
	Encryption SnapshotEncryptionScheme `json:"encryption,omitempty"`
	// KeyFingerprint is the fingerprint of the key it was encrypted to and
	// decrypted with, from its metadata; never the key.
	// +optional
	KeyFingerprint string `json:"keyFingerprint,omitempty"`
	// EtcdVersion is the version the snapshot was taken with.
	// +optional
	EtcdVersion string `json:"etcdVersion,omitempty"`
	// SourceClusterID is the cluster ID (hex) the snapshot was taken from;
	// the restored cluster has a new one.
	// +optional
	SourceClusterID string `json:"sourceClusterID,omitempty"`
	// BumpRevision and MarkCompacted are what the restore applied.
	BumpRevision  int64 `json:"bumpRevision"`
	MarkCompacted bool  `json:"markCompacted"`
	// RestoredAt is when the seed, restored, formed the cluster.
	// +optional
	RestoredAt *metav1.Time `json:"restoredAt,omitempty"`
}

// MemberRestore is what the seed of a restored cluster restores: copied
// into the seed's EtcdMember when it is created, so that its Pod is built
// from the member alone and can never start without it.
type MemberRestore struct {
	// Source is the storage the snapshot is read from.
	Source SnapshotDestination `json:"source"`
	// Key of the snapshot under the source's prefix or path.
	Key string `json:"key"`
	// SHA256 the downloaded snapshot must have.
	SHA256 string `json:"sha256"`
	// SizeBytes the downloaded snapshot must have.
	SizeBytes int64 `json:"sizeBytes"`
	// Compression of the stored object, from its metadata; SHA256 and
	// SizeBytes are of the stored (compressed) bytes. Empty means None,
	// as for members created before snapshots were compressed.
	// +optional
	Compression SnapshotCompression `json:"compression,omitempty"`
	// Encryption of the stored object, from its metadata; empty when the
	// snapshot is not encrypted.
	// +optional
	Encryption SnapshotEncryptionScheme `json:"encryption,omitempty"`
	// EncryptionKey is the Secret key that decrypts it, from
	// spec.bootstrap.restore.encryption, mounted as a file into the
	// download's container.
	// +optional
	EncryptionKey *SnapshotEncryption `json:"encryptionKey,omitempty"`
	// KeyFingerprint is the key the metadata records; the download checks
	// EncryptionKey against it before it reads the object.
	// +optional
	KeyFingerprint string `json:"keyFingerprint,omitempty"`
	// BumpRevision is etcdutl's --bump-revision.
	BumpRevision int64 `json:"bumpRevision"`
	// MarkCompacted is etcdutl's --mark-compacted.
	MarkCompacted bool `json:"markCompacted"`
}
