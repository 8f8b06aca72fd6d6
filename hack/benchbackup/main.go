// Command benchbackup measures backups on the local cluster, for a database
// of about -size bytes (1 GiB by default):
//
//   - snapshot throughput to S3 (the local cluster's versitygw), as the
//     snapshot Job streamed it, against etcdctl snapshot save from the same
//     member to a local file, as a ratio, -runs times, each run with every
//     compression of -compression (None and Zstd by default) and one
//     etcdctl save of its own, so every ratio compares figures taken
//     minutes apart on a machine whose load varies;
//   - restore time, from the create of a restored 3-member EtcdCluster to
//     Ready, once, from the last snapshot.
//
// Throughput is etcd's stream (the database and its digest) per second of
// streaming, whatever the stored object's size: with compression on, the
// object is smaller, and dividing its size would understate the rate at
// which the member's snapshot was taken.
//
// The S3 endpoint is the local cluster's versitygw over plain HTTP (the
// EtcdSnapshot allows it with s3.insecure), not HTTPS as the operator
// requires by default: the local cluster's S3 server has no certificate.
// Uploads sign UNSIGNED-PAYLOAD over either (docs/design/0028), so the
// hashing is the default configuration's; what HTTP saves is TLS's
// encryption. The server runs on the same two cores as etcd and the agent,
// and its POSIX backend writes every byte twice (the parts, then the
// object they are copied into): a cost a real S3 does not put there.
//
// The database is filled with random values, which zstd cannot compress:
// a worst case for compression's cost, where it buys nothing.
//
// It prints what it measured and asserts nothing. Run it with make
// bench-backup after make cluster-up, make image and make deploy.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/store"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

func main() {
	size := flag.Int64("size", 1<<30, "database size to fill the cluster with, in bytes")
	keep := flag.Bool("keep", false, "keep the namespace and the bucket's objects afterwards")
	runs := flag.Int("runs", 3, "snapshot measurements, each with every compression and an etcdctl save")
	compressions := flag.String("compression", "None,Zstd", "comma separated compressions to snapshot with in each run")
	flag.Parse()
	var comps []v1alpha1.SnapshotCompression
	for _, c := range strings.Split(*compressions, ",") {
		if c = strings.TrimSpace(c); c != "" {
			comps = append(comps, v1alpha1.SnapshotCompression(c))
		}
	}
	if err := run(*size, *keep, *runs, comps); err != nil {
		fmt.Fprintf(os.Stderr, "bench-backup: %v\n", err)
		os.Exit(1)
	}
}

type bench struct {
	env    *framework.Env
	c      client.Client
	ns     string
	prefix string
	bucket *store.S3
}

func run(size int64, keep bool, runs int, comps []v1alpha1.SnapshotCompression) error {
	ctx := context.Background()
	env, err := framework.Setup()
	if err != nil {
		return err
	}
	defer env.Close()
	if err := env.CheckOperatorRunning(ctx); err != nil {
		return err
	}
	c, err := env.Client()
	if err != nil {
		return err
	}
	b := &bench{env: env, c: c, ns: fmt.Sprintf("bench-backup-%d", time.Now().Unix())}
	b.prefix = "bench/" + b.ns + "/"
	if r := env.Kubectl(ctx, "create", "namespace", b.ns); r.Err != nil {
		return r.Err
	}
	if r := env.Kubectl(ctx, "label", "namespace", b.ns, "pod-security.kubernetes.io/enforce=restricted"); r.Err != nil {
		return r.Err
	}
	if b.bucket, err = env.S3Store(ctx, b.prefix); err != nil {
		return err
	}
	if !keep {
		defer b.cleanup()
	}
	if err := env.CopyS3Credentials(ctx, b.ns); err != nil {
		return err
	}
	return b.measure(ctx, size, runs, comps)
}

func (b *bench) cluster(ctx context.Context, name string, restore *v1alpha1.RestoreSpec) error {
	cl := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns},
		Spec: v1alpha1.EtcdClusterSpec{
			Replicas: ptr.To[int32](3),
			MemberTemplate: v1alpha1.MemberTemplate{
				// Room for the database, its snapshot while a restore runs,
				// and the write-ahead log.
				Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("8Gi"))},
				Options: &v1alpha1.EtcdOptions{QuotaBackendBytes: ptr.To[int64](4 << 30)},
			},
		},
	}
	if restore != nil {
		cl.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Restore: restore}
	}
	return b.c.Create(ctx, cl)
}

func (b *bench) measure(ctx context.Context, size int64, runs int, comps []v1alpha1.SnapshotCompression) error {
	fmt.Println("creating the source cluster (3 members)")
	if err := b.cluster(ctx, "source", nil); err != nil {
		return err
	}
	if _, err := framework.WaitForClusterReady(ctx, b.c, b.ns, "source", 10*time.Minute); err != nil {
		return err
	}
	ep, err := b.env.ClientServiceEndpoint(ctx, b.ns, "source")
	if err != nil {
		return err
	}
	fmt.Printf("filling it with %s\n", humanBytes(size))
	if err := fill(ctx, ep, size); err != nil {
		return err
	}

	var report []string
	var last string
	for run := 1; run <= runs; run++ {
		var member string
		var rates []float64
		for _, comp := range comps {
			name := fmt.Sprintf("bench-%d-%s", run, strings.ToLower(string(comp)))
			fmt.Printf("run %d: snapshot to S3 through an EtcdSnapshot, compression %s\n", run, comp)
			meta, endToEnd, err := b.snapshot(ctx, name, comp)
			if err != nil {
				return err
			}
			last = name
			if member == "" {
				if member, err = b.memberEndpoint(ctx, "source", meta.MemberID); err != nil {
					return err
				}
			}
			streamed := meta.CompletedAt.Sub(meta.StartedAt)
			rate := float64(meta.DBSizeBytes+backup.TrailerSize) / streamed.Seconds()
			rates = append(rates, rate)
			report = append(report, fmt.Sprintf("run %d snapshot to S3, %-4s:      %6.1fs  %7.1f MiB/s  (database %s, object %s; EtcdSnapshot created -> Succeeded: %.1fs)",
				run, comp, streamed.Seconds(), rate/(1<<20), humanBytes(meta.DBSizeBytes), humanBytes(meta.SizeBytes), endToEnd.Seconds()))
		}
		fmt.Printf("run %d: etcdctl snapshot save from the same member (%s) to a local file\n", run, member)
		local, took, err := b.etcdctlSave(ctx, member)
		if err != nil {
			return err
		}
		localRate := float64(local) / took.Seconds()
		report = append(report, fmt.Sprintf("run %d etcdctl snapshot save, local: %6.1fs  %7.1f MiB/s", run, took.Seconds(), localRate/(1<<20)))
		for i, comp := range comps {
			report = append(report, fmt.Sprintf("run %d throughput ratio S3 %-4s / etcdctl: %5.2f   (goal >= 0.8)", run, comp, rates[i]/localRate))
		}
	}

	fmt.Println("restore into a new 3-member cluster")
	began := time.Now()
	if err := b.cluster(ctx, "restored", &v1alpha1.RestoreSpec{SnapshotName: last}); err != nil {
		return err
	}
	if _, err := framework.WaitForClusterReady(ctx, b.c, b.ns, "restored", 30*time.Minute); err != nil {
		return err
	}
	restore := time.Since(began)

	fmt.Println()
	for _, line := range report {
		fmt.Println(line)
	}
	fmt.Printf("restore (%s), apply -> Ready 3 members: %6.1fs  (goal <= 90s)\n", last, restore.Seconds())
	return nil
}

// snapshot takes one through an EtcdSnapshot and reads its metadata.
func (b *bench) snapshot(ctx context.Context, name string, comp v1alpha1.SnapshotCompression) (backup.Metadata, time.Duration, error) {
	var meta backup.Metadata
	dest := framework.S3Destination(b.prefix)
	dest.Compression = comp
	began := time.Now()
	if err := b.c.Create(ctx, &v1alpha1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns},
		Spec:       v1alpha1.EtcdSnapshotSpec{ClusterName: "source", Destination: dest},
	}); err != nil {
		return meta, 0, err
	}
	snap, err := framework.WaitForSnapshot(ctx, b.c, b.ns, name, 30*time.Minute)
	if err != nil {
		return meta, 0, err
	}
	if snap.Status.Phase != v1alpha1.SnapshotSucceeded {
		return meta, 0, fmt.Errorf("the snapshot %s failed: %+v", name, snap.Status.Conditions)
	}
	endToEnd := time.Since(began)
	raw, err := store.Get(ctx, b.bucket, backup.MetadataKey(snap.Status.Key), 1<<20)
	if err != nil {
		return meta, 0, err
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return meta, 0, err
	}
	if got := meta.Compression; got != comp && (comp != v1alpha1.CompressionNone || got != "") {
		return meta, 0, fmt.Errorf("the snapshot %s has compression %q, want %q", name, got, comp)
	}
	return meta, endToEnd, nil
}

// fill writes size bytes of incompressible values from four writers.
func fill(ctx context.Context, endpoint string, size int64) error {
	cli, err := framework.EtcdClient(endpoint)
	if err != nil {
		return err
	}
	defer cli.Close()
	const valueSize = 512 << 10
	n := int(size / valueSize)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for w := range errs {
		wg.Go(func() {
			value := make([]byte, valueSize)
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				_, _ = rand.Read(value)
				if _, err := cli.Put(ctx, fmt.Sprintf("/bench/%08d", i), string(value)); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// memberEndpoint is the Pod address of the member with the hex ID.
func (b *bench) memberEndpoint(ctx context.Context, cluster, id string) (string, error) {
	cl := &v1alpha1.EtcdCluster{}
	if err := b.c.Get(ctx, client.ObjectKey{Namespace: b.ns, Name: cluster}, cl); err != nil {
		return "", err
	}
	pods, err := b.env.MemberPods(ctx, b.ns, cluster)
	if err != nil {
		return "", err
	}
	for _, m := range cl.Status.Members {
		if m.ID == id && pods[m.Name] != nil {
			return fmt.Sprintf("http://%s:%d", pods[m.Name].Status.PodIP, v1alpha1.ClientPort), nil
		}
	}
	return "", fmt.Errorf("no running member has ID %s", id)
}

func (b *bench) etcdctlSave(ctx context.Context, endpoint string) (int64, time.Duration, error) {
	dir, err := os.MkdirTemp("", "bench-backup-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "snap.db")
	etcdctl := filepath.Join(b.env.Layout.BinDir(), "etcdctl")
	began := time.Now()
	out, err := exec.CommandContext(ctx, etcdctl, "--endpoints="+endpoint, "snapshot", "save", file).CombinedOutput()
	took := time.Since(began)
	if err != nil {
		return 0, 0, fmt.Errorf("etcdctl snapshot save: %w: %s", err, out)
	}
	st, err := os.Stat(file)
	if err != nil {
		return 0, 0, err
	}
	return st.Size(), took, nil
}

func (b *bench) cleanup() {
	ctx := context.Background()
	b.env.Kubectl(ctx, "delete", "namespace", b.ns, "--wait=false")
	if objs, err := b.bucket.List(ctx, ""); err == nil {
		for _, o := range objs {
			_ = b.bucket.Delete(ctx, o.Key)
		}
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return strings.TrimSpace(fmt.Sprintf("%d B", n))
}
