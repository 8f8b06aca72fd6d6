package backup

import (
	"fmt"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// Metadata formats. A snapshot stored as etcd streamed it is recorded in
// format 1, which every operator release reads; a compressed one in format
// 2, which releases from before compression refuse by its number
// (MetadataInvalid) instead of taking the compressed bytes for a bbolt
// file. Format 1 never names a compression.
const (
	MetadataFormatPlain      = 1
	MetadataFormatCompressed = 2
)

// MetadataFormatFor is the format a snapshot with compression c is
// recorded in.
func MetadataFormatFor(c v1alpha1.SnapshotCompression) int {
	if c == "" || c == v1alpha1.CompressionNone {
		return MetadataFormatPlain
	}
	return MetadataFormatCompressed
}

// KnownCompression reports whether this release can read compression c;
// empty is None.
func KnownCompression(c v1alpha1.SnapshotCompression) bool {
	switch c {
	case "", v1alpha1.CompressionNone, v1alpha1.CompressionZstd:
		return true
	}
	return false
}

// CompressionOf is the scheme the metadata records, checked: None for
// format 1 and for an absent field, an UnsupportedError for a scheme this
// release does not know, MetadataInvalid for a format that cannot carry it.
// The scheme is only ever read here, never guessed from the object's bytes:
// a restore trusts what the snapshot's writer recorded, and the recorded
// SHA-256 of the stored bytes is checked before anything is decoded.
func (m *Metadata) CompressionOf() (v1alpha1.SnapshotCompression, error) {
	c := m.Compression
	switch {
	case m.Format == MetadataFormatPlain && c != "" && c != v1alpha1.CompressionNone:
		return "", fmt.Errorf("%w: format %d cannot record compression %q", ErrMetadataInvalid, m.Format, c)
	case !KnownCompression(c):
		return "", &UnsupportedError{What: fmt.Sprintf("compression %q", c),
			Known: fmt.Sprintf("%s and %s", v1alpha1.CompressionNone, v1alpha1.CompressionZstd)}
	case m.Format == MetadataFormatCompressed && (c == "" || c == v1alpha1.CompressionNone):
		return "", fmt.Errorf("%w: format %d must name its compression", ErrMetadataInvalid, m.Format)
	case c == "":
		return v1alpha1.CompressionNone, nil
	}
	return c, nil
}

// UnsupportedError: the snapshot is recorded in a way this release cannot
// read (a compression scheme, or a metadata format, from a newer release or
// another writer). It is its own code and reason so that it is never taken
// for a damaged snapshot: the snapshot may be fine, the reader is too old.
type UnsupportedError struct {
	// What names it, such as `compression "Lz4"`; Known what this release
	// reads.
	What, Known string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("the snapshot's metadata names %s, which this operator cannot read (it reads %s); restore it with a release that can", e.What, e.Known)
}
