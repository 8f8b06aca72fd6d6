package backup

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// Code is the outcome of a snapshot, prune, check or restore step, as the
// Pod that ran it reports it in its termination message.
type Code string

// Codes. Controllers switch on them; a message is only ever shown.
const (
	CodeOK                 Code = "OK"
	CodeCredentialsInvalid Code = "CredentialsInvalid"
	CodeBucketNotFound     Code = "BucketNotFound"
	CodeObjectNotFound     Code = "ObjectNotFound"
	CodeObjectExists       Code = "ObjectExists"
	CodeChecksumMismatch   Code = "ChecksumMismatch"
	CodeMetadataInvalid    Code = "MetadataInvalid"
	CodeNoHealthyMember    Code = "NoHealthyMember"
	CodeEtcdError          Code = "EtcdError"
	CodeStorageError       Code = "StorageError"
	CodeRestoreFailed      Code = "RestoreFailed"
	CodeInvalidArguments   Code = "InvalidArguments"
	// CodeUnsupported: the metadata names a scheme or format this release
	// cannot read (UnsupportedError).
	CodeUnsupported Code = "Unsupported"
	// CodeEncryptionKeyMissing: no key was named, or its Secret or key
	// does not exist (ErrEncryptionKeyMissing).
	CodeEncryptionKeyMissing Code = "EncryptionKeyMissing"
	// CodeEncryptionKeyInvalid: the key does not parse, or is a recipient
	// where decrypting needs the identity (crypt.ErrInvalidKey).
	CodeEncryptionKeyInvalid Code = "EncryptionKeyInvalid"
	// CodeEncryptionKeyWrong: the key is not the snapshot's
	// (WrongKeyError, crypt.ErrWrongKey).
	CodeEncryptionKeyWrong Code = "EncryptionKeyWrong"
)

// Metadata is the small JSON object stored beside each snapshot. It is
// written only after the snapshot itself is committed, so a snapshot
// without it is not a good snapshot: it is the marker restores look for.
type Metadata struct {
	// Format is MetadataFormatPlain, MetadataFormatCompressed or
	// MetadataFormatEncrypted.
	Format int `json:"format"`
	// Namespace, Cluster and Snapshot name the EtcdCluster and EtcdSnapshot.
	Namespace string `json:"namespace"`
	Cluster   string `json:"cluster"`
	Snapshot  string `json:"snapshot"`
	// Key is the snapshot's key relative to the destination's prefix.
	Key string `json:"key"`
	// Revision the member had applied when the snapshot began.
	Revision int64 `json:"revision"`
	// EtcdVersion is the member's server version; StorageVersion is what
	// the snapshot stream reported (etcd 3.6 and later).
	EtcdVersion    string `json:"etcdVersion"`
	StorageVersion string `json:"storageVersion,omitempty"`
	// ClusterID and MemberID in hex.
	ClusterID string `json:"clusterID"`
	MemberID  string `json:"memberID"`
	// Endpoint the snapshot was streamed from.
	Endpoint    string    `json:"endpoint"`
	StartedAt   time.Time `json:"startedAt"`
	CompletedAt time.Time `json:"completedAt"`
	// Compression is how the stored object encodes etcd's snapshot
	// stream (v1alpha1.CompressionZstd); absent, in format 1, it is the
	// stream as etcd sent it. Read it with CompressionOf.
	Compression v1alpha1.SnapshotCompression `json:"compression,omitempty"`
	// Encryption is how the stored object is encrypted (Age, format 3
	// only), after compression; KeyFingerprint names the key it was
	// encrypted to (crypt.Fingerprint: a hash of the public half), never
	// the key. Read them with EncryptionOf.
	Encryption     v1alpha1.SnapshotEncryptionScheme `json:"encryption,omitempty"`
	KeyFingerprint string                            `json:"keyFingerprint,omitempty"`
	// SizeBytes is the stored object: compressed and encrypted if it is, etcd's 32-byte
	// SHA-256 inside it. DBSizeBytes is the database alone, uncompressed,
	// without that digest.
	SizeBytes   int64 `json:"sizeBytes"`
	DBSizeBytes int64 `json:"dbSizeBytes"`
	// SHA256 is the hex SHA-256 of the stored object, exactly the bytes in
	// storage (compressed and encrypted if it is): a restore checks it as
	// it downloads, and before it trusts anything it decrypted or decoded. EtcdSHA256 is the digest etcd appended to
	// its stream, of the uncompressed database; a restore checks it again
	// on the decoded stream, so both ends of the decoding are hash-checked.
	SHA256     string `json:"sha256"`
	EtcdSHA256 string `json:"etcdSHA256"`
}

// Validate checks what a restore relies on.
func (m *Metadata) Validate() error {
	if m.Format != MetadataFormatPlain && m.Format != MetadataFormatCompressed && m.Format != MetadataFormatEncrypted {
		return &UnsupportedError{What: fmt.Sprintf("metadata format %d", m.Format),
			Known: fmt.Sprintf("formats %d to %d", MetadataFormatPlain, MetadataFormatEncrypted)}
	}
	if _, err := m.CompressionOf(); err != nil {
		return err
	}
	if _, _, err := m.EncryptionOf(); err != nil {
		return err
	}
	switch {
	case len(m.SHA256) != 64:
		return fmt.Errorf("%w: sha256 %q is not a hex SHA-256", ErrMetadataInvalid, m.SHA256)
	case m.SizeBytes <= 0:
		return fmt.Errorf("%w: size %d", ErrMetadataInvalid, m.SizeBytes)
	case m.EtcdVersion == "":
		return fmt.Errorf("%w: no etcd version", ErrMetadataInvalid)
	}
	return nil
}

// ParseMetadata reads and validates a metadata object.
func ParseMetadata(data []byte) (*Metadata, error) {
	var m Metadata
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMetadataInvalid, err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Result is what a Pod of the backup machinery reports as its termination
// message: a typed outcome the controller parses, never a log line.
type Result struct {
	Code    Code   `json:"code"`
	Message string `json:"message,omitempty"`
	// Metadata is what a snapshot wrote or a check found.
	Metadata *Metadata `json:"metadata,omitempty"`
	// Skipped: a restore step found the gate closed and did nothing.
	Skipped bool `json:"skipped,omitempty"`
}

// maxMessage keeps a Result well inside the kubelet's 4096-byte
// termination message limit, metadata included.
const maxMessage = 1500

// ResultOf makes the Result of an error (nil is CodeOK).
func ResultOf(err error) Result {
	if err == nil {
		return Result{Code: CodeOK}
	}
	return Result{Code: CodeOf(err), Message: truncate(err.Error(), maxMessage)}
}

// Encode renders the Result for the termination message.
func (r Result) Encode() []byte {
	r.Message = truncate(r.Message, maxMessage)
	data, err := json.Marshal(r)
	if err != nil {
		// Only unencodable floats or channels fail; a Result has neither.
		return []byte(`{"code":"StorageError","message":"failed to encode the result"}`)
	}
	return data
}

// ErrNoResult: the termination message holds no Result (the Pod was killed,
// or never ran the agent).
var ErrNoResult = errors.New("no result in the termination message")

// ParseResult reads a termination message.
func ParseResult(message string) (Result, error) {
	if message == "" {
		return Result{}, ErrNoResult
	}
	var r Result
	if err := json.Unmarshal([]byte(message), &r); err != nil || r.Code == "" {
		return Result{}, fmt.Errorf("%w: %q", ErrNoResult, truncate(message, 200))
	}
	return r, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// SnapshotReason is the EtcdSnapshot Succeeded=False reason of a code.
func SnapshotReason(c Code) string {
	switch c {
	case CodeCredentialsInvalid:
		return v1alpha1.CredentialsInvalidReason
	case CodeBucketNotFound:
		return v1alpha1.BucketNotFoundReason
	case CodeObjectExists:
		return v1alpha1.ObjectExistsReason
	case CodeChecksumMismatch:
		return v1alpha1.ChecksumMismatchReason
	case CodeNoHealthyMember:
		return v1alpha1.NoHealthyMemberReason
	case CodeEtcdError:
		return v1alpha1.EtcdErrorReason
	case CodeEncryptionKeyMissing:
		return v1alpha1.EncryptionKeyMissingReason
	case CodeEncryptionKeyInvalid:
		return v1alpha1.EncryptionKeyInvalidReason
	}
	return v1alpha1.StorageErrorReason
}

// RestoreReason is the EtcdCluster reason of a failed restore step's code.
func RestoreReason(c Code) string {
	switch c {
	case CodeCredentialsInvalid:
		return v1alpha1.RestoreCredentialsInvalidReason
	case CodeBucketNotFound:
		return v1alpha1.RestoreBucketNotFoundReason
	case CodeObjectNotFound:
		return v1alpha1.RestoreObjectNotFoundReason
	case CodeChecksumMismatch:
		return v1alpha1.RestoreChecksumMismatchReason
	case CodeMetadataInvalid:
		return v1alpha1.RestoreMetadataInvalidReason
	case CodeUnsupported:
		return v1alpha1.RestoreSnapshotUnsupportedReason
	case CodeEncryptionKeyMissing:
		return v1alpha1.RestoreEncryptionKeyMissingReason
	case CodeEncryptionKeyInvalid:
		return v1alpha1.RestoreEncryptionKeyInvalidReason
	case CodeEncryptionKeyWrong:
		return v1alpha1.RestoreEncryptionKeyWrongReason
	}
	return v1alpha1.RestoreFailedReason
}
