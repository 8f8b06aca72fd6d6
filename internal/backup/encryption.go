package backup

import (
	"errors"
	"fmt"
	"strings"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// MetadataFormatEncrypted records an encrypted snapshot, compressed or
// not. Releases from before encryption check the format number and refuse
// it (MetadataInvalid, or RestoreSnapshotUnsupported from a release that
// knows formats 1 and 2), instead of handing age's bytes to a decoder or
// to etcdutl. Formats 1 and 2 never name an encryption.
const MetadataFormatEncrypted = 3

// MetadataFormatOf is the format a snapshot with compression c and
// encryption e is recorded in: the lowest that can carry both, so that a
// snapshot without encryption stays readable by the releases that read it
// before.
func MetadataFormatOf(c v1alpha1.SnapshotCompression, e v1alpha1.SnapshotEncryptionScheme) int {
	if e != "" {
		return MetadataFormatEncrypted
	}
	return MetadataFormatFor(c)
}

// ErrEncryptionKeyMissing: the key a snapshot is to be encrypted to, or
// decrypted with, is not there: no key was named, or the Secret (or the
// key in it) does not exist, so the kubelet mounted nothing.
var ErrEncryptionKeyMissing = errors.New("the encryption key is missing")

// fingerprintPrefix is what crypt.Fingerprint starts with.
const fingerprintPrefix = "sha256:"

// EncryptionOf is the encryption the metadata records and the fingerprint
// of its key, checked: none ("") for formats 1 and 2, which cannot carry
// one; for format 3 a scheme this release knows (else UnsupportedError)
// and a fingerprint (else MetadataInvalid). It is read only here, never
// guessed from the object's bytes.
func (m *Metadata) EncryptionOf() (v1alpha1.SnapshotEncryptionScheme, string, error) {
	e, fp := m.Encryption, m.KeyFingerprint
	switch {
	case m.Format != MetadataFormatEncrypted && (e != "" || fp != ""):
		return "", "", fmt.Errorf("%w: format %d cannot record an encryption", ErrMetadataInvalid, m.Format)
	case m.Format != MetadataFormatEncrypted:
		return "", "", nil
	case e == "":
		return "", "", fmt.Errorf("%w: format %d must name its encryption", ErrMetadataInvalid, m.Format)
	case e != v1alpha1.EncryptionAge:
		return "", "", &UnsupportedError{What: fmt.Sprintf("encryption %q", e), Known: string(v1alpha1.EncryptionAge)}
	case !strings.HasPrefix(fp, fingerprintPrefix) || len(fp) != len(fingerprintPrefix)+32:
		return "", "", fmt.Errorf("%w: key fingerprint %q is not sha256: and 32 hex digits", ErrMetadataInvalid, fp)
	}
	return e, fp, nil
}

// WrongKeyError: the key named for a restore is not the one the snapshot
// was encrypted to. It wraps crypt.ErrWrongKey's meaning without the
// import, so that a check that compares fingerprints, before any byte of
// the object is read, is classified as the decryption's own refusal.
type WrongKeyError struct {
	// Recorded is the fingerprint the metadata records; Given that of the
	// key named.
	Recorded, Given string
}

func (e *WrongKeyError) Error() string {
	return fmt.Sprintf("the snapshot was encrypted to the key %s, and the key named is %s", e.Recorded, e.Given)
}

// CheckKey is the restore's check of a key before anything reads the
// snapshot: recorded is EncryptionOf's fingerprint ("" when the snapshot
// is not encrypted), given the named key's (or "" when none is named).
func CheckKey(recorded, given string) error {
	switch {
	case recorded == "":
		return nil
	case given == "":
		return fmt.Errorf("%w: the snapshot is encrypted to the key %s; name its age identity in spec.bootstrap.restore.encryption",
			ErrEncryptionKeyMissing, recorded)
	case recorded != given:
		return &WrongKeyError{Recorded: recorded, Given: given}
	}
	return nil
}
