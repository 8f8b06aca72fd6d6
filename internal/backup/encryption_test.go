package backup

import (
	"errors"
	"fmt"
	"testing"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup/crypt"
)

const fp = "sha256:0123456789abcdef0123456789abcdef"

func TestEncryptionOf(t *testing.T) {
	for _, tc := range []struct {
		format      int
		encryption  v1alpha1.SnapshotEncryptionScheme
		fingerprint string
		want        v1alpha1.SnapshotEncryptionScheme
		invalid     bool
		unsupported bool
	}{
		{format: MetadataFormatPlain},
		{format: MetadataFormatCompressed},
		{format: MetadataFormatEncrypted, encryption: v1alpha1.EncryptionAge, fingerprint: fp, want: v1alpha1.EncryptionAge},
		{format: MetadataFormatPlain, encryption: v1alpha1.EncryptionAge, fingerprint: fp, invalid: true},
		{format: MetadataFormatCompressed, fingerprint: fp, invalid: true},
		{format: MetadataFormatEncrypted, fingerprint: fp, invalid: true},
		{format: MetadataFormatEncrypted, encryption: v1alpha1.EncryptionAge, invalid: true},
		{format: MetadataFormatEncrypted, encryption: v1alpha1.EncryptionAge, fingerprint: "sha256:short", invalid: true},
		{format: MetadataFormatEncrypted, encryption: "Pgp", fingerprint: fp, unsupported: true},
	} {
		m := &Metadata{Format: tc.format, Encryption: tc.encryption, KeyFingerprint: tc.fingerprint}
		got, gotFP, err := m.EncryptionOf()
		var unsupported *UnsupportedError
		switch {
		case tc.invalid && !errors.Is(err, ErrMetadataInvalid),
			tc.unsupported && !errors.As(err, &unsupported),
			!tc.invalid && !tc.unsupported && (err != nil || got != tc.want || gotFP != tc.fingerprint):
			t.Errorf("format %d, %q %q: got %q %q, %v", tc.format, tc.encryption, tc.fingerprint, got, gotFP, err)
		}
	}
}

func TestMetadataFormatOf(t *testing.T) {
	for _, tc := range []struct {
		c    v1alpha1.SnapshotCompression
		e    v1alpha1.SnapshotEncryptionScheme
		want int
	}{
		{v1alpha1.CompressionNone, "", MetadataFormatPlain},
		{v1alpha1.CompressionZstd, "", MetadataFormatCompressed},
		{v1alpha1.CompressionNone, v1alpha1.EncryptionAge, MetadataFormatEncrypted},
		{v1alpha1.CompressionZstd, v1alpha1.EncryptionAge, MetadataFormatEncrypted},
	} {
		if got := MetadataFormatOf(tc.c, tc.e); got != tc.want {
			t.Errorf("MetadataFormatOf(%q, %q) = %d, want %d", tc.c, tc.e, got, tc.want)
		}
	}
}

func TestCheckKey(t *testing.T) {
	var wrong *WrongKeyError
	switch {
	case CheckKey("", "") != nil || CheckKey("", fp) != nil:
		t.Error("a snapshot that is not encrypted needs no key, and ignores one")
	case !errors.Is(CheckKey(fp, ""), ErrEncryptionKeyMissing):
		t.Error("an encrypted snapshot without a key named: want ErrEncryptionKeyMissing")
	case !errors.As(CheckKey(fp, "sha256:ffffffffffffffffffffffffffffffff"), &wrong) || wrong.Recorded != fp:
		t.Error("another key: want a WrongKeyError naming the recorded fingerprint")
	case CheckKey(fp, fp) != nil:
		t.Error("the recorded key was refused")
	}
}

// Every way a key can be refused has its own code, and the code its own
// restore and snapshot reason, whatever wraps the error.
func TestKeyErrorsAreClassifiedByType(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("seed x: %w", err) }
	for _, tc := range []struct {
		err             error
		code            Code
		restore, snapsh string
	}{
		{wrap(CheckKey(fp, "")), CodeEncryptionKeyMissing, v1alpha1.RestoreEncryptionKeyMissingReason, v1alpha1.EncryptionKeyMissingReason},
		{wrap(&WrongKeyError{Recorded: fp, Given: "sha256:x"}), CodeEncryptionKeyWrong, v1alpha1.RestoreEncryptionKeyWrongReason, v1alpha1.StorageErrorReason},
		{wrap(crypt.ErrWrongKey), CodeEncryptionKeyWrong, v1alpha1.RestoreEncryptionKeyWrongReason, v1alpha1.StorageErrorReason},
		{wrap(crypt.ErrInvalidKey), CodeEncryptionKeyInvalid, v1alpha1.RestoreEncryptionKeyInvalidReason, v1alpha1.EncryptionKeyInvalidReason},
		{wrap(crypt.ErrDamaged), CodeChecksumMismatch, v1alpha1.RestoreChecksumMismatchReason, v1alpha1.ChecksumMismatchReason},
	} {
		code := CodeOf(tc.err)
		if code != tc.code || RestoreReason(code) != tc.restore || SnapshotReason(code) != tc.snapsh {
			t.Errorf("%v: code %s, reasons %s and %s; want %s, %s and %s", tc.err, code, RestoreReason(code), SnapshotReason(code),
				tc.code, tc.restore, tc.snapsh)
		}
	}
}
