package backup

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// stream builds what etcd sends: a database of whole 4 KiB pages and its
// SHA-256.
func stream(t *testing.T, pages int) []byte {
	t.Helper()
	db := make([]byte, pages*4096)
	if _, err := rand.Read(db); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(db)
	return append(db, sum[:]...)
}

func readAll(r io.Reader) ([]byte, error) {
	var out bytes.Buffer
	_, err := io.Copy(&out, r)
	return out.Bytes(), err
}

func TestChecksumReaderPassesAGoodStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"large reads", func(r io.Reader) io.Reader { return r }},
		// Reads of one byte put the digest's boundary inside the
		// held-back tail on every call.
		{"one byte at a time", iotest.OneByteReader},
		{"half reads", iotest.HalfReader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := stream(t, 3)
			c := NewChecksumReader(tc.wrap(bytes.NewReader(in)))
			out, err := readAll(c)
			if err != nil {
				t.Fatalf("a good stream failed: %v", err)
			}
			if !bytes.Equal(out, in) {
				t.Fatal("the stream was changed on the way through")
			}
			if !c.Verified() || c.Size() != int64(len(in)) {
				t.Fatalf("verified %v, size %d; want true, %d", c.Verified(), c.Size(), len(in))
			}
			whole := sha256.Sum256(in)
			if c.SHA256() != hex.EncodeToString(whole[:]) {
				t.Fatalf("object SHA-256 %s, want %x", c.SHA256(), whole)
			}
			if c.EtcdSHA256() != hex.EncodeToString(in[len(in)-32:]) {
				t.Fatalf("etcd's SHA-256 %s, want %x", c.EtcdSHA256(), in[len(in)-32:])
			}
		})
	}
}

func TestChecksumReaderRefusesABadStream(t *testing.T) {
	good := stream(t, 2)
	flipped := bytes.Clone(good)
	flipped[4097] ^= 0x01
	badDigest := bytes.Clone(good)
	badDigest[len(badDigest)-1] ^= 0x80
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"a flipped byte in the database", flipped},
		{"a flipped byte in the digest", badDigest},
		{"no digest at all", good[:len(good)-32]},
		{"a truncated stream", good[:len(good)-100]},
		{"empty", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChecksumReader(bytes.NewReader(tc.in))
			_, err := readAll(c)
			if !errors.Is(err, ErrChecksumMismatch) {
				t.Fatalf("err = %v, want ErrChecksumMismatch", err)
			}
			if c.Verified() {
				t.Fatal("a bad stream was reported verified")
			}
			if _, again := c.Read(make([]byte, 8)); !errors.Is(again, ErrChecksumMismatch) {
				t.Fatalf("a second read after the failure returned %v", again)
			}
		})
	}
}

func TestChecksumReaderPassesOnReadErrors(t *testing.T) {
	boom := errors.New("stream broke")
	c := NewChecksumReader(io.MultiReader(bytes.NewReader(stream(t, 1)[:100]), iotest.ErrReader(boom)))
	if _, err := readAll(c); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the stream's own error", err)
	}
	if c.Verified() {
		t.Fatal("a broken stream was reported verified")
	}
}

// The SHA-256 of every byte comes from the database's hash with the digest
// written after it, so it exists only once the digest was checked: a
// stream read part way, or one that failed its check, has none to record.
func TestChecksumReaderHashesTheObjectOnlyOnceVerified(t *testing.T) {
	in := stream(t, 2)
	c := NewChecksumReader(bytes.NewReader(in))
	if _, err := io.ReadFull(c, make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	if got := c.SHA256(); got != "" {
		t.Fatalf("part way through the stream, SHA256 is %q; want none", got)
	}
	bad := bytes.Clone(in)
	bad[10] ^= 1
	c = NewChecksumReader(bytes.NewReader(bad))
	if _, err := readAll(c); !errors.Is(err, ErrChecksumMismatch) {
		t.Fatalf("err = %v, want ErrChecksumMismatch", err)
	}
	if got := c.SHA256(); got != "" {
		t.Fatalf("after a failed check, SHA256 is %q; want none", got)
	}
	if got := NewTrailerReader(bytes.NewReader(in)); func() string { _, _ = readAll(got); return got.SHA256() }() != "" {
		t.Fatal("a trailer reader reports the object's SHA-256")
	}
}

// What a download compares with the recorded SHA-256 and reports: the hash
// of every byte received, whether or not etcd's digest matched, from the
// same pass that checked it; none for a stream that broke.
func TestChecksumReaderReportsWhatItReceived(t *testing.T) {
	good := stream(t, 2)
	flipped := bytes.Clone(good)
	flipped[4097] ^= 0x01
	for name, in := range map[string][]byte{
		"good":                  good,
		"a flipped byte":        flipped,
		"no digest":             good[:len(good)-32],
		"shorter than a digest": good[:20],
		"empty":                 nil,
	} {
		t.Run(name, func(t *testing.T) {
			for _, wrap := range []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader} {
				c := NewChecksumReader(wrap(bytes.NewReader(in)))
				_, _ = readAll(c)
				whole := sha256.Sum256(in)
				if c.ReceivedSHA256() != hex.EncodeToString(whole[:]) || c.Size() != int64(len(in)) {
					t.Fatalf("received %s, %d bytes; want %x, %d", c.ReceivedSHA256(), c.Size(), whole, len(in))
				}
			}
		})
	}
	boom := errors.New("stream broke")
	c := NewChecksumReader(io.MultiReader(bytes.NewReader(good[:100]), iotest.ErrReader(boom)))
	_, _ = readAll(c)
	if got := c.ReceivedSHA256(); got != "" {
		t.Fatalf("a broken stream reports %q received", got)
	}
	tr := NewTrailerReader(bytes.NewReader(good))
	_, _ = readAll(tr)
	if got := tr.ReceivedSHA256(); got != "" {
		t.Fatalf("a trailer reader reports %q received", got)
	}
}
