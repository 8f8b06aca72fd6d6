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
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/store"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// fetchArgsFrom is what the controller gives the seed from a checked
// metadata object.
func fetchArgsFrom(t *testing.T, key string, m *backup.Metadata) FetchArgs {
	t.Helper()
	c, err := m.CompressionOf()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	return FetchArgs{StorageArgs: StorageArgs{Key: key}, SHA256: m.SHA256, Size: m.SizeBytes, Compression: c,
		DataDir: filepath.Join(dir, "data"), WorkDir: filepath.Join(dir, "restore")}
}

func TestSaveCompressesByDefaultAndFetchDecodes(t *testing.T) {
	ctx := context.Background()
	f, eps := threeMembers()
	raw := etcdfake.ValidSnapshot(64)
	f.SetSnapshot(raw)
	st := newFS(t)
	a := saveArgs(eps) // no compression named: the default
	meta, err := Save(ctx, st, f, a, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := store.Get(ctx, st, a.Key, 1<<24)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(stored, raw) || len(stored) >= len(raw) {
		t.Fatalf("stored %d bytes of a %d-byte snapshot: not compressed", len(stored), len(raw))
	}
	// Decoded by zstd itself, not by the code under test.
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	plain, err := dec.DecodeAll(stored, nil)
	if err != nil || !bytes.Equal(plain, raw) {
		t.Fatalf("the stored object is not a zstd frame of the snapshot: %d bytes, %v", len(plain), err)
	}
	sum := sha256.Sum256(stored)
	switch {
	case meta.Format != backup.MetadataFormatCompressed || meta.Compression != v1alpha1.CompressionZstd:
		t.Fatalf("recorded format %d, compression %q; want %d, Zstd", meta.Format, meta.Compression, backup.MetadataFormatCompressed)
	case meta.SHA256 != hex.EncodeToString(sum[:]) || meta.SizeBytes != int64(len(stored)):
		t.Fatalf("recorded sha256 %s, size %d; want the stored object's, %x and %d", meta.SHA256, meta.SizeBytes, sum, len(stored))
	case meta.DBSizeBytes != int64(len(raw))-backup.TrailerSize || meta.EtcdSHA256 != hex.EncodeToString(raw[len(raw)-32:]):
		t.Fatalf("recorded db size %d, etcd sha256 %s; want the uncompressed database's", meta.DBSizeBytes, meta.EtcdSHA256)
	}
	// The metadata object says the same, and the check a restore runs
	// first passes.
	checked, err := Inspect(ctx, st, a.Key)
	if err != nil || checked.Compression != v1alpha1.CompressionZstd || checked.SHA256 != meta.SHA256 {
		t.Fatalf("Inspect = %+v, %v", checked, err)
	}
	fa := fetchArgsFrom(t, a.Key, checked)
	if err := Fetch(ctx, st, fa, io.Discard); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(fa.WorkDir, SnapshotFile))
	if err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("fetched %d bytes (%v), want etcd's %d", len(got), err, len(raw))
	}
}

// An object and metadata as releases before compression wrote them: the
// stream as etcd sent it, format 1, no compression field.
func putOldSnapshot(t *testing.T, st store.Store, key string, raw []byte) {
	t.Helper()
	sum := sha256.Sum256(raw)
	meta := `{"format": 1, "namespace": "ns", "cluster": "c", "snapshot": "old", "key": "` + key + `",
	  "revision": 7, "etcdVersion": "3.6.5", "clusterID": "1", "memberID": "2", "endpoint": "http://a:2379",
	  "startedAt": "2026-01-01T00:00:00Z", "completedAt": "2026-01-01T00:00:01Z",
	  "sizeBytes": ` + strconv.Itoa(len(raw)) + `, "dbSizeBytes": ` + strconv.Itoa(len(raw)-32) + `,
	  "sha256": "` + hex.EncodeToString(sum[:]) + `", "etcdSHA256": "` + hex.EncodeToString(raw[len(raw)-32:]) + `"}`
	ctx := context.Background()
	if err := store.Put(ctx, st, key, raw); err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, st, backup.MetadataKey(key), []byte(meta)); err != nil {
		t.Fatal(err)
	}
}

func TestFetchRestoresAnOldUncompressedSnapshot(t *testing.T) {
	ctx := context.Background()
	st := newFS(t)
	raw := etcdfake.ValidSnapshot(8)
	putOldSnapshot(t, st, "ns/c/old.db", raw)
	meta, err := Inspect(ctx, st, "ns/c/old.db")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := meta.CompressionOf(); err != nil || c != v1alpha1.CompressionNone {
		t.Fatalf("an old snapshot's compression is %q, %v; want None", c, err)
	}
	fa := fetchArgsFrom(t, "ns/c/old.db", meta)
	if err := Fetch(ctx, st, fa, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(fa.WorkDir, SnapshotFile)); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("fetched %d bytes (%v), want the %d stored", len(got), err, len(raw))
	}
	// Decided by the metadata, not by the bytes: told Zstd, the same
	// object is refused rather than passed through.
	fa.Compression = v1alpha1.CompressionZstd
	if err := Fetch(ctx, st, fa, io.Discard); err == nil {
		t.Fatal("an uncompressed object fetched as Zstd succeeded")
	}
	if _, err := os.Stat(filepath.Join(fa.WorkDir, SnapshotFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed fetch left a snapshot file: %v", err)
	}
}

func TestAnUnknownSchemeIsRefusedByItsOwnCode(t *testing.T) {
	ctx := context.Background()
	st := newFS(t)
	raw := etcdfake.ValidSnapshot(2)
	if err := store.Put(ctx, st, "snap.db", raw); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	for name, meta := range map[string]string{
		"a scheme":            `{"format": 2, "compression": "Lz4", `,
		"a newer meta format": `{"format": 4, `,
	} {
		t.Run(name, func(t *testing.T) {
			data := meta + `"etcdVersion": "3.6.5", "sizeBytes": ` + strconv.Itoa(len(raw)) + `, "sha256": "` + hex.EncodeToString(sum[:]) + `"}`
			if err := store.Put(ctx, st, backup.MetadataKey("snap.db"), []byte(data)); err != nil {
				t.Fatal(err)
			}
			_, err := Inspect(ctx, st, "snap.db")
			var unsupported *backup.UnsupportedError
			if !errors.As(err, &unsupported) {
				t.Fatalf("err = %v, want an UnsupportedError", err)
			}
			res := backup.ResultOf(err)
			if res.Code != backup.CodeUnsupported || backup.RestoreReason(res.Code) != v1alpha1.RestoreSnapshotUnsupportedReason {
				t.Fatalf("result %+v, reason %s; want Unsupported, RestoreSnapshotUnsupported", res, backup.RestoreReason(res.Code))
			}
		})
	}
	// The seed's fetch step refuses the scheme by the same code, before it
	// reads anything.
	dir := t.TempDir()
	args := FetchArgs{StorageArgs: StorageArgs{Destination: v1alpha1.SnapshotDestination{
		PersistentVolumeClaim: &v1alpha1.PVCDestination{ClaimName: "x"}}, Key: "snap.db"},
		SHA256: hex.EncodeToString(sum[:]), Size: 1, DataDir: filepath.Join(dir, "data"), WorkDir: filepath.Join(dir, "w")}.Args()
	args = append(args, "--compression=Lz4", "--termination-log="+filepath.Join(dir, "log"))
	var out bytes.Buffer
	if code := Main(ctx, args, Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}); code == 0 {
		t.Fatal("fetch with an unknown compression exited 0")
	}
	res, err := backup.ParseResult(mustRead(t, filepath.Join(dir, "log")))
	if err != nil || res.Code != backup.CodeUnsupported {
		t.Fatalf("fetch reported %+v, %v; want Unsupported", res, err)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestFetchChecksBothDigestsOfACompressedSnapshot(t *testing.T) {
	ctx := context.Background()
	f, eps := threeMembers()
	f.SetSnapshot(etcdfake.ValidSnapshot(16))
	st := newFS(t)
	a := saveArgs(eps)
	meta, err := Save(ctx, st, f, a, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := store.Get(ctx, st, a.Key, 1<<24)
	if err != nil {
		t.Fatal(err)
	}

	// A stored byte flipped: the stored object's SHA-256 is wrong, and
	// that is what is reported, whatever the decoder made of it.
	flipped := bytes.Clone(stored)
	flipped[len(flipped)/2] ^= 0x01
	if err := store.Put(ctx, st, a.Key, flipped); err != nil {
		t.Fatal(err)
	}
	fa := fetchArgsFrom(t, a.Key, meta)
	if err := Fetch(ctx, st, fa, io.Discard); !errors.Is(err, backup.ErrChecksumMismatch) {
		t.Fatalf("err = %v, want ErrChecksumMismatch", err)
	}

	// A well-formed zstd frame of a snapshot whose database does not match
	// etcd's digest, recorded with its own (correct) stored hash: the
	// second check, on the decoded stream, refuses it.
	bad := etcdfake.ValidSnapshot(16)
	bad[100] ^= 0xff
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	frame := enc.EncodeAll(bad, nil)
	if err := store.Put(ctx, st, a.Key, frame); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(frame)
	fa.SHA256, fa.Size = hex.EncodeToString(sum[:]), int64(len(frame))
	if err := Fetch(ctx, st, fa, io.Discard); !errors.Is(err, backup.ErrChecksumMismatch) {
		t.Fatalf("err = %v, want ErrChecksumMismatch from etcd's digest", err)
	}
	if _, err := os.Stat(filepath.Join(fa.WorkDir, SnapshotFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a snapshot that failed its check left a file: %v", err)
	}
}

func TestSaveRefusesAnUnknownCompression(t *testing.T) {
	_, eps := threeMembers()
	a := saveArgs(eps)
	a.Destination = v1alpha1.SnapshotDestination{PersistentVolumeClaim: &v1alpha1.PVCDestination{ClaimName: "x"}, Compression: "Lz4"}
	if _, _, err := parseSave(a.Args(), Env{Stderr: io.Discard, Getenv: func(string) string { return "" }}); !errors.Is(err, backup.ErrInvalidArguments) {
		t.Fatalf("err = %v, want ErrInvalidArguments", err)
	}
}
