package codec

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
)

// sample is compressible (a bbolt file is mostly so) but not constant.
func sample(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]byte, n)
	for i := range out {
		if i%8 == 0 {
			out[i] = byte(r.IntN(256))
		} else {
			out[i] = byte(i / 4096)
		}
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	data := sample(3 << 20)
	for _, c := range []v1alpha1.SnapshotCompression{"", v1alpha1.CompressionNone, v1alpha1.CompressionZstd} {
		t.Run(string(c), func(t *testing.T) {
			var stored bytes.Buffer
			w, err := NewWriter(c, &stored)
			if err != nil {
				t.Fatal(err)
			}
			// Small writes, as a stream arrives.
			for chunk := range slices.Chunk(data, 32<<10) {
				if _, err := w.Write(chunk); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			compressed := c == v1alpha1.CompressionZstd
			if compressed != (stored.Len() < len(data)) || !compressed && !bytes.Equal(stored.Bytes(), data) {
				t.Fatalf("%s stored %d bytes of %d", c, stored.Len(), len(data))
			}
			r, err := NewReader(c, &stored)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("decoded %d bytes (%v), want %d", len(got), err, len(data))
			}
		})
	}
}

// countingWriter is a store that counts what reached it. The encoder
// writes from its own goroutine, hence the atomic.
type countingWriter struct{ n atomic.Int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n.Add(int64(len(p))); return len(p), nil }

// The encoder passes the stream on as it goes: with most of a large,
// incompressible stream written and the writer not yet closed, most of it
// has reached the store. An encoder that held the snapshot would have
// passed on nothing.
func TestWriterStreams(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const written = 40 << 20
	var store countingWriter
	w, err := NewWriter(v1alpha1.CompressionZstd, &store)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for range written / len(buf) {
		for i := range buf {
			buf[i] = byte(r.Uint32())
		}
		if _, err := w.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if n := store.n.Load(); n < written-16<<20 {
		t.Fatalf("after %d bytes written, %d reached the store: the encoder holds the stream", written, n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// countingReader counts what was taken from the store.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// The decoder reads the store as it goes: one decoded MiB has taken far
// less than the whole object.
func TestReaderStreams(t *testing.T) {
	data := make([]byte, 32<<20)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	var stored bytes.Buffer
	w, err := NewWriter(v1alpha1.CompressionZstd, &stored)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	src := &countingReader{r: bytes.NewReader(stored.Bytes())}
	dec, err := NewReader(v1alpha1.CompressionZstd, src)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	if _, err := io.ReadFull(dec, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if src.n > stored.Len()/2 {
		t.Fatalf("decoding 1 MiB read %d of %d stored bytes: the decoder holds the object", src.n, stored.Len())
	}
}

func TestUnknownSchemeIsUnsupported(t *testing.T) {
	var unsupported *backup.UnsupportedError
	if _, err := NewWriter("Lz4", io.Discard); !errors.As(err, &unsupported) {
		t.Fatalf("NewWriter: err = %v, want an UnsupportedError", err)
	}
	if _, err := NewReader("Lz4", bytes.NewReader(nil)); !errors.As(err, &unsupported) {
		t.Fatalf("NewReader: err = %v, want an UnsupportedError", err)
	}
}
