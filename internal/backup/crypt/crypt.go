// Package crypt encrypts snapshots for storage with age (X25519), and
// decrypts them for a restore, streaming: age's payload is a STREAM of
// 64 KiB authenticated chunks, so neither side holds a snapshot and a
// tampered chunk fails where it is read.
//
// A key is one age X25519 identity (the value of a Secret key,
// "AGE-SECRET-KEY-1…"). Writing needs only its public half, a Recipient
// ("age1…"), which a snapshot's destination may name instead (see
// docs/design/0024-snapshot-encryption.md). What is recorded beside a
// snapshot is Fingerprint, never the key; and a wrong key and a damaged
// object are told apart by type (ErrWrongKey, ErrDamaged), so that a
// restore can refuse with a reason that says which.
package crypt

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"filippo.io/age"
)

// Errors a restore classifies with errors.Is.
var (
	// ErrWrongKey: the object was not encrypted to this key.
	ErrWrongKey = errors.New("the snapshot was not encrypted with this key")
	// ErrDamaged: the object is not an age file, or a chunk failed its
	// authentication (changed in storage, or truncated).
	ErrDamaged = errors.New("the encrypted snapshot is damaged")
	// ErrInvalidKey: the key material does not parse.
	ErrInvalidKey = errors.New("invalid encryption key")
)

// Key is one age X25519 identity. Its String never shows the secret.
type Key struct {
	id *age.X25519Identity
}

// ParseKey reads a key as a Secret holds it: one AGE-SECRET-KEY-1 line,
// surrounding space ignored. The error never quotes the material.
func ParseKey(data []byte) (Key, error) {
	id, err := age.ParseX25519Identity(strings.TrimSpace(string(data)))
	if err != nil {
		return Key{}, fmt.Errorf("%w: not an age X25519 identity (AGE-SECRET-KEY-1…)", ErrInvalidKey)
	}
	return Key{id: id}, nil
}

// GenerateKey makes a new key and returns it as a Secret would hold it.
func GenerateKey() (Key, []byte, error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return Key{}, nil, err
	}
	return Key{id: id}, []byte(id.String()), nil
}

// Recipient is the key's public half, "age1…", which is all that
// encrypting needs.
func (k Key) Recipient() string { return k.id.Recipient().String() }

// Fingerprint names the key in metadata and status: "sha256:" and the
// first 16 bytes of the SHA-256 of its recipient. It is derived from the
// public half only, so it tells which key a snapshot needs and nothing
// that would help to decrypt it.
func (k Key) Fingerprint() string { return k.recipient().Fingerprint() }

func (k Key) String() string { return "age key " + k.Fingerprint() }

// Recipient is the public half of a key: all that encrypting needs.
type Recipient struct {
	r *age.X25519Recipient
}

// ParseRecipient reads what a snapshot destination's Secret holds: an
// age recipient (age1…) or a whole identity, whose public half is taken.
// The error never quotes the material.
func ParseRecipient(data []byte) (Recipient, error) {
	text := strings.TrimSpace(string(data))
	if strings.HasPrefix(text, "age1") {
		r, err := age.ParseX25519Recipient(text)
		if err != nil {
			return Recipient{}, fmt.Errorf("%w: not an age X25519 recipient (age1…)", ErrInvalidKey)
		}
		return Recipient{r: r}, nil
	}
	k, err := ParseKey(data)
	if err != nil {
		return Recipient{}, fmt.Errorf("%w: neither an age X25519 identity (AGE-SECRET-KEY-1…) nor a recipient (age1…)", ErrInvalidKey)
	}
	return Recipient{r: k.id.Recipient()}, nil
}

// Recipient is the key's public half.
func (k Key) recipient() Recipient { return Recipient{r: k.id.Recipient()} }

func (r Recipient) String() string { return r.r.String() }

// Fingerprint is the Fingerprint of the key whose public half r is.
func (r Recipient) Fingerprint() string {
	sum := sha256.Sum256([]byte(r.r.String()))
	return "sha256:" + hex.EncodeToString(sum[:16])
}

// NewWriter encrypts to k what is written into w. Close writes the last
// chunk (without it the object fails to decrypt as truncated); it does
// not close w.
func NewWriter(k Key, w io.Writer) (io.WriteCloser, error) {
	return Encrypt(k.recipient(), w)
}

// Encrypt is NewWriter with only the public half.
func Encrypt(r Recipient, w io.Writer) (io.WriteCloser, error) {
	return age.Encrypt(w, r.r)
}

// NewReader decrypts r with k. The header is read and the key checked
// here, before any payload: a wrong key is refused before a byte of the
// snapshot is read. Errors while reading the payload wrap ErrDamaged,
// except those of r itself (a connection reset), which are returned as
// they are: they say nothing of the object, and a restore retries them
// rather than refusing the snapshot.
func NewReader(k Key, r io.Reader) (io.Reader, error) {
	src := &source{r: r}
	out, err := age.Decrypt(src, k.id)
	var noMatch *age.NoIdentityMatchError
	switch {
	case errors.As(err, &noMatch):
		return nil, fmt.Errorf("%w (it needs another key than %s)", ErrWrongKey, k.Fingerprint())
	case err != nil && src.err != nil:
		return nil, src.err
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	return damaged{out, src}, nil
}

// source remembers the error r's Read failed with, other than its end.
type source struct {
	r   io.Reader
	err error
}

func (s *source) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}

// damaged classifies the payload's errors: past the header, any error
// but the end, or the source's own, is a chunk that failed (or is
// missing: an object cut short ends cleanly, and age finds its last chunk
// missing).
type damaged struct {
	r   io.Reader
	src *source
}

func (d damaged) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	switch {
	case err == nil, errors.Is(err, io.EOF):
	case d.src.err != nil:
		err = d.src.err
	default:
		err = fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	return n, err
}
