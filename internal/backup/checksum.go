package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
)

// TrailerSize is the length of the SHA-256 etcd appends to a snapshot
// stream, of the database bytes before it.
const TrailerSize = sha256.Size

// hasTrailer is etcd's own test for a snapshot with its SHA-256 appended
// (etcdutl checks the same before verifying it): a bolt database is a
// whole number of pages, and pages are multiples of 512 bytes, so a size
// 32 past such a multiple can only be a database plus its digest.
func hasTrailer(size int64) bool { return size%512 == TrailerSize }

// ChecksumReader passes a snapshot stream through unchanged and, at its
// end, checks the SHA-256 etcd appended against the bytes before it. It
// reports io.EOF only if they match: a mismatch, or a stream without a
// digest, ends it with ErrChecksumMismatch instead, so a writer that
// commits only on a clean end never commits a bad snapshot.
type ChecksumReader struct {
	r io.Reader
	// db hashes the database bytes: all but the last TrailerSize seen.
	// Once they are checked, the digest is written into it too, which
	// makes it the SHA-256 of every byte, the stored object's: one pass
	// over the stream gives both, where a second hash beside it would
	// cost as much again.
	db hash.Hash
	// whole asks for that SHA-256 of every byte; sum holds it once the
	// stream has ended, verified or not.
	whole bool
	sum   []byte
	tail  [2 * TrailerSize]byte
	// tailLen bytes at the start of tail are held back from db.
	tailLen int
	n       int64
	trailer []byte
	err     error
}

// NewChecksumReader wraps a snapshot stream.
func NewChecksumReader(r io.Reader) *ChecksumReader {
	return &ChecksumReader{r: r, db: sha256.New(), whole: true}
}

// NewTrailerReader wraps a snapshot stream that is not what is stored
// (it is compressed on its way there, or was decompressed on its way
// back): it checks etcd's digest only, and SHA256 is empty, so the
// object's own hash is taken only where it is wanted (ObjectHash).
func NewTrailerReader(r io.Reader) *ChecksumReader {
	return &ChecksumReader{r: r, db: sha256.New()}
}

func (c *ChecksumReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	if n > 0 {
		c.feed(p[:n])
	}
	switch {
	case errors.Is(err, io.EOF):
		c.err = c.verify()
		return n, c.err
	case err != nil:
		c.err = err
	}
	return n, err
}

func (c *ChecksumReader) feed(p []byte) {
	c.n += int64(len(p))
	if len(p) >= TrailerSize {
		// The held-back bytes are not the trailer after all.
		c.db.Write(c.tail[:c.tailLen])
		c.db.Write(p[:len(p)-TrailerSize])
		c.tailLen = copy(c.tail[:], p[len(p)-TrailerSize:])
		return
	}
	c.tailLen += copy(c.tail[c.tailLen:], p)
	if over := c.tailLen - TrailerSize; over > 0 {
		c.db.Write(c.tail[:over])
		copy(c.tail[:], c.tail[over:c.tailLen])
		c.tailLen = TrailerSize
	}
}

func (c *ChecksumReader) verify() error {
	digested := hasTrailer(c.n)
	var got []byte
	if digested {
		c.trailer = append([]byte(nil), c.tail[:TrailerSize]...)
		got = c.db.Sum(nil)
	}
	if c.whole {
		// The database's digest is taken; the rest of the stream, held
		// back from it (the digest, if there is one), ends the hash of
		// every byte. It is taken whether or not the digest matched: a
		// download reports what it received (ReceivedSHA256).
		c.db.Write(c.tail[:c.tailLen])
		c.sum = c.db.Sum(nil)
	}
	if !digested {
		return fmt.Errorf("%w: a snapshot stream of %d bytes carries no SHA-256 (a database plus its digest is 32 bytes past a multiple of 512)", ErrChecksumMismatch, c.n)
	}
	if string(got) != string(c.trailer) {
		return fmt.Errorf("%w: etcd's SHA-256 of the snapshot is %x, the bytes received hash to %x", ErrChecksumMismatch, c.trailer, got)
	}
	return io.EOF
}

// Verified reports whether the whole stream was read and its digest matched.
func (c *ChecksumReader) Verified() bool { return errors.Is(c.err, io.EOF) }

// Size is the number of bytes read, the digest included.
func (c *ChecksumReader) Size() int64 { return c.n }

// SHA256 is the hex SHA-256 of every byte read, the digest included: the
// stored object's, if it is stored as etcd sent it. It is known once the
// stream is Verified, and empty before, after a failed stream, and from a
// NewTrailerReader: what a save records is always of a checked stream.
func (c *ChecksumReader) SHA256() string {
	if !c.Verified() {
		return ""
	}
	return c.ReceivedSHA256()
}

// ReceivedSHA256 is the same SHA-256 of every byte read once the stream has
// ended, whether etcd's digest matched or not (empty before its end, after
// a read error, and from a NewTrailerReader). A download of an object
// stored as etcd sent it compares it with the recorded one, and reports it
// when the object is damaged, without a second hash over the same bytes.
func (c *ChecksumReader) ReceivedSHA256() string {
	if c.sum == nil {
		return ""
	}
	return hex.EncodeToString(c.sum)
}

// ObjectHash is a writer that counts and hashes the bytes of a stored
// object as they pass: put in front of the store's writer while saving, or
// beside the store's reader (io.TeeReader) while downloading, it is the
// SHA-256 and size the metadata records and a restore checks.
type ObjectHash struct {
	h hash.Hash
	n int64
}

// NewObjectHash starts one.
func NewObjectHash() *ObjectHash { return &ObjectHash{h: sha256.New()} }

func (o *ObjectHash) Write(p []byte) (int, error) {
	o.n += int64(len(p))
	return o.h.Write(p)
}

// Size is the number of bytes written.
func (o *ObjectHash) Size() int64 { return o.n }

// SHA256 is the hex SHA-256 of the bytes written.
func (o *ObjectHash) SHA256() string { return hex.EncodeToString(o.h.Sum(nil)) }

// EtcdSHA256 is the hex digest etcd appended, once verified.
func (c *ChecksumReader) EtcdSHA256() string { return hex.EncodeToString(c.trailer) }
