package backup

import (
	"errors"

	"github.com/quorumctl/etcd-operator/internal/backup/crypt"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// Errors the stores and the agent wrap, so that an outcome is classified by
// errors.Is and never by its message.
var (
	// ErrCredentials: the storage refused the credentials, or there are none.
	ErrCredentials = errors.New("the storage refused the credentials")
	// ErrBucketNotFound: the bucket does not exist.
	ErrBucketNotFound = errors.New("the bucket does not exist")
	// ErrNotFound: no object at the key.
	ErrNotFound = errors.New("no object at the key")
	// ErrExists: an object is already at the key.
	ErrExists = errors.New("an object already exists at the key")
	// ErrChecksumMismatch: a SHA-256 did not match the bytes, or etcd's was
	// missing from the stream.
	ErrChecksumMismatch = errors.New("checksum mismatch")
	// ErrMetadataInvalid: the metadata beside a snapshot cannot be used.
	ErrMetadataInvalid = errors.New("invalid snapshot metadata")
	// ErrNoHealthyMember: no member could be snapshotted.
	ErrNoHealthyMember = errors.New("no healthy member")
	// ErrInvalidArguments: the command line cannot be acted on.
	ErrInvalidArguments = errors.New("invalid arguments")
	// ErrRestore: etcdutl's restore failed.
	ErrRestore = errors.New("restore failed")
)

// CodeOf classifies an error. Errors of etcd calls (internal/etcd's
// CallError) are EtcdError; anything unclassified is StorageError, as the
// storage is what the remaining steps touch.
func CodeOf(err error) Code {
	var call *etcd.CallError
	var unsupported *UnsupportedError
	var wrongKey *WrongKeyError
	switch {
	case err == nil:
		return CodeOK
	case errors.As(err, &unsupported):
		return CodeUnsupported
	case errors.As(err, &wrongKey), errors.Is(err, crypt.ErrWrongKey):
		return CodeEncryptionKeyWrong
	case errors.Is(err, crypt.ErrInvalidKey):
		return CodeEncryptionKeyInvalid
	case errors.Is(err, ErrEncryptionKeyMissing):
		return CodeEncryptionKeyMissing
	case errors.Is(err, crypt.ErrDamaged):
		// A chunk that fails its authentication is bytes that changed in
		// storage, as a SHA-256 that does not match is.
		return CodeChecksumMismatch
	case errors.Is(err, ErrCredentials):
		return CodeCredentialsInvalid
	case errors.Is(err, ErrBucketNotFound):
		return CodeBucketNotFound
	case errors.Is(err, ErrNotFound):
		return CodeObjectNotFound
	case errors.Is(err, ErrExists):
		return CodeObjectExists
	case errors.Is(err, ErrChecksumMismatch):
		return CodeChecksumMismatch
	case errors.Is(err, ErrMetadataInvalid):
		return CodeMetadataInvalid
	case errors.Is(err, ErrNoHealthyMember):
		return CodeNoHealthyMember
	case errors.Is(err, ErrInvalidArguments):
		return CodeInvalidArguments
	case errors.Is(err, ErrRestore):
		return CodeRestoreFailed
	case errors.As(err, &call):
		return CodeEtcdError
	}
	return CodeStorageError
}
