package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SnapshotDestination is where snapshots are stored: exactly one of s3 or
// persistentVolumeClaim.
//
// +kubebuilder:validation:XValidation:rule="(has(self.s3) ? 1 : 0) + (has(self.persistentVolumeClaim) ? 1 : 0) == 1",message="destination must set exactly one of s3 or persistentVolumeClaim"
type SnapshotDestination struct {
	// S3 is a bucket of Amazon S3 or of an S3-compatible server.
	// +optional
	S3 *S3Destination `json:"s3,omitempty"`

	// PersistentVolumeClaim is a directory on a volume in the snapshot's
	// namespace.
	// +optional
	PersistentVolumeClaim *PVCDestination `json:"persistentVolumeClaim,omitempty"`

	// Compression of the snapshots written here: Zstd (zstd at its default
	// level, streamed) or None. Empty means Zstd. It only says how new
	// snapshots are written: a restore reads the scheme from the metadata
	// object beside each snapshot, so snapshots taken before compression
	// existed, or with None, restore as they are. The object keeps its
	// key (name.db) either way.
	// +optional
	Compression SnapshotCompression `json:"compression,omitempty"`

	// Encryption, if set, encrypts the snapshots written here with age
	// (X25519) to the key in a Secret of the snapshot's namespace. The
	// agent encrypts as it streams: nothing unencrypted is written
	// anywhere. The Secret's key may hold the age identity
	// (AGE-SECRET-KEY-1…) or only its recipient (age1…, the public half):
	// writing needs no more, so the cluster that takes snapshots need not
	// be able to read them. A restore needs the identity, named in
	// spec.bootstrap.restore.encryption. Like compression it only says how
	// new snapshots are written; the metadata beside each snapshot records
	// the scheme and the key's fingerprint, never the key.
	// +optional
	Encryption *SnapshotEncryption `json:"encryption,omitempty"`
}

// SnapshotEncryption names the age key that snapshots are encrypted to
// (or, in a restore, decrypted with).
type SnapshotEncryption struct {
	// SecretRef is a key of a Secret in the same namespace. The Secret is
	// mounted as a file into the Pods that write or read snapshots; the
	// operator itself never reads it.
	SecretRef SecretKeyReference `json:"secretRef"`
}

// SecretKeyReference names one key of a Secret in the same namespace.
type SecretKeyReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="encryption.secretRef.name must be the name of a Secret: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
	Name string `json:"name"`
	// Key in the Secret that holds the age key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="encryption.secretRef.key must be a Secret key: letters, digits, '-', '_' and '.'"
	Key string `json:"key"`
}

// SnapshotEncryptionScheme is how a stored snapshot is encrypted.
// +kubebuilder:validation:Enum=Age
type SnapshotEncryptionScheme string

// EncryptionAge is age (age-encryption.org/v1) to one X25519 recipient:
// a STREAM of 64 KiB authenticated chunks.
const EncryptionAge SnapshotEncryptionScheme = "Age"

// SnapshotCompression is how a snapshot is encoded in storage.
// +kubebuilder:validation:Enum=None;Zstd
type SnapshotCompression string

const (
	// CompressionNone stores etcd's snapshot stream as it is.
	CompressionNone SnapshotCompression = "None"
	// CompressionZstd stores it as one zstd frame (RFC 8878).
	CompressionZstd SnapshotCompression = "Zstd"
)

// CompressionOrDefault is the compression new snapshots get: Zstd unless
// None is asked for. The default lives here rather than in a CRD default:
// the API server applies CRD defaults to stored objects as it reads them,
// so EtcdSnapshots taken before the field existed, uncompressed, would
// read as Zstd.
func (d SnapshotDestination) CompressionOrDefault() SnapshotCompression {
	if d.Compression == "" {
		return CompressionZstd
	}
	return d.Compression
}

// S3Destination is a bucket and a key prefix.
type S3Destination struct {
	// Endpoint is the server's URL, such as https://s3.eu-west-1.amazonaws.com
	// or http://s3.localcluster-s3.svc:7070 (with insecure: true). Empty
	// means AWS's endpoint for the region. It names a host and carries no
	// credentials: whoever may read the object would see them.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.startsWith('http://') || self.startsWith('https://')",message="s3.endpoint must be an http:// or https:// URL"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-z]+://[^/?#]*@')",message="s3.endpoint must not carry credentials (user:password@): anyone who may read this object would see them; name a Secret in credentialsSecretName instead"
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getHostname() != ''",message="s3.endpoint must be a URL that names a host, such as https://s3.eu-west-1.amazonaws.com"
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// Insecure allows an http:// endpoint, where the snapshot (every key of
	// the cluster) and the signed requests cross the network in clear. It is
	// only that permission: it never turns off the verification of an
	// https:// endpoint's certificate (use caBundle for a private CA).
	// +optional
	Insecure bool `json:"insecure,omitempty"`

	// Bucket must exist; the operator never creates it.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	Bucket string `json:"bucket"`

	// Prefix is put before every key the operator writes, such as etcd/.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(p, p == '..')",message="s3.prefix must be relative and must not contain '..'"
	// +optional
	Prefix string `json:"prefix,omitempty"`

	// Region of the bucket; empty means us-east-1, which S3-compatible
	// servers accept whatever their own region.
	// +optional
	Region string `json:"region,omitempty"`

	// ForcePathStyle addresses the bucket as endpoint/bucket instead of
	// bucket.endpoint, as most S3-compatible servers need.
	// +optional
	ForcePathStyle bool `json:"forcePathStyle,omitempty"`

	// CredentialsSecretName is a Secret in the same namespace with the keys
	// accessKeyID and secretAccessKey. Empty would use ambient credentials
	// (the AWS SDK's default chain: web identity, the node's instance role),
	// which the operator refuses (AmbientCredentialsRefused) unless started
	// with --allow-ambient-s3-credentials, and then only for the buckets of
	// its --ambient-s3-buckets, if any.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="s3.credentialsSecretName must be the name of a Secret: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
	// +optional
	CredentialsSecretName string `json:"credentialsSecretName,omitempty"`

	// CABundle is a ConfigMap with the PEM certificates that sign the
	// endpoint's certificate, for a private certificate authority.
	// +optional
	CABundle *CABundleReference `json:"caBundle,omitempty"`
}

// Keys of the Secret named by S3Destination.CredentialsSecretName.
const (
	S3AccessKeyIDKey     = "accessKeyID"
	S3SecretAccessKeyKey = "secretAccessKey"
)

// CABundleReference names a ConfigMap key holding PEM certificates.
type CABundleReference struct {
	// ConfigMapName is a ConfigMap in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="s3.caBundle.configMapName must be the name of a ConfigMap: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
	ConfigMapName string `json:"configMapName"`
	// Key in the ConfigMap.
	// +kubebuilder:default="ca.crt"
	// +optional
	Key string `json:"key,omitempty"`
}

// PVCDestination is a directory on a PersistentVolumeClaim.
type PVCDestination struct {
	// ClaimName is a PersistentVolumeClaim in the same namespace. The claim
	// is mounted by the Pods that write and read snapshots, so a
	// ReadWriteOnce claim binds them to its node.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="persistentVolumeClaim.claimName must be the name of a PersistentVolumeClaim: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
	ClaimName string `json:"claimName"`

	// Path is the directory inside the volume; empty means its root.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(p, p == '..')",message="persistentVolumeClaim.path must be relative and must not contain '..'"
	// +optional
	Path string `json:"path,omitempty"`
}

// EtcdSnapshotSpec is one snapshot to take. It cannot change once created:
// what was asked for is a record of what was taken.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the spec of an EtcdSnapshot cannot be changed; create a new EtcdSnapshot"
type EtcdSnapshotSpec struct {
	// ClusterName is the EtcdCluster in the same namespace to snapshot.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="clusterName must be the name of an EtcdCluster: lower-case letters, digits, '-' and '.'"
	ClusterName string `json:"clusterName"`

	// Destination is where the snapshot is written.
	// +kubebuilder:validation:XValidation:rule="!has(self.s3) || !has(self.s3.endpoint) || self.s3.endpoint.startsWith('https://') || (has(self.s3.insecure) && self.s3.insecure)",message="s3.endpoint must be https:// unless s3.insecure is true: over http the snapshot, every key of the cluster, crosses the network in clear"
	Destination SnapshotDestination `json:"destination"`
}

// SnapshotPhase is where a snapshot is in its life.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type SnapshotPhase string

const (
	// SnapshotPending: waiting for the cluster, or for another snapshot of
	// the same cluster to finish.
	SnapshotPending SnapshotPhase = "Pending"
	// SnapshotRunning: the snapshot Job is streaming the snapshot.
	SnapshotRunning SnapshotPhase = "Running"
	// SnapshotSucceeded: the snapshot and its metadata are stored and verified.
	SnapshotSucceeded SnapshotPhase = "Succeeded"
	// SnapshotFailed: nothing that could pass for a good snapshot was left.
	SnapshotFailed SnapshotPhase = "Failed"
)

// Terminal reports a phase that never changes again.
func (p SnapshotPhase) Terminal() bool { return p == SnapshotSucceeded || p == SnapshotFailed }

// EtcdSnapshotStatus is what was taken, once it has been.
type EtcdSnapshotStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase is Pending, Running, Succeeded or Failed.
	// +optional
	Phase SnapshotPhase `json:"phase,omitempty"`

	// Location is where the snapshot is, as s3://bucket/key or
	// pvc://claim/path.
	// +optional
	Location string `json:"location,omitempty"`

	// Key is the snapshot's object key relative to the destination's prefix
	// (or path): what a restore's source.key names.
	// +optional
	Key string `json:"key,omitempty"`

	// Revision is the store revision the member had applied when the
	// snapshot began: every write up to and including it is in the snapshot.
	// +optional
	Revision int64 `json:"revision,omitempty"`

	// SizeBytes is the size of the stored object: compressed if it is, and
	// etcd's checksum included.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`

	// SHA256 is the hex SHA-256 of the stored object, the bytes in storage
	// (compressed if it is); a restore checks it before it decompresses.
	// +optional
	SHA256 string `json:"sha256,omitempty"`

	// Compression is how the stored object is encoded, as its metadata
	// records it: Zstd or None. Empty on snapshots recorded before the
	// operator compressed, which are uncompressed.
	// +optional
	Compression SnapshotCompression `json:"compression,omitempty"`

	// Encryption is how the stored object is encrypted, as its metadata
	// records it (Age); empty when it is not.
	// +optional
	Encryption SnapshotEncryptionScheme `json:"encryption,omitempty"`

	// KeyFingerprint names the key a restore needs (sha256: and the first
	// 16 bytes of the SHA-256 of its age recipient); never the key.
	// +optional
	KeyFingerprint string `json:"keyFingerprint,omitempty"`

	// EtcdVersion is the version of the member the snapshot was taken from.
	// +optional
	EtcdVersion string `json:"etcdVersion,omitempty"`

	// ClusterID is the etcd cluster ID (hex) the snapshot was taken from.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`

	// Member is the etcd member (hex ID) the snapshot was streamed from.
	// +optional
	Member string `json:"member,omitempty"`

	// StartedAt is when the snapshot Job was created.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// CompletedAt is when the snapshot succeeded or failed.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`

	// Conditions: Succeeded, whose reasons are listed in
	// api/v1alpha1/etcdsnapshot_conditions.go.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EtcdSnapshot is one snapshot of an EtcdCluster, taken once.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdsnap,categories=etcd-all
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.sizeBytes`
// +kubebuilder:printcolumn:name="Compression",type=string,JSONPath=`.status.compression`,priority=1
// +kubebuilder:printcolumn:name="Encryption",type=string,JSONPath=`.status.encryption`,priority=1
// +kubebuilder:printcolumn:name="Location",type=string,JSONPath=`.status.location`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdSnapshot struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec EtcdSnapshotSpec `json:"spec"`
	// +optional
	Status EtcdSnapshotStatus `json:"status,omitempty"`
}

// EtcdSnapshotList is a list of EtcdSnapshots.
//
// +kubebuilder:object:root=true
type EtcdSnapshotList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdSnapshot `json:"items"`
}
