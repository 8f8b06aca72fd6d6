package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/codec"
	"github.com/quorumctl/etcd-operator/internal/backup/crypt"
	"github.com/quorumctl/etcd-operator/internal/backup/store"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// writeKey puts data where a KeyFile names it, as the kubelet would.
func writeKey(t *testing.T, data []byte) KeyFile {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, data, 0o400); err != nil {
		t.Fatal(err)
	}
	return KeyFile{Ref: "snapshot-key/age.key", Path: p}
}

func encryptedSaveArgs(t *testing.T, eps []string, k KeyFile, c v1alpha1.SnapshotCompression) SaveArgs {
	a := saveArgs(eps)
	a.Destination.Compression = c
	a.Destination.Encryption = &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: "snapshot-key", Key: "age.key"}}
	a.EncryptionKey = k
	return a
}

func TestSaveEncryptsAndFetchDecrypts(t *testing.T) {
	for _, c := range []v1alpha1.SnapshotCompression{v1alpha1.CompressionZstd, v1alpha1.CompressionNone} {
		t.Run(string(c), func(t *testing.T) {
			ctx := context.Background()
			key, identity, err := crypt.GenerateKey()
			if err != nil {
				t.Fatal(err)
			}
			f, eps := threeMembers()
			raw := etcdfake.ValidSnapshot(64)
			f.SetSnapshot(raw)
			st := newFS(t)
			// The writer holds the recipient only.
			a := encryptedSaveArgs(t, eps, writeKey(t, []byte(key.Recipient())), c)
			var log bytes.Buffer
			meta, err := Save(ctx, st, f, a, &log)
			if err != nil {
				t.Fatal(err)
			}
			stored, err := store.Get(ctx, st, a.Key, 1<<24)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(stored)
			switch {
			case meta.Format != backup.MetadataFormatEncrypted || meta.Encryption != v1alpha1.EncryptionAge || meta.KeyFingerprint != key.Fingerprint():
				t.Fatalf("recorded format %d, encryption %q, fingerprint %q", meta.Format, meta.Encryption, meta.KeyFingerprint)
			case meta.SHA256 != hex.EncodeToString(sum[:]) || meta.SizeBytes != int64(len(stored)):
				t.Fatal("sha256 and size must be of the stored, encrypted object")
			case meta.EtcdSHA256 != hex.EncodeToString(raw[len(raw)-32:]):
				t.Fatal("etcdSHA256 must stay etcd's digest of the database")
			case bytes.Contains(stored, raw[:4096]):
				t.Fatal("the database is in the stored object in clear")
			case !bytes.HasPrefix(stored, []byte("age-encryption.org/v1\n")):
				t.Fatal("the stored object is not an age file")
			}
			// Opened by age itself, then decoded: encryption is the outer layer.
			plain, err := crypt.NewReader(key, bytes.NewReader(stored))
			if err != nil {
				t.Fatal(err)
			}
			dec, err := codec.NewReader(c, plain)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := io.ReadAll(dec); err != nil || !bytes.Equal(got, raw) {
				t.Fatalf("decrypted and decoded %d bytes (%v), want etcd's %d", len(got), err, len(raw))
			}
			metaObject, err := store.Get(ctx, st, backup.MetadataKey(a.Key), 1<<16)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(metaObject, identity) || bytes.Contains(log.Bytes(), identity) {
				t.Fatal("the key is in the metadata or the log")
			}

			k := writeKey(t, identity)
			checked, err := InspectWithKey(ctx, st, a.Key, k)
			if err != nil {
				t.Fatal(err)
			}
			fa := fetchArgsFrom(t, a.Key, checked)
			fa.Encryption, fa.KeyFingerprint, fa.EncryptionKey = checked.Encryption, checked.KeyFingerprint, k
			if err := Fetch(ctx, st, fa, io.Discard); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(filepath.Join(fa.WorkDir, SnapshotFile)); err != nil || !bytes.Equal(got, raw) {
				t.Fatalf("fetched %d bytes (%v), want etcd's %d", len(got), err, len(raw))
			}
		})
	}
}

func TestSaveRefusesAMissingOrInvalidKeyBeforeStoring(t *testing.T) {
	ctx := context.Background()
	f, eps := threeMembers()
	f.SetSnapshot(etcdfake.ValidSnapshot(4))
	for name, tc := range map[string]struct {
		key  KeyFile
		want backup.Code
	}{
		"no file":  {KeyFile{Ref: "snapshot-key/age.key", Path: filepath.Join(t.TempDir(), "absent")}, backup.CodeEncryptionKeyMissing},
		"empty":    {writeKey(t, nil), backup.CodeEncryptionKeyMissing},
		"not age":  {writeKey(t, []byte("-----BEGIN PRIVATE KEY-----")), backup.CodeEncryptionKeyInvalid},
		"bad age1": {writeKey(t, []byte("age1qqqq")), backup.CodeEncryptionKeyInvalid},
	} {
		t.Run(name, func(t *testing.T) {
			st := newFS(t)
			_, err := Save(ctx, st, f, encryptedSaveArgs(t, eps, tc.key, v1alpha1.CompressionZstd), io.Discard)
			if got := backup.CodeOf(err); got != tc.want {
				t.Fatalf("code %s (%v), want %s", got, err, tc.want)
			}
			if objs, _ := st.List(ctx, ""); len(objs) != 0 {
				t.Fatalf("a refused snapshot left %v", objs)
			}
		})
	}
}

// A metadata object whose fingerprint matches the key named, beside an
// object encrypted to another key (replaced in storage, or a writer's
// bug): the check still refuses it as the wrong key, from the object's
// header, before the seed exists.
func TestInspectOpensTheHeaderAfterTheFingerprint(t *testing.T) {
	ctx := context.Background()
	named, namedSecret, _ := crypt.GenerateKey()
	other, _, _ := crypt.GenerateKey()
	f, eps := threeMembers()
	f.SetSnapshot(etcdfake.ValidSnapshot(4))
	st := newFS(t)
	a := encryptedSaveArgs(t, eps, writeKey(t, []byte(other.Recipient())), v1alpha1.CompressionZstd)
	meta, err := Save(ctx, st, f, a, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	meta.KeyFingerprint = named.Fingerprint()
	data, _ := json.Marshal(meta)
	if err := st.Delete(ctx, backup.MetadataKey(a.Key)); err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, st, backup.MetadataKey(a.Key), data); err != nil {
		t.Fatal(err)
	}
	_, err = InspectWithKey(ctx, st, a.Key, writeKey(t, namedSecret))
	if !errors.Is(err, crypt.ErrWrongKey) || backup.CodeOf(err) != backup.CodeEncryptionKeyWrong {
		t.Fatalf("err = %v (code %s), want the wrong key", err, backup.CodeOf(err))
	}
}

func TestFetchChecksTheFingerprintBeforeReading(t *testing.T) {
	ctx := context.Background()
	_, identity, _ := crypt.GenerateKey()
	dir := t.TempDir()
	fa := FetchArgs{StorageArgs: StorageArgs{Key: "nothing/here.db", EncryptionKey: writeKey(t, identity)},
		SHA256: string(bytes.Repeat([]byte("0"), 64)), Size: 1,
		Encryption: v1alpha1.EncryptionAge, KeyFingerprint: "sha256:00000000000000000000000000000000",
		DataDir: filepath.Join(dir, "data"), WorkDir: filepath.Join(dir, "restore")}
	// The store has no such object: a wrong key must be found first.
	var wrong *backup.WrongKeyError
	if err := Fetch(ctx, newFS(t), fa, io.Discard); !errors.As(err, &wrong) {
		t.Fatalf("err = %v, want a WrongKeyError", err)
	}
	if _, err := os.Stat(fa.WorkDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a refused fetch created the work dir")
	}
}

func TestFetchArgsCarryTheEncryption(t *testing.T) {
	a := FetchArgs{StorageArgs: StorageArgs{Key: "k.db", EncryptionKey: KeyFile{Ref: "s/k", Path: DefaultKeyFile}},
		SHA256: string(bytes.Repeat([]byte("a"), 64)), Size: 10, Compression: v1alpha1.CompressionZstd,
		Encryption: v1alpha1.EncryptionAge, KeyFingerprint: "sha256:0123456789abcdef0123456789abcdef",
		DataDir: "/d", WorkDir: "/w"}
	got, _, err := parseFetch(a.Args()[2:], Env{Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if got.Encryption != a.Encryption || got.KeyFingerprint != a.KeyFingerprint || got.EncryptionKey != a.EncryptionKey {
		t.Fatalf("parsed %+v, want %+v", got, a)
	}
	for _, arg := range a.Args() {
		if bytes.Contains([]byte(arg), []byte("AGE-SECRET-KEY")) {
			t.Fatal("a key on the command line")
		}
	}
	a.KeyFingerprint = ""
	if _, _, err := parseFetch(a.Args()[2:], Env{Stderr: io.Discard}); !errors.Is(err, backup.ErrInvalidArguments) {
		t.Fatalf("an encryption without its fingerprint parsed: %v", err)
	}
}
