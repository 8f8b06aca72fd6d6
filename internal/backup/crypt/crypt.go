// Package crypt encrypts snapshots for storage with age (X25519), and
// decrypts them for a restore, streaming: age's payload is a STREAM of
// 64 KiB authenticated chunks, so neither side holds a snapshot and a
// tampered chunk fails where it is read.
//
// It is the first step of issue 31's item 1 and is not wired in yet: no
// API field, Job or restore uses it. What is settled here is what the
// wiring will rely on: a key is one age X25519 identity (the value of a
// Secret key, "AGE-SECRET-KEY-1…"); what is recorded beside a snapshot is
// Fingerprint, never the key; and a wrong key and a damaged object are
// told apart by type (ErrWrongKey, ErrDamaged), so that a restore can
// refuse with a reason that says which.
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
func (k Key) Fingerprint() string {
	sum := sha256.Sum256([]byte(k.Recipient()))
	return "sha256:" + hex.EncodeToString(sum[:16])
}

func (k Key) String() string { return "age key " + k.Fingerprint() }

// NewWriter encrypts to k what is written into w. Close writes the last
// chunk (without it the object fails to decrypt as truncated); it does
// not close w.
func NewWriter(k Key, w io.Writer) (io.WriteCloser, error) {
	return age.Encrypt(w, k.id.Recipient())
}

// NewReader decrypts r with k. The header is read and the key checked
// here, before any payload: a wrong key is refused before a byte of the
// snapshot is read. Errors while reading the payload wrap ErrDamaged.
func NewReader(k Key, r io.Reader) (io.Reader, error) {
	out, err := age.Decrypt(r, k.id)
	var noMatch *age.NoIdentityMatchError
	switch {
	case errors.As(err, &noMatch):
		return nil, fmt.Errorf("%w (it needs another key than %s)", ErrWrongKey, k.Fingerprint())
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	return damaged{out}, nil
}

// damaged classifies the payload's errors: past the header, any error
// but the end is a chunk that failed (or is missing).
type damaged struct{ r io.Reader }

func (d damaged) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	return n, err
}
