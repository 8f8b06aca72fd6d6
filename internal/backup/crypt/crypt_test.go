package crypt

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
)

func newKey(t *testing.T) (Key, []byte) {
	t.Helper()
	k, secret, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k, secret
}

func plaintext(n int) []byte {
	r := rand.New(rand.NewPCG(7, 8))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func encrypt(t *testing.T, k Key, data []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := NewWriter(k, &out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestRoundTripWithTheKeyFromItsSecret(t *testing.T) {
	_, secret := newKey(t)
	k, err := ParseKey(append([]byte("  "), append(secret, '\n')...))
	if err != nil {
		t.Fatal(err)
	}
	data := plaintext(1<<20 + 123) // more than one 64 KiB chunk, not a multiple
	sealed := encrypt(t, k, data)
	if bytes.Contains(sealed, data[:64]) {
		t.Fatal("the plaintext is in the encrypted object")
	}
	r, err := NewReader(k, bytes.NewReader(sealed))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("decrypted %d bytes (%v), want %d", len(got), err, len(data))
	}
}

func TestAWrongKeyIsRefusedBeforeThePayload(t *testing.T) {
	right, _ := newKey(t)
	wrong, _ := newKey(t)
	sealed := encrypt(t, right, plaintext(4096))
	_, err := NewReader(wrong, bytes.NewReader(sealed))
	if !errors.Is(err, ErrWrongKey) || errors.Is(err, ErrDamaged) {
		t.Fatalf("err = %v, want ErrWrongKey only", err)
	}
}

func TestADamagedObjectIsDamaged(t *testing.T) {
	k, _ := newKey(t)
	sealed := encrypt(t, k, plaintext(200<<10))
	for name, obj := range map[string][]byte{
		"a flipped payload byte": func() []byte { b := bytes.Clone(sealed); b[len(b)-1000] ^= 1; return b }(),
		"the last chunk cut off": sealed[:len(sealed)-100],
		"not an age file":        []byte("SQLite format 3\x00 or a bbolt page"),
	} {
		t.Run(name, func(t *testing.T) {
			r, err := NewReader(k, bytes.NewReader(obj))
			if err == nil {
				_, err = io.ReadAll(r)
			}
			if !errors.Is(err, ErrDamaged) || errors.Is(err, ErrWrongKey) {
				t.Fatalf("err = %v, want ErrDamaged only", err)
			}
		})
	}
}

// A source that fails (the store's connection) is no damage of the object:
// its error comes through as it is, in the header or the payload, and is
// not taken for a changed object, which a restore would refuse for good.
func TestAFailedSourceIsNotDamage(t *testing.T) {
	k, _ := newKey(t)
	sealed := encrypt(t, k, plaintext(200<<10))
	boom := errors.New("connection reset")
	for name, at := range map[string]int{"in the header": 20, "in the payload": len(sealed) / 2} {
		t.Run(name, func(t *testing.T) {
			src := io.MultiReader(bytes.NewReader(sealed[:at]), iotest.ErrReader(boom))
			r, err := NewReader(k, src)
			if err == nil {
				_, err = io.ReadAll(r)
			}
			if !errors.Is(err, boom) || errors.Is(err, ErrDamaged) || errors.Is(err, ErrWrongKey) {
				t.Fatalf("err = %v, want the source's own error only", err)
			}
		})
	}
}

func TestTheFingerprintNamesTheKeyAndHidesIt(t *testing.T) {
	k, secret := newKey(t)
	other, _ := newKey(t)
	fp := k.Fingerprint()
	if !strings.HasPrefix(fp, "sha256:") || len(fp) != len("sha256:")+32 {
		t.Fatalf("fingerprint %q", fp)
	}
	if fp == other.Fingerprint() {
		t.Fatal("two keys share a fingerprint")
	}
	again, err := ParseKey(secret)
	if err != nil || again.Fingerprint() != fp {
		t.Fatalf("the same key parsed again has fingerprint %q (%v), want %q", again.Fingerprint(), err, fp)
	}
	for _, shown := range []string{fp, k.String()} {
		if strings.Contains(shown, string(secret)) || strings.Contains(shown, k.Recipient()) {
			t.Fatalf("%q shows the key", shown)
		}
	}
}

func TestABadKeyIsNotQuoted(t *testing.T) {
	material := "AGE-SECRET-KEY-1NOTAKEYATALLBUTSECRETLOOKING"
	_, err := ParseKey([]byte(material))
	if !errors.Is(err, ErrInvalidKey) || strings.Contains(err.Error(), "NOTAKEY") {
		t.Fatalf("err = %v, want ErrInvalidKey without the material", err)
	}
}

// countingWriter counts what reached the store.
type countingWriter struct{ n int }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

// The writer passes chunks on as they fill: with 8 MiB written and the
// writer open, all but the last chunk has reached the store.
func TestWriterStreams(t *testing.T) {
	k, _ := newKey(t)
	var store countingWriter
	w, err := NewWriter(k, &store)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(plaintext(8 << 20)); err != nil {
		t.Fatal(err)
	}
	if store.n < 8<<20-64<<10 {
		t.Fatalf("%d bytes reached the store after 8 MiB were written: the writer holds the stream", store.n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestARecipientEncryptsForItsIdentity(t *testing.T) {
	k, secret, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	fromPublic, err := ParseRecipient([]byte(" " + k.Recipient() + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	fromSecret, err := ParseRecipient(secret)
	if err != nil {
		t.Fatal(err)
	}
	if fromPublic.Fingerprint() != k.Fingerprint() || fromSecret.Fingerprint() != k.Fingerprint() {
		t.Fatalf("fingerprints differ: recipient %s, identity %s, key %s", fromPublic.Fingerprint(), fromSecret.Fingerprint(), k.Fingerprint())
	}
	var out bytes.Buffer
	w, err := Encrypt(fromPublic, &out)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("written with the public half"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(k, &out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil || string(got) != "written with the public half" {
		t.Fatalf("decrypted %q, %v", got, err)
	}
}

func TestARecipientThatDoesNotParseIsInvalid(t *testing.T) {
	for _, in := range []string{"age1notakey", "AGE-SECRET-KEY-1XYZ", "", "ssh-ed25519 AAAA"} {
		if _, err := ParseRecipient([]byte(in)); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ParseRecipient(%q) = %v, want ErrInvalidKey", in, err)
		}
	}
}
