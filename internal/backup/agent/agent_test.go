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
	"strings"
	"testing"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/store"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// threeMembers is a fake cluster whose first member leads.
func threeMembers() (*etcdfake.Fake, []string) {
	f := etcdfake.New()
	var eps []string
	for _, n := range []string{"a", "b", "c"} {
		ep := "http://" + n + ":2379"
		f.AddVoter(n, "http://"+n+":2380", ep)
		eps = append(eps, ep)
	}
	return f, eps
}

func saveArgs(eps []string) SaveArgs {
	return SaveArgs{Namespace: "ns", Cluster: "c", Snapshot: "snap", Endpoints: eps,
		StorageArgs: StorageArgs{Key: backup.SnapshotKey("ns", "c", "snap")}}
}

func newFS(t *testing.T) *store.FS {
	t.Helper()
	s, err := store.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSaveStoresAVerifiedSnapshotFromAFollower(t *testing.T) {
	ctx := context.Background()
	f, eps := threeMembers()
	st := newFS(t)
	a := saveArgs(eps)
	a.ClusterID = etcd.FormatMemberID(etcdfake.DefaultClusterID)
	// Stored as etcd sent it; compression_test.go has the default, Zstd.
	a.Destination.Compression = v1alpha1.CompressionNone
	meta, err := Save(ctx, st, f, a, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Snapshotted) != 1 || f.Snapshotted[0] == eps[0] {
		t.Fatalf("snapshotted %v; want one follower, never the leader %s", f.Snapshotted, eps[0])
	}
	want := etcdfake.ValidSnapshot(2)
	sum := sha256.Sum256(want)
	data, err := store.Get(ctx, st, a.Key, 1<<20)
	if err != nil || !bytes.Equal(data, want) {
		t.Fatalf("stored %d bytes (%v), want the %d streamed", len(data), err, len(want))
	}
	if meta.SHA256 != hex.EncodeToString(sum[:]) || meta.SizeBytes != int64(len(want)) || meta.DBSizeBytes != int64(len(want))-32 {
		t.Fatalf("metadata %+v does not describe the object", meta)
	}
	if meta.EtcdSHA256 != hex.EncodeToString(want[len(want)-32:]) || meta.EtcdVersion != etcdfake.Version || meta.StorageVersion != etcdfake.StorageVersion {
		t.Fatalf("metadata %+v misses etcd's digest or versions", meta)
	}
	if meta.Format != backup.MetadataFormatPlain || meta.Compression != "" {
		t.Fatalf("an uncompressed snapshot is recorded as format %d, compression %q; want format 1 without one, which older releases read", meta.Format, meta.Compression)
	}
	if meta.ClusterID != etcd.FormatMemberID(etcdfake.DefaultClusterID) || meta.Revision == 0 {
		t.Fatalf("metadata %+v misses the cluster ID or revision", meta)
	}
	raw, err := store.Get(ctx, st, backup.MetadataKey(a.Key), 1<<16)
	if err != nil {
		t.Fatalf("no metadata object: %v", err)
	}
	stored, err := backup.ParseMetadata(raw)
	if err != nil || stored.SHA256 != meta.SHA256 {
		t.Fatalf("stored metadata %+v, %v", stored, err)
	}
	if got, err := Inspect(ctx, st, a.Key); err != nil || got.SHA256 != meta.SHA256 {
		t.Fatalf("Inspect = %+v, %v", got, err)
	}
}

func TestSaveLeavesNothingWhenEtcdsDigestDoesNotMatch(t *testing.T) {
	ctx := context.Background()
	f, eps := threeMembers()
	bad := etcdfake.ValidSnapshot(2)
	bad[100] ^= 0xff
	f.SetSnapshot(bad)
	st := newFS(t)
	a := saveArgs(eps)
	_, err := Save(ctx, st, f, a, io.Discard)
	if !errors.Is(err, backup.ErrChecksumMismatch) {
		t.Fatalf("err = %v, want ErrChecksumMismatch", err)
	}
	if objs, _ := st.List(ctx, ""); len(objs) != 0 {
		t.Fatalf("a snapshot that failed its check left %v", objs)
	}
}

func TestSaveNeverOverwrites(t *testing.T) {
	ctx := context.Background()
	f, eps := threeMembers()
	st := newFS(t)
	a := saveArgs(eps)
	if err := store.Put(ctx, st, a.Key, []byte("an older snapshot")); err != nil {
		t.Fatal(err)
	}
	if _, err := Save(ctx, st, f, a, io.Discard); !errors.Is(err, backup.ErrExists) {
		t.Fatalf("err = %v, want ErrExists", err)
	}
	if len(f.Snapshotted) != 0 {
		t.Fatal("etcd was asked for a snapshot that could not be stored")
	}
	if data, _ := store.Get(ctx, st, a.Key, 100); string(data) != "an older snapshot" {
		t.Fatalf("the existing object now reads %q", data)
	}
}

func TestSaveRefusesWithoutAHealthyMember(t *testing.T) {
	ctx := context.Background()
	f, eps := threeMembers()
	f.SetLeader(0)
	st := newFS(t)
	if _, err := Save(ctx, st, f, saveArgs(eps), io.Discard); !errors.Is(err, backup.ErrNoHealthyMember) {
		t.Fatalf("err = %v, want ErrNoHealthyMember", err)
	}
	f.SetLeader(f.Members()[0].ID)
	a := saveArgs(eps)
	a.ClusterID = "0123456789abcdef"
	if _, err := Save(ctx, st, f, a, io.Discard); !errors.Is(err, backup.ErrNoHealthyMember) {
		t.Fatalf("members of another cluster: err = %v, want ErrNoHealthyMember", err)
	}
}

func TestSaveReportsAFailedStreamAsEtcdError(t *testing.T) {
	ctx := context.Background()
	f, eps := threeMembers()
	f.FailNext(etcd.OpSnapshot, etcdfake.ErrUnreachable)
	st := newFS(t)
	_, err := Save(ctx, st, f, saveArgs(eps), io.Discard)
	if backup.CodeOf(err) != backup.CodeEtcdError {
		t.Fatalf("code %s (%v), want EtcdError", backup.CodeOf(err), err)
	}
}

func TestDeleteRemovesTheMarkerFirst(t *testing.T) {
	ctx := context.Background()
	f, eps := threeMembers()
	st := newFS(t)
	a := saveArgs(eps)
	if _, err := Save(ctx, st, f, a, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := Delete(ctx, st, a.Key); err != nil {
		t.Fatal(err)
	}
	if objs, _ := st.List(ctx, ""); len(objs) != 0 {
		t.Fatalf("Delete left %v", objs)
	}
	if err := Delete(ctx, st, a.Key); err != nil {
		t.Fatalf("deleting twice: %v", err)
	}
}

func TestInspectRefusesASnapshotWithoutMetadata(t *testing.T) {
	ctx := context.Background()
	st := newFS(t)
	if _, err := Inspect(ctx, st, "x.db"); !errors.Is(err, backup.ErrNotFound) {
		t.Fatalf("missing object: %v", err)
	}
	if err := store.Put(ctx, st, "x.db", etcdfake.ValidSnapshot(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := Inspect(ctx, st, "x.db"); backup.CodeOf(err) != backup.CodeObjectNotFound {
		t.Fatalf("no metadata: code %s (%v), want ObjectNotFound", backup.CodeOf(err), err)
	}
}

func fetchArgs(t *testing.T, data []byte) FetchArgs {
	sum := sha256.Sum256(data)
	dir := t.TempDir()
	return FetchArgs{StorageArgs: StorageArgs{Key: "snap.db"}, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data)),
		DataDir: filepath.Join(dir, "data"), WorkDir: filepath.Join(dir, "restore")}
}

func TestFetchChecksTheRecordedSHA256(t *testing.T) {
	ctx := context.Background()
	st := newFS(t)
	good := etcdfake.ValidSnapshot(2)
	if err := store.Put(ctx, st, "snap.db", good); err != nil {
		t.Fatal(err)
	}
	a := fetchArgs(t, good)
	if err := Fetch(ctx, st, a, io.Discard); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(a.WorkDir, SnapshotFile))
	if err != nil || !bytes.Equal(got, good) {
		t.Fatalf("fetched %d bytes, %v", len(got), err)
	}

	// One byte flipped in storage: the recorded digest no longer matches,
	// and no snapshot file is left for etcdutl.
	flipped := bytes.Clone(good)
	flipped[5000] ^= 0x01
	if err := store.Put(ctx, st, "snap.db", flipped); err != nil {
		t.Fatal(err)
	}
	err = Fetch(ctx, st, a, io.Discard)
	if !errors.Is(err, backup.ErrChecksumMismatch) {
		t.Fatalf("err = %v, want ErrChecksumMismatch", err)
	}
	if _, err := os.Stat(filepath.Join(a.WorkDir, SnapshotFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a corrupted download left a snapshot file: %v", err)
	}
}

func TestRestoreStepsSkipWhenTheGateIsClosed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dest := filepath.Join(dir, "pvc")
	if err := os.MkdirAll(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	a := fetchArgs(t, []byte("x"))
	a.Destination = v1alpha1.SnapshotDestination{PersistentVolumeClaim: &v1alpha1.PVCDestination{ClaimName: "x"}}
	a.PVCMount = dest
	logPath := filepath.Join(dir, "termination")
	for _, tc := range []struct {
		name, state string
		dataDir     bool
	}{
		{"the cluster exists", v1alpha1.InitialClusterStateExisting, false},
		{"the data dir is in place", v1alpha1.InitialClusterStateNew, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.dataDir {
				if err := os.MkdirAll(a.DataDir, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			env := Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string {
				if k == EnvInitialClusterState {
					return tc.state
				}
				return ""
			}}
			fetch := append(a.Args(), "--termination-log="+logPath)
			if code := Main(ctx, fetch, env); code != 0 {
				t.Fatalf("fetch exited %d", code)
			}
			res := readResult(t, logPath)
			if res.Code != backup.CodeOK || !res.Skipped {
				t.Fatalf("fetch reported %+v, want a skip", res)
			}
			apply := append(ApplyArgs{Etcdutl: "/nonexistent", DataDir: a.DataDir, WorkDir: a.WorkDir, Name: "s",
				InitialCluster: "s=http://s:2380", InitialClusterToken: "t", PeerURL: "http://s:2380"}.Args(), "--termination-log="+logPath)
			if code := Main(ctx, apply, env); code != 0 {
				t.Fatalf("apply exited %d: it must not run etcdutl", code)
			}
			if res := readResult(t, logPath); !res.Skipped {
				t.Fatalf("apply reported %+v, want a skip", res)
			}
		})
	}
}

func readResult(t *testing.T, path string) backup.Result {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := backup.ParseResult(string(data))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestMainReportsBadArgumentsAsAResult(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "termination")
	var stderr bytes.Buffer
	code := Main(context.Background(), []string{"snapshot", "save", "--termination-log=" + logPath}, Env{Stdout: io.Discard, Stderr: &stderr})
	if code == 0 {
		t.Fatal("save without arguments succeeded")
	}
	if res := readResult(t, logPath); res.Code != backup.CodeInvalidArguments {
		t.Fatalf("result %+v, want InvalidArguments", res)
	}
}

func TestArgsRoundTrip(t *testing.T) {
	dest := v1alpha1.SnapshotDestination{S3: &v1alpha1.S3Destination{Endpoint: "http://s3:7070", Bucket: "b", Prefix: "p/", ForcePathStyle: true, Insecure: true}}
	in := SaveArgs{Namespace: "ns", Cluster: "c", Snapshot: "s", Endpoints: []string{"http://a:2379", "http://b:2379"},
		ClusterID: "00000000000000aa", StorageArgs: StorageArgs{Destination: dest, Key: "ns/c/s.db", CAFile: "/ca.crt"}}
	args := in.Args()
	if args[0] != "snapshot" || args[1] != "save" {
		t.Fatalf("args %v", args)
	}
	out, _, err := parseSave(args[2:], Env{Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if out.Namespace != "ns" || out.Snapshot != "s" || strings.Join(out.Endpoints, ",") != "http://a:2379,http://b:2379" ||
		out.ClusterID != in.ClusterID || out.Key != in.Key || out.CAFile != "/ca.crt" || out.Destination.S3.Prefix != "p/" || !out.Destination.S3.ForcePathStyle || !out.Destination.S3.Insecure {
		t.Fatalf("parsed %+v from %v", out, args)
	}
	for _, a := range args {
		if strings.Contains(strings.ToLower(a), "secret") {
			t.Fatalf("an argument mentions a secret: %q", a)
		}
	}
}

// A named Secret that the kubelet could not resolve (the variables are
// empty) is reported with its name, and never falls back on the default
// chain, even with --ambient-credentials.
func TestMissingSecretIsCredentialsInvalid(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "ambient")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "ambient")
	dest := v1alpha1.SnapshotDestination{S3: &v1alpha1.S3Destination{Bucket: "b", CredentialsSecretName: "tenant-creds"}}
	env := Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	_, err := openStore(context.Background(), StorageArgs{Destination: dest, Key: "k", AmbientCredentials: true}, env)
	if !errors.Is(err, backup.ErrCredentials) || !strings.Contains(err.Error(), "tenant-creds") {
		t.Fatalf("err = %v, want ErrCredentials naming the Secret", err)
	}
	dest.S3.CredentialsSecretName = ""
	if _, err := openStore(context.Background(), StorageArgs{Destination: dest, Key: "k"}, env); !errors.Is(err, backup.ErrCredentials) {
		t.Fatalf("no Secret and no --ambient-credentials: err = %v, want ErrCredentials", err)
	}
	if _, err := openStore(context.Background(), StorageArgs{Destination: dest, Key: "k", AmbientCredentials: true}, env); err != nil {
		t.Fatalf("no Secret, --ambient-credentials: %v", err)
	}
}

// A write over http needs s3.insecure; reads and deletes do not, so that
// snapshots written before the field existed still restore and prune.
func TestSaveOverHTTPNeedsInsecure(t *testing.T) {
	dest := func(endpoint string, insecure bool) StorageArgs {
		return StorageArgs{Key: "ns/c/s.db", Destination: v1alpha1.SnapshotDestination{S3: &v1alpha1.S3Destination{
			Endpoint: endpoint, Bucket: "b", Insecure: insecure}}}
	}
	save := func(s StorageArgs) error {
		a := SaveArgs{Namespace: "ns", Cluster: "c", Snapshot: "s", Endpoints: []string{"http://a:2379"}, StorageArgs: s}
		_, _, err := parseSave(a.Args()[2:], Env{Stderr: io.Discard})
		return err
	}
	if err := save(dest("http://s3:7070", false)); !errors.Is(err, backup.ErrInvalidArguments) || !strings.Contains(err.Error(), "s3.insecure is not set") {
		t.Fatalf("save to http without insecure: %v, want invalid arguments naming s3.insecure", err)
	}
	for _, s := range []StorageArgs{dest("http://s3:7070", true), dest("https://s3.example", false), dest("", false)} {
		if err := save(s); err != nil {
			t.Fatalf("save to %q (insecure %v): %v", s.Destination.S3.Endpoint, s.Destination.S3.Insecure, err)
		}
	}
	check := StorageCommandArgs{StorageArgs: dest("http://s3:7070", false)}
	if _, _, err := parseStorageCommand("snapshot inspect", check.InspectArgs()[2:], Env{Stderr: io.Discard}); err != nil {
		t.Fatalf("inspect of an old http snapshot: %v", err)
	}
}
