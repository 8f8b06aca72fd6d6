//go:build integration

package backup_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/agent"
	"github.com/quorumctl/etcd-operator/internal/backup/store"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/test/etcdproc"
	"github.com/quorumctl/etcd-operator/test/s3proc"
)

const bucket = "backups"

func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func s3Store(t testing.TB, s *s3proc.Server, bucketName, secret string) *store.S3 {
	t.Helper()
	st, err := store.NewS3(context.Background(), store.S3Config{
		Endpoint: s.Endpoint, Bucket: bucketName, Prefix: "etcd/", ForcePathStyle: true,
		AccessKeyID: s.AccessKeyID, SecretAccessKey: secret,
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func rawClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// data is what each test writes: small keys, and a few large values so the
// database is well past one upload part and S3 gets a real multipart upload.
type data struct {
	small, large int
}

func (d data) value(i int) string {
	if i < d.large {
		// Random bytes, the same for the same i: they do not compress, so
		// a compressed snapshot still needs a multipart upload.
		r := rand.New(rand.NewPCG(uint64(i), 42))
		b := make([]byte, 100<<10)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		return string(b)
	}
	return fmt.Sprintf("value-%d", i)
}

func (d data) write(ctx context.Context, t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	var rev int64
	for i := range d.small + d.large {
		resp, err := cli.Put(ctx, fmt.Sprintf("/registry/key-%06d", i), d.value(i))
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		rev = resp.Header.Revision
	}
	return rev
}

func (d data) check(ctx context.Context, t *testing.T, cli *clientv3.Client) {
	t.Helper()
	resp, err := cli.Get(ctx, "/registry/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != d.small+d.large {
		t.Fatalf("the restored cluster has %d keys, want %d", len(resp.Kvs), d.small+d.large)
	}
	for i, kv := range resp.Kvs {
		if string(kv.Key) != fmt.Sprintf("/registry/key-%06d", i) || string(kv.Value) != d.value(i) {
			t.Fatalf("key %d is %q with a %d-byte value; want key-%06d with its value", i, kv.Key, len(kv.Value), i)
		}
	}
}

// restore fetches the snapshot as the seed's first init container does and
// restores it with the version's own etcdutl as the second does, then
// starts etcd on the result.
func restore(ctx context.Context, t *testing.T, st store.Store, etcdBin string, meta *backup.Metadata, bump int64) (*etcdproc.Member, etcdproc.Node) {
	t.Helper()
	dir := t.TempDir()
	node := etcdproc.NewNode(t, "seed")
	compression, err := meta.CompressionOf()
	if err != nil {
		t.Fatal(err)
	}
	fetch := agent.FetchArgs{StorageArgs: agent.StorageArgs{Key: meta.Key}, SHA256: meta.SHA256, Size: meta.SizeBytes,
		Compression: compression, DataDir: filepath.Join(dir, "data"), WorkDir: filepath.Join(dir, "restore")}
	if err := agent.Fetch(ctx, st, fetch, io.Discard); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	token := "restored-" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-")
	var log bytes.Buffer
	err = agent.Apply(ctx, agent.ApplyArgs{
		Etcdutl: filepath.Join(filepath.Dir(etcdBin), "etcdutl"), DataDir: fetch.DataDir, WorkDir: fetch.WorkDir,
		Name: node.Name, InitialCluster: node.Name + "=" + node.PeerURL, InitialClusterToken: token, PeerURL: node.PeerURL,
		BumpRevision: bump, MarkCompacted: true,
	}, &log)
	if err != nil {
		t.Fatalf("restore: %v\n%s", err, log.String())
	}
	if _, err := os.Stat(fetch.WorkDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the work dir (and the snapshot copy in it) was not removed: %v", err)
	}
	return etcdproc.StartOnDataDir(t, etcdBin, node, fetch.DataDir, token), node
}

// TestRoundTripThroughS3 snapshots a real cluster into a real S3 server and
// restores it with each supported release's etcdutl: every key comes back
// with its value, revisions jump past the bump, the cluster ID is new, and
// a watch from before the restore is told it was compacted.
func TestRoundTripThroughS3(t *testing.T) {
	s3 := s3proc.Start(t, s3proc.Binary(t), bucket)
	for _, version := range etcdproc.Versions(t) {
		t.Run(version, func(t *testing.T) {
			ctx := ctxFor(t, 5*time.Minute)
			bin := etcdproc.Binary(t, version)
			members := 1
			if strings.HasPrefix(version, "v3.6.") {
				members = 3
			}
			source := etcdproc.StartCluster(t, bin, etcdproc.Options{Members: members})
			cli := rawClient(t, etcdproc.ClientURLs(source)...)
			d := data{small: 1000, large: 250}
			lastRev := d.write(ctx, t, cli)
			sourceStatus, err := cli.Status(ctx, source[0].ClientURL)
			if err != nil {
				t.Fatal(err)
			}

			st := s3Store(t, s3, bucket, s3.SecretAccessKey)
			key := backup.SnapshotKey("ns", "source-"+version, "snap")
			a := agent.SaveArgs{Namespace: "ns", Cluster: "source", Snapshot: "snap", Endpoints: etcdproc.ClientURLs(source),
				ClusterID: etcd.FormatMemberID(sourceStatus.Header.ClusterId), StorageArgs: agent.StorageArgs{Key: key}}
			meta, err := agent.Save(ctx, st, etcd.NewDialer(), a, io.Discard)
			if err != nil {
				t.Fatalf("save: %v", err)
			}
			if meta.Revision != lastRev {
				t.Fatalf("the snapshot records revision %d; the last write was %d", meta.Revision, lastRev)
			}
			if meta.SizeBytes <= store.DefaultPartSize {
				t.Fatalf("the snapshot is %d bytes, too small to need a multipart upload", meta.SizeBytes)
			}
			if members > 1 && meta.Endpoint == leaderEndpoint(ctx, t, cli, source) {
				t.Fatalf("the snapshot was streamed from the leader %s with healthy followers around", meta.Endpoint)
			}
			if got, err := agent.Inspect(ctx, st, key); err != nil || got.SHA256 != meta.SHA256 {
				t.Fatalf("inspect: %+v, %v", got, err)
			}
			// Compressed by default: recorded so, and what is stored is a
			// zstd frame, not a bbolt file.
			if meta.Compression != v1alpha1.CompressionZstd || meta.Format != backup.MetadataFormatCompressed {
				t.Fatalf("the snapshot is recorded as format %d, compression %q; want the default, Zstd", meta.Format, meta.Compression)
			}
			expectZstdFrame(ctx, t, st, key)
			t.Logf("stored %d bytes for a %d-byte database", meta.SizeBytes, meta.DBSizeBytes)
			// Nothing else written, no multipart upload left open.
			expectObjects(ctx, t, st, "ns/source-"+version+"/", key, backup.MetadataKey(key))

			const bump = 1000000000
			restored, node := restore(ctx, t, st, bin, meta, bump)
			rcli := rawClient(t, node.ClientURL)
			d.check(ctx, t, rcli)
			st2, err := rcli.Status(ctx, node.ClientURL)
			if err != nil {
				t.Fatal(err)
			}
			if st2.Header.Revision < meta.Revision+bump {
				t.Fatalf("the restored revision is %d, want at least %d + %d", st2.Header.Revision, meta.Revision, bump)
			}
			if st2.Header.ClusterId == sourceStatus.Header.ClusterId {
				t.Fatalf("the restored cluster kept the source's cluster ID %x", st2.Header.ClusterId)
			}
			// Every revision below the bumped one is compacted: a watch
			// from before the restore, or from anywhere up to the bump,
			// ends with a compaction, and its client has to relist.
			expectCompactedWatch(ctx, t, rcli, meta.Revision)
			expectCompactedWatch(ctx, t, rcli, bump)
			expectCompactedWatch(ctx, t, rcli, meta.Revision+bump-1)
			// And it is writable, from beyond the bump.
			put, err := rcli.Put(ctx, "/after-restore", "x")
			if err != nil || put.Header.Revision <= meta.Revision+bump {
				t.Fatalf("a write after the restore got revision %v (%v)", put, err)
			}
			restored.Stop()
		})
	}
}

// zstdMagic begins every zstd frame (RFC 8878, 3.1.1).
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

func expectZstdFrame(ctx context.Context, t *testing.T, st store.Store, key string) {
	t.Helper()
	r, err := st.Reader(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	head := make([]byte, len(zstdMagic))
	if _, err := io.ReadFull(r, head); err != nil || !bytes.Equal(head, zstdMagic) {
		t.Fatalf("the stored object begins %x (%v), not with zstd's magic number", head, err)
	}
}

func leaderEndpoint(ctx context.Context, t *testing.T, cli *clientv3.Client, members []*etcdproc.Member) string {
	t.Helper()
	for _, m := range members {
		st, err := cli.Status(ctx, m.ClientURL)
		if err == nil && st.Leader == st.Header.MemberId {
			return m.ClientURL
		}
	}
	t.Fatal("no leader")
	return ""
}

// expectCompactedWatch watches from rev, which must be gone.
func expectCompactedWatch(ctx context.Context, t *testing.T, cli *clientv3.Client, rev int64) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for resp := range cli.Watch(wctx, "/registry/", clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if resp.CompactRevision > 0 {
			return
		}
		t.Fatalf("a watch from revision %d got %d events instead of a compaction", rev, len(resp.Events))
	}
	t.Fatalf("a watch from revision %d ended without a compaction", rev)
}

func expectObjects(ctx context.Context, t *testing.T, st *store.S3, prefix string, keys ...string) {
	t.Helper()
	objs, err := st.List(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.Key)
	}
	if strings.Join(got, ",") != strings.Join(keys, ",") {
		t.Fatalf("the bucket holds %v, want %v", got, keys)
	}
	pending, err := st.PendingUploads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) > 0 {
		t.Fatalf("multipart uploads were left open: %v", pending)
	}
}

func saveOneMember(ctx context.Context, t *testing.T, st store.Store, d data, compression v1alpha1.SnapshotCompression) (*backup.Metadata, string, error) {
	t.Helper()
	bin := etcdproc.Binary(t, "")
	source := etcdproc.StartCluster(t, bin, etcdproc.Options{})
	d.write(ctx, t, rawClient(t, source[0].ClientURL))
	key := backup.SnapshotKey("ns", "c", "snap")
	meta, err := agent.Save(ctx, st, etcd.NewDialer(), agent.SaveArgs{Namespace: "ns", Cluster: "c", Snapshot: "snap",
		Endpoints: etcdproc.ClientURLs(source), StorageArgs: agent.StorageArgs{Key: key,
			Destination: v1alpha1.SnapshotDestination{Compression: compression}}}, io.Discard)
	return meta, bin, err
}

func TestWrongCredentialsLeaveNothing(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	s3 := s3proc.Start(t, s3proc.Binary(t), bucket)
	_, _, err := saveOneMember(ctx, t, s3Store(t, s3, bucket, "not-the-secret"), data{small: 10}, "")
	if code := backup.CodeOf(err); code != backup.CodeCredentialsInvalid {
		t.Fatalf("code %s (%v), want CredentialsInvalid", code, err)
	}
	expectObjects(ctx, t, s3Store(t, s3, bucket, s3.SecretAccessKey), "")
	if strings.Contains(err.Error(), "not-the-secret") {
		t.Fatalf("the error shows the secret: %v", err)
	}
}

func TestMissingBucket(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	s3 := s3proc.Start(t, s3proc.Binary(t), bucket)
	_, _, err := saveOneMember(ctx, t, s3Store(t, s3, "no-such-bucket", s3.SecretAccessKey), data{small: 10}, "")
	if code := backup.CodeOf(err); code != backup.CodeBucketNotFound {
		t.Fatalf("code %s (%v), want BucketNotFound", code, err)
	}
	if _, err := agent.Inspect(ctx, s3Store(t, s3, "no-such-bucket", s3.SecretAccessKey), "ns/c/snap.db"); backup.CodeOf(err) != backup.CodeBucketNotFound {
		t.Fatalf("inspect of a missing bucket: code %s (%v)", backup.CodeOf(err), err)
	}
}

// TestCorruptedObjectIsRefused flips one byte of a stored snapshot: the
// download's check of the recorded SHA-256 refuses it, and so does
// etcdutl's own check of etcd's digest when handed the corrupted file
// directly; neither leaves a data dir.
func TestCorruptedObjectIsRefused(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	s3 := s3proc.Start(t, s3proc.Binary(t), bucket)
	st := s3Store(t, s3, bucket, s3.SecretAccessKey)
	// Uncompressed, so the bytes handed to etcdutl below are a bbolt file
	// and its own hash check is what refuses them (agent tests cover a
	// corrupted compressed object).
	meta, bin, err := saveOneMember(ctx, t, st, data{small: 200}, v1alpha1.CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	path := s3.ObjectPath(bucket, "etcd/"+meta.Key)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the backend has no file for the object: %v", err)
	}
	raw[len(raw)/2] ^= 0x01
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Inspect(ctx, st, meta.Key); err != nil {
		t.Fatalf("the corruption keeps the size, so the check before the seed passes: %v", err)
	}
	dir := t.TempDir()
	fetch := agent.FetchArgs{StorageArgs: agent.StorageArgs{Key: meta.Key}, SHA256: meta.SHA256, Size: meta.SizeBytes,
		DataDir: filepath.Join(dir, "data"), WorkDir: filepath.Join(dir, "restore")}
	if err := agent.Fetch(ctx, st, fetch, io.Discard); backup.CodeOf(err) != backup.CodeChecksumMismatch {
		t.Fatalf("fetch of a corrupted object: code %s (%v), want ChecksumMismatch", backup.CodeOf(err), err)
	}
	if _, err := os.Stat(filepath.Join(fetch.WorkDir, agent.SnapshotFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused download left a snapshot file: %v", err)
	}
	// etcdutl, which the restore runs without --skip-hash-check, refuses it too.
	if err := os.WriteFile(filepath.Join(fetch.WorkDir, agent.SnapshotFile), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	err = agent.Apply(ctx, agent.ApplyArgs{Etcdutl: filepath.Join(filepath.Dir(bin), "etcdutl"), DataDir: fetch.DataDir,
		WorkDir: fetch.WorkDir, Name: "seed", InitialCluster: "seed=http://127.0.0.1:1", InitialClusterToken: "t",
		PeerURL: "http://127.0.0.1:1", BumpRevision: 1000, MarkCompacted: true}, io.Discard)
	if backup.CodeOf(err) != backup.CodeRestoreFailed {
		t.Fatalf("etcdutl restored a corrupted snapshot: %v", err)
	}
	if _, err := os.Stat(fetch.DataDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused restore left a data dir: %v", err)
	}
}

// TestAbortedMultipartUploadLeavesNothing streams a snapshot whose digest
// does not match through a multipart upload: the upload is aborted, and the
// bucket has neither an object nor an open upload.
func TestAbortedMultipartUploadLeavesNothing(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	s3 := s3proc.Start(t, s3proc.Binary(t), bucket)
	st := s3Store(t, s3, bucket, s3.SecretAccessKey)
	for _, tc := range []struct {
		name  string
		write func(store.ObjectWriter) error
	}{
		{"a digest mismatch after three parts", func(w store.ObjectWriter) error {
			db := bytes.Repeat([]byte{7}, 3*store.DefaultPartSize+4096*3)
			bad := append(db, bytes.Repeat([]byte{0}, backup.TrailerSize)...)
			_, err := io.Copy(w, backup.NewChecksumReader(bytes.NewReader(bad)))
			if !errors.Is(err, backup.ErrChecksumMismatch) {
				t.Fatalf("the stream ended with %v, want ErrChecksumMismatch", err)
			}
			return w.Abort()
		}},
		{"an abort in the middle of a part", func(w store.ObjectWriter) error {
			if _, err := w.Write(make([]byte, store.DefaultPartSize+store.DefaultPartSize/2)); err != nil {
				return err
			}
			return w.Abort()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := st.Writer(ctx, "aborted.db")
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.write(w); err != nil {
				t.Fatal(err)
			}
			expectObjects(ctx, t, st, "")
		})
	}
}

// TestRoundTripThroughAVolume is the same through the filesystem store a
// PersistentVolumeClaim destination uses.
func TestRoundTripThroughAVolume(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	// None writes exactly what releases before compression wrote (format
	// 1, the stream as etcd sent it): restoring it is restoring an old
	// snapshot.
	for _, c := range []v1alpha1.SnapshotCompression{v1alpha1.CompressionZstd, v1alpha1.CompressionNone} {
		t.Run(string(c), func(t *testing.T) {
			st, err := store.NewFS(filepath.Join(t.TempDir(), "pvc", "etcd"))
			if err != nil {
				t.Fatal(err)
			}
			d := data{small: 500, large: 20}
			meta, bin, err := saveOneMember(ctx, t, st, d, c)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := meta.CompressionOf(); err != nil || got != c || meta.Format != backup.MetadataFormatFor(c) {
				t.Fatalf("recorded format %d, compression %q (%v); want %s", meta.Format, got, err, c)
			}
			_, node := restore(ctx, t, st, bin, meta, 1000)
			cli := rawClient(t, node.ClientURL)
			d.check(ctx, t, cli)
			expectCompactedWatch(ctx, t, cli, meta.Revision)
		})
	}
}

// TestCommandLines runs the agent the way the Jobs and the seed's init
// containers do: through Main, from the argument lists the controllers
// build, with the credentials only in the environment and the result in the
// termination message.
func TestCommandLines(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	s3 := s3proc.Start(t, s3proc.Binary(t), bucket)
	bin := etcdproc.Binary(t, "")
	source := etcdproc.StartCluster(t, bin, etcdproc.Options{Members: 3})
	d := data{small: 300, large: 5}
	d.write(ctx, t, rawClient(t, etcdproc.ClientURLs(source)...))
	dir := t.TempDir()
	termination := filepath.Join(dir, "termination-log")
	env := func(state string) agent.Env {
		vars := map[string]string{
			agent.EnvAccessKeyID: s3.AccessKeyID, agent.EnvSecretAccessKey: s3.SecretAccessKey,
			agent.EnvInitialClusterState: state,
		}
		return agent.Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return vars[k] }}
	}
	result := func() backup.Result {
		t.Helper()
		raw, err := os.ReadFile(termination)
		if err != nil {
			t.Fatal(err)
		}
		res, err := backup.ParseResult(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	dest := v1alpha1.SnapshotDestination{S3: &v1alpha1.S3Destination{Endpoint: s3.Endpoint, Bucket: bucket, Prefix: "cli/", ForcePathStyle: true, CredentialsSecretName: "x", Insecure: true}}
	key := backup.SnapshotKey("ns", "c", "snap")
	save := agent.SaveArgs{Namespace: "ns", Cluster: "c", Snapshot: "snap", Endpoints: etcdproc.ClientURLs(source),
		StorageArgs: agent.StorageArgs{Destination: dest, Key: key}}
	if code := agent.Main(ctx, append(save.Args(), "--termination-log="+termination), env("")); code != 0 {
		t.Fatalf("snapshot save exited %d: %+v", code, result())
	}
	saved := result()
	if saved.Code != backup.CodeOK || saved.Metadata == nil || saved.Metadata.Key != key {
		t.Fatalf("snapshot save reported %+v", saved)
	}
	check := agent.StorageCommandArgs{StorageArgs: agent.StorageArgs{Destination: dest, Key: key}}
	if code := agent.Main(ctx, append(check.InspectArgs(), "--termination-log="+termination), env("")); code != 0 || result().Metadata.SHA256 != saved.Metadata.SHA256 {
		t.Fatalf("snapshot inspect exited %d: %+v", code, result())
	}

	node := etcdproc.NewNode(t, "seed")
	fetch := agent.FetchArgs{StorageArgs: agent.StorageArgs{Destination: dest, Key: key}, SHA256: saved.Metadata.SHA256,
		Size: saved.Metadata.SizeBytes, Compression: saved.Metadata.Compression,
		DataDir: filepath.Join(dir, "data"), WorkDir: filepath.Join(dir, "restore"),
		CopySelfTo: filepath.Join(dir, "manager")}
	apply := agent.ApplyArgs{Etcdutl: filepath.Join(filepath.Dir(bin), "etcdutl"), DataDir: fetch.DataDir, WorkDir: fetch.WorkDir,
		Name: node.Name, InitialCluster: node.Name + "=" + node.PeerURL, InitialClusterToken: "cli-restore", PeerURL: node.PeerURL,
		BumpRevision: 1000, MarkCompacted: true}
	for _, step := range [][]string{fetch.Args(), apply.Args()} {
		if code := agent.Main(ctx, append(step, "--termination-log="+termination), env(v1alpha1.InitialClusterStateNew)); code != 0 {
			t.Fatalf("%v exited %d: %+v", step[:2], code, result())
		}
		if res := result(); res.Skipped {
			t.Fatalf("%v skipped while the cluster is new", step[:2])
		}
	}
	if _, err := os.Stat(fetch.CopySelfTo); err != nil {
		t.Fatalf("fetch did not install the agent for the next step: %v", err)
	}
	// A second run of both, as after the Pod's sandbox is re-created: the
	// data dir is in place, so they do nothing.
	for _, step := range [][]string{fetch.Args(), apply.Args()} {
		if code := agent.Main(ctx, append(step, "--termination-log="+termination), env(v1alpha1.InitialClusterStateNew)); code != 0 || !result().Skipped {
			t.Fatalf("a second %v did not skip: %d %+v", step[:2], code, result())
		}
	}
	restored := etcdproc.StartOnDataDir(t, bin, node, fetch.DataDir, "cli-restore")
	d.check(ctx, t, rawClient(t, restored.ClientURL))

	if code := agent.Main(ctx, append(check.DeleteArgs(), "--termination-log="+termination), env("")); code != 0 {
		t.Fatalf("snapshot delete exited %d: %+v", code, result())
	}
	cliStore, err := store.NewS3(ctx, store.S3Config{Endpoint: s3.Endpoint, Bucket: bucket, Prefix: "cli/", ForcePathStyle: true,
		AccessKeyID: s3.AccessKeyID, SecretAccessKey: s3.SecretAccessKey})
	if err != nil {
		t.Fatal(err)
	}
	if objs, err := cliStore.List(ctx, ""); err != nil || len(objs) != 0 {
		t.Fatalf("after delete the prefix holds %v (%v)", objs, err)
	}
}
