//go:build integration

package backup_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/agent"
	"github.com/quorumctl/etcd-operator/internal/backup/crypt"
	"github.com/quorumctl/etcd-operator/internal/backup/store"
	"github.com/quorumctl/etcd-operator/internal/recovery"
	"github.com/quorumctl/etcd-operator/test/etcdproc"
	"github.com/quorumctl/etcd-operator/test/s3proc"
)

// TestEncryptedRoundTripThroughS3 runs the agent's command lines, as the
// Jobs and the seed's init containers do, against a real etcd and a real
// S3 server: a snapshot compressed and encrypted to a recipient (the
// writer holds only the public half), the stored object read back from
// the server (no key in clear, an age file), the check refusing each bad
// key by its code before anything is downloaded, and a restore with the
// identity that holds exactly the keys.
func TestEncryptedRoundTripThroughS3(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	s3 := s3proc.Start(t, s3proc.Binary(t), bucket)
	bin := etcdproc.Binary(t, "")
	source := etcdproc.StartCluster(t, bin, etcdproc.Options{Members: 1})
	d := data{small: 2000, large: 12}
	d.write(ctx, t, rawClient(t, etcdproc.ClientURLs(source)...))

	dir := t.TempDir()
	key, identity, err := crypt.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := crypt.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"recipient": []byte(key.Recipient() + "\n"), "identity": identity, "other": other, "garbage": []byte("not a key")}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o400); err != nil {
			t.Fatal(err)
		}
	}
	keyFile := func(name string) agent.KeyFile {
		return agent.KeyFile{Ref: "snapshot-key/" + name, Path: filepath.Join(dir, name)}
	}
	termination := filepath.Join(dir, "termination-log")
	var stdout bytes.Buffer
	env := func(state string) agent.Env {
		vars := map[string]string{
			agent.EnvAccessKeyID: s3.AccessKeyID, agent.EnvSecretAccessKey: s3.SecretAccessKey,
			agent.EnvInitialClusterState: state,
		}
		return agent.Env{Stdout: &stdout, Stderr: io.Discard, Getenv: func(k string) string { return vars[k] }}
	}
	run := func(args []string, state string) (int, backup.Result) {
		t.Helper()
		code := agent.Main(ctx, append(args, "--termination-log="+termination), env(state))
		raw, err := os.ReadFile(termination)
		if err != nil {
			t.Fatal(err)
		}
		res, err := backup.ParseResult(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		return code, res
	}

	dest := v1alpha1.SnapshotDestination{
		S3:         &v1alpha1.S3Destination{Endpoint: s3.Endpoint, Bucket: bucket, Prefix: "enc/", ForcePathStyle: true, CredentialsSecretName: "x", Insecure: true},
		Encryption: &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: "snapshot-key", Key: "recipient"}},
	}
	k := backup.SnapshotKey("ns", "c", "snap")
	save := agent.SaveArgs{Namespace: "ns", Cluster: "c", Snapshot: "snap", Endpoints: etcdproc.ClientURLs(source),
		StorageArgs: agent.StorageArgs{Destination: dest, Key: k, EncryptionKey: keyFile("recipient")}}

	t.Run("a missing key fails the snapshot before anything is stored", func(t *testing.T) {
		missing := save
		missing.EncryptionKey = agent.KeyFile{Ref: "snapshot-key/recipient", Path: filepath.Join(dir, "absent")}
		if code, res := run(missing.Args(), ""); code == 0 || res.Code != backup.CodeEncryptionKeyMissing ||
			backup.SnapshotReason(res.Code) != v1alpha1.EncryptionKeyMissingReason {
			t.Fatalf("exited %d with %+v, want EncryptionKeyMissing", code, res)
		}
		garbage := save
		garbage.EncryptionKey = keyFile("garbage")
		if code, res := run(garbage.Args(), ""); code == 0 || res.Code != backup.CodeEncryptionKeyInvalid {
			t.Fatalf("exited %d with %+v, want EncryptionKeyInvalid", code, res)
		}
		expectObjects(ctx, t, s3Store(t, s3, bucket, s3.SecretAccessKey), "")
	})

	code, saved := run(save.Args(), "")
	if code != 0 || saved.Metadata == nil {
		t.Fatalf("snapshot save exited %d: %+v", code, saved)
	}
	m := saved.Metadata
	if m.Format != backup.MetadataFormatEncrypted || m.Encryption != v1alpha1.EncryptionAge || m.KeyFingerprint != key.Fingerprint() ||
		m.Compression != v1alpha1.CompressionZstd {
		t.Fatalf("recorded format %d, encryption %q to %q, compression %q; want %d, Age to %s, Zstd",
			m.Format, m.Encryption, m.KeyFingerprint, m.Compression, backup.MetadataFormatEncrypted, key.Fingerprint())
	}

	raw, err := store.NewS3(ctx, store.S3Config{Endpoint: s3.Endpoint, Bucket: bucket, Prefix: "enc/", ForcePathStyle: true,
		AccessKeyID: s3.AccessKeyID, SecretAccessKey: s3.SecretAccessKey})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := store.Get(ctx, raw, k, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case int64(len(stored)) != m.SizeBytes || fmt.Sprintf("%x", sha256.Sum256(stored)) != m.SHA256:
		t.Fatalf("the stored object is %d bytes; the metadata records %d and its sha256 %s", len(stored), m.SizeBytes, m.SHA256)
	case !bytes.HasPrefix(stored, []byte("age-encryption.org/v1\n")):
		t.Fatalf("the stored object is not an age file: %q", stored[:min(len(stored), 32)])
	case bytes.Contains(stored, []byte("/registry/key-")) || bytes.Contains(stored, []byte(d.value(d.large+7))):
		t.Fatal("a key or value is in the stored object in clear")
	}
	if bytes.Contains(stdout.Bytes(), identity) {
		t.Fatal("the key is in the agent's output")
	}

	check := agent.StorageCommandArgs{StorageArgs: agent.StorageArgs{Destination: v1alpha1.SnapshotDestination{S3: dest.S3}, Key: k}}
	for _, tc := range []struct {
		name   string
		key    agent.KeyFile
		want   backup.Code
		reason string
		// recovered is the EtcdRecovery's reason for the same check, which
		// its key check Job runs before anything changes.
		recovered string
	}{
		{"no key named", agent.KeyFile{}, backup.CodeEncryptionKeyMissing, v1alpha1.RestoreEncryptionKeyMissingReason, v1alpha1.RecoveryKeyMissingReason},
		{"a Secret that is not there", agent.KeyFile{Ref: "gone/age.key", Path: filepath.Join(dir, "absent")}, backup.CodeEncryptionKeyMissing,
			v1alpha1.RestoreEncryptionKeyMissingReason, v1alpha1.RecoveryKeyMissingReason},
		{"a recipient", keyFile("recipient"), backup.CodeEncryptionKeyInvalid, v1alpha1.RestoreEncryptionKeyInvalidReason, v1alpha1.RecoveryKeyInvalidReason},
		{"another key", keyFile("other"), backup.CodeEncryptionKeyWrong, v1alpha1.RestoreEncryptionKeyWrongReason, v1alpha1.RecoveryKeyWrongReason},
		{"the identity", keyFile("identity"), backup.CodeOK, "", ""},
	} {
		t.Run("check with "+tc.name, func(t *testing.T) {
			c := check
			c.EncryptionKey = tc.key
			code, res := run(c.InspectArgs(), "")
			if res.Code != tc.want || (code == 0) != (tc.want == backup.CodeOK) {
				t.Fatalf("exited %d with %+v, want %s", code, res, tc.want)
			}
			expectReasons(t, res.Code, tc.reason, tc.recovered)
			if bytes.Contains([]byte(res.Message), identity) || bytes.Contains([]byte(res.Message), other) {
				t.Fatal("a key is in the result")
			}
		})
	}

	node := etcdproc.NewNode(t, "seed")
	fetch := agent.FetchArgs{StorageArgs: agent.StorageArgs{Destination: v1alpha1.SnapshotDestination{S3: dest.S3}, Key: k},
		SHA256: m.SHA256, Size: m.SizeBytes, Compression: m.Compression, Encryption: m.Encryption, KeyFingerprint: m.KeyFingerprint,
		DataDir: filepath.Join(dir, "data"), WorkDir: filepath.Join(dir, "restore"), CopySelfTo: filepath.Join(dir, "manager")}
	t.Run("a fetch with another key is refused before the work dir exists", func(t *testing.T) {
		wrong := fetch
		wrong.EncryptionKey = keyFile("other")
		if code, res := run(wrong.Args(), v1alpha1.InitialClusterStateNew); code == 0 || res.Code != backup.CodeEncryptionKeyWrong {
			t.Fatalf("exited %d with %+v, want EncryptionKeyWrong", code, res)
		}
		if _, err := os.Stat(wrong.WorkDir); !os.IsNotExist(err) {
			t.Fatalf("the work dir exists after a refused fetch (%v)", err)
		}
	})
	fetch.EncryptionKey = keyFile("identity")
	apply := agent.ApplyArgs{Etcdutl: filepath.Join(filepath.Dir(bin), "etcdutl"), DataDir: fetch.DataDir, WorkDir: fetch.WorkDir,
		Name: node.Name, InitialCluster: node.Name + "=" + node.PeerURL, InitialClusterToken: "enc-restore", PeerURL: node.PeerURL,
		BumpRevision: 1000, MarkCompacted: true}
	for _, step := range [][]string{fetch.Args(), apply.Args()} {
		if code, res := run(step, v1alpha1.InitialClusterStateNew); code != 0 || res.Skipped {
			t.Fatalf("%v exited %d: %+v", step[:2], code, res)
		}
	}
	restored := etcdproc.StartOnDataDir(t, bin, node, fetch.DataDir, "enc-restore")
	d.check(ctx, t, rawClient(t, restored.ClientURL))
	expectCompactedWatch(context.Background(), t, rawClient(t, restored.ClientURL), m.Revision)
}

// expectReasons checks the reasons a check's code gives a restore and a
// recovery ("" for none expected).
func expectReasons(t *testing.T, code backup.Code, restore, recovered string) {
	t.Helper()
	if restore != "" && backup.RestoreReason(code) != restore {
		t.Fatalf("reason %s, want %s", backup.RestoreReason(code), restore)
	}
	if recovered != "" && recovery.KeyReason(code) != recovered {
		t.Fatalf("recovery reason %s, want %s", recovery.KeyReason(code), recovered)
	}
}
