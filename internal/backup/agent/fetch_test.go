package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/crypt"
	"github.com/quorumctl/etcd-operator/internal/backup/store"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// scheme is one way a snapshot is stored.
type scheme struct {
	compression v1alpha1.SnapshotCompression
	encrypted   bool
}

func (s scheme) String() string {
	if s.encrypted {
		return string(s.compression) + "+Age"
	}
	return string(s.compression)
}

var schemes = []scheme{
	{v1alpha1.CompressionNone, false},
	{v1alpha1.CompressionZstd, false},
	{v1alpha1.CompressionNone, true},
	{v1alpha1.CompressionZstd, true},
}

// savedAs saves raw as the scheme says, through Save, and returns what the
// seed is given for it: the fetch arguments from the checked metadata
// (with the identity mounted for an encrypted one), and the stored object.
func savedAs(t *testing.T, s scheme, raw []byte) (store.Store, FetchArgs, []byte) {
	t.Helper()
	ctx := context.Background()
	f, eps := threeMembers()
	f.SetSnapshot(raw)
	st := newFS(t)
	a := saveArgs(eps)
	a.Destination.Compression = s.compression
	var identity KeyFile
	if s.encrypted {
		key, id, err := crypt.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		a = encryptedSaveArgs(t, eps, writeKey(t, []byte(key.Recipient())), s.compression)
		identity = writeKey(t, id)
	}
	if _, err := Save(ctx, st, f, a, io.Discard); err != nil {
		t.Fatal(err)
	}
	meta, err := InspectWithKey(ctx, st, a.Key, identity)
	if err != nil {
		t.Fatal(err)
	}
	fa := fetchArgsFrom(t, a.Key, meta)
	fa.Encryption, fa.KeyFingerprint, fa.EncryptionKey = meta.Encryption, meta.KeyFingerprint, identity
	stored, err := store.Get(ctx, st, a.Key, 1<<24)
	if err != nil {
		t.Fatal(err)
	}
	return st, fa, stored
}

// leftNothing checks that the work dir holds neither the snapshot nor its
// partial file: nothing etcdutl could take, nothing taking the room.
func leftNothing(t *testing.T, fa FetchArgs) {
	t.Helper()
	for _, name := range []string{SnapshotFile, SnapshotFile + ".partial"} {
		if _, err := os.Stat(filepath.Join(fa.WorkDir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a refused fetch left %s: %v", name, err)
		}
	}
}

// refused checks that a fetch was refused as a checksum mismatch, which the
// restore reports with its existing reason.
func refused(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, backup.ErrChecksumMismatch) {
		t.Fatalf("err = %v, want ErrChecksumMismatch", err)
	}
	if res := backup.ResultOf(err); backup.RestoreReason(res.Code) != v1alpha1.RestoreChecksumMismatchReason {
		t.Fatalf("reason %s, want %s", backup.RestoreReason(res.Code), v1alpha1.RestoreChecksumMismatchReason)
	}
}

func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Every scheme restores etcd's bytes exactly, and the log names both
// digests it checked.
func TestFetchOfEachScheme(t *testing.T) {
	for _, s := range schemes {
		t.Run(s.String(), func(t *testing.T) {
			raw := etcdfake.ValidSnapshot(64)
			st, fa, stored := savedAs(t, s, raw)
			var log bytes.Buffer
			if err := Fetch(context.Background(), st, fa, &log); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(filepath.Join(fa.WorkDir, SnapshotFile)); err != nil || !bytes.Equal(got, raw) {
				t.Fatalf("fetched %d bytes (%v), want etcd's %d", len(got), err, len(raw))
			}
			if _, err := os.Stat(filepath.Join(fa.WorkDir, SnapshotFile+".partial")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the partial file is still there: %v", err)
			}
			for _, want := range []string{hexSHA256(stored), hex.EncodeToString(raw[len(raw)-32:])} {
				if !strings.Contains(log.String(), want) {
					t.Fatalf("the log %q does not name %s", log.String(), want)
				}
			}
		})
	}
}

// A damaged object is refused by every scheme, whichever layer notices
// first (age's chunk, the zstd frame, etcd's digest), as the stored
// object's mismatch; the SHA-256 reported is of the bytes received, which
// the single hash pass of an object stored as sent must still give.
func TestFetchRefusesADamagedObject(t *testing.T) {
	for _, s := range schemes {
		for _, damage := range []struct {
			name string
			do   func([]byte) []byte
		}{
			{"a flipped byte in the middle", func(b []byte) []byte { b[len(b)/2] ^= 0x01; return b }},
			{"a flipped byte at the end", func(b []byte) []byte { b[len(b)-1] ^= 0x80; return b }},
			{"truncated", func(b []byte) []byte { return b[:len(b)*2/3] }},
			{"a byte more", func(b []byte) []byte { return append(b, 0) }},
		} {
			t.Run(s.String()+"/"+damage.name, func(t *testing.T) {
				ctx := context.Background()
				st, fa, stored := savedAs(t, s, etcdfake.ValidSnapshot(64))
				bad := damage.do(bytes.Clone(stored))
				if err := store.Put(ctx, st, fa.Key, bad); err != nil {
					t.Fatal(err)
				}
				err := Fetch(ctx, st, fa, io.Discard)
				refused(t, err)
				if want := "downloaded " + strconv.Itoa(len(bad)) + " bytes with SHA-256 " + hexSHA256(bad); !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v; want it to say %q", err, want)
				}
				leftNothing(t, fa)
			})
		}
	}
}

// An intact object whose recorded SHA-256 or size is not its own is
// refused too, though every layer decodes it: the recorded digest is what
// vouches for the snapshot.
func TestFetchRefusesAWrongRecordedDigest(t *testing.T) {
	for _, s := range schemes {
		for _, wrong := range []struct {
			name string
			do   func(*FetchArgs)
		}{
			{"sha256", func(fa *FetchArgs) { fa.SHA256 = strings.Repeat("0", 64) }},
			{"size", func(fa *FetchArgs) { fa.Size++ }},
		} {
			t.Run(s.String()+"/"+wrong.name, func(t *testing.T) {
				st, fa, _ := savedAs(t, s, etcdfake.ValidSnapshot(16))
				wrong.do(&fa)
				refused(t, Fetch(context.Background(), st, fa, io.Discard))
				leftNothing(t, fa)
			})
		}
	}
}

// etcd's digest inside an object stored as sent is checked as well: a
// database that does not match it, recorded with its own SHA-256, is
// refused by the digest, not let through by the object's hash, which the
// same pass computes.
func TestFetchAsSentChecksEtcdsDigest(t *testing.T) {
	ctx := context.Background()
	st := newFS(t)
	bad := etcdfake.ValidSnapshot(16)
	bad[100] ^= 0xff
	if err := store.Put(ctx, st, "snap.db", bad); err != nil {
		t.Fatal(err)
	}
	fa := fetchArgs(t, bad)
	err := Fetch(ctx, st, fa, io.Discard)
	refused(t, err)
	if !strings.Contains(err.Error(), "etcd's SHA-256") {
		t.Fatalf("err = %v; want etcd's digest named", err)
	}
	leftNothing(t, fa)

	// Without a digest at all (a bare database) likewise.
	db := etcdfake.ValidSnapshot(16)
	db = db[:len(db)-backup.TrailerSize]
	if err := store.Put(ctx, st, "snap.db", db); err != nil {
		t.Fatal(err)
	}
	fa = fetchArgs(t, db)
	refused(t, Fetch(ctx, st, fa, io.Discard))
	leftNothing(t, fa)
}

// A store whose stream breaks part way fails the fetch with the store's
// error, not a mismatch: nothing says the object is damaged.
func TestFetchReportsABrokenStream(t *testing.T) {
	for _, s := range schemes {
		t.Run(s.String(), func(t *testing.T) {
			st, fa, stored := savedAs(t, s, etcdfake.ValidSnapshot(64))
			broken := brokenStore{Store: st, after: int64(len(stored) / 2)}
			err := Fetch(context.Background(), broken, fa, io.Discard)
			if !errors.Is(err, errBroken) || errors.Is(err, backup.ErrChecksumMismatch) {
				t.Fatalf("err = %v, want the stream's error and no mismatch", err)
			}
			leftNothing(t, fa)
		})
	}
}

var errBroken = errors.New("connection reset")

// brokenStore's objects fail after some bytes, and keep failing.
type brokenStore struct {
	store.Store
	after int64
}

func (b brokenStore) Reader(ctx context.Context, key string) (io.ReadCloser, error) {
	r, err := b.Store.Reader(ctx, key)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(r, b.after), failing{}), r}, nil
}

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errBroken }
