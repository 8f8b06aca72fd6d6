package backup

import (
	"fmt"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// StoredAsSent reports whether an object with this compression and
// encryption holds etcd's stream byte for byte (None, or no compression
// recorded, and not encrypted). Then the stored object's SHA-256 and the
// check of etcd's digest come from one hash over the same bytes
// (NewChecksumReader), on the way to the store and back; any other object
// is other bytes, hashed on their own (ObjectHash).
func StoredAsSent(c v1alpha1.SnapshotCompression, e v1alpha1.SnapshotEncryptionScheme) bool {
	return (c == "" || c == v1alpha1.CompressionNone) && e == ""
}

// Download is what one streaming pass over a stored object found, for
// CheckDownload: the object's size and SHA-256 as received, and how the
// decoding (age, the decoder, etcd's digest, the file) ended.
type Download struct {
	// Ended: the object was read to its end, so Size and SHA256 are of
	// all of it.
	Ended  bool
	Size   int64
	SHA256 string
	// Verified: etcd's digest matched the decoded stream.
	Verified bool
	// DecodeErr stopped the decoding (a damaged chunk, a bad frame, etcd's
	// digest, a failed write); ReadErr the store's stream itself, when
	// it was not read to its end.
	DecodeErr, ReadErr error
}

// CheckDownload decides whether a fetched snapshot may be used: only if
// the object received is the one recorded, byte for byte, and etcd's
// digest inside it matched. A damaged object is reported as the stored
// object's mismatch, whatever the decoder made of its bytes (a flipped byte
// in a zstd frame or an age chunk stops the decoding first), so the
// reason names the cause; the decoder's error rides along.
func CheckDownload(d Download, wantSize int64, wantSHA256 string) error {
	switch {
	case d.Ended && (d.Size != wantSize || d.SHA256 != wantSHA256):
		cause := ""
		if d.DecodeErr != nil {
			cause = fmt.Sprintf(" (decoding stopped: %v)", d.DecodeErr)
		}
		return fmt.Errorf("%w: downloaded %d bytes with SHA-256 %s; the snapshot was recorded as %d bytes with %s%s",
			ErrChecksumMismatch, d.Size, d.SHA256, wantSize, wantSHA256, cause)
	case d.DecodeErr != nil:
		return fmt.Errorf("failed to download the snapshot: %w", d.DecodeErr)
	case d.ReadErr != nil:
		return fmt.Errorf("failed to download the snapshot: %w", d.ReadErr)
	case !d.Ended:
		return fmt.Errorf("failed to download the snapshot: the object was not read to its end")
	case !d.Verified:
		return fmt.Errorf("%w: the stream ended before etcd's digest was checked", ErrChecksumMismatch)
	}
	return nil
}
