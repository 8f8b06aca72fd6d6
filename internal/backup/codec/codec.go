// Package codec encodes snapshots for storage and decodes them for a
// restore, streaming: neither side ever holds a snapshot, only the
// encoder's or decoder's window and a few blocks.
//
// Which scheme a stored object has is never guessed from its bytes here:
// callers pass the scheme its metadata records (backup.Metadata's
// CompressionOf), and a scheme this release does not know is refused
// with a backup.UnsupportedError.
package codec

import (
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
)

const (
	// encoderConcurrency bounds the blocks compressed at once, and so the
	// memory the agent uses (a few window-sized buffers per block
	// encoder): the Job has no CPU limit, and GOMAXPROCS would follow the
	// node's cores.
	encoderConcurrency = 2
	// maxWindow is the largest window a decoder accepts. The encoder
	// writes 8 MiB windows (zstd's default level); a larger one is a
	// stream this operator did not write, and refusing it bounds the
	// memory a damaged or hostile object can make a restore allocate
	// before its SHA-256 is known to be wrong.
	maxWindow = 64 << 20
)

// NewWriter returns a writer that encodes with c into w. Close flushes the
// end of the stream into w; it does not close w.
func NewWriter(c v1alpha1.SnapshotCompression, w io.Writer) (io.WriteCloser, error) {
	switch c {
	case "", v1alpha1.CompressionNone:
		return nopCloser{w}, nil
	case v1alpha1.CompressionZstd:
		enc, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(encoderConcurrency))
		if err != nil {
			return nil, fmt.Errorf("failed to start the zstd encoder: %w", err)
		}
		return enc, nil
	}
	return nil, unsupported(c)
}

// NewReader returns a reader of what r holds, decoded with c. Close
// releases the decoder; it does not close r.
func NewReader(c v1alpha1.SnapshotCompression, r io.Reader) (io.ReadCloser, error) {
	switch c {
	case "", v1alpha1.CompressionNone:
		return io.NopCloser(r), nil
	case v1alpha1.CompressionZstd:
		dec, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxWindow))
		if err != nil {
			return nil, fmt.Errorf("failed to start the zstd decoder: %w", err)
		}
		return decoder{dec}, nil
	}
	return nil, unsupported(c)
}

func unsupported(c v1alpha1.SnapshotCompression) error {
	return &backup.UnsupportedError{What: fmt.Sprintf("compression %q", c),
		Known: fmt.Sprintf("%s and %s", v1alpha1.CompressionNone, v1alpha1.CompressionZstd)}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// decoder adapts zstd.Decoder, whose Close returns nothing.
type decoder struct{ *zstd.Decoder }

func (d decoder) Close() error {
	d.Decoder.Close()
	return nil
}
