//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/store"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

const (
	// backupKeys is what the round trips write before the snapshot.
	backupKeys = 10000
	// laterKeys are written after it, and must not come back.
	laterKeys = 100
	bump      = v1alpha1.DefaultBumpRevision
)

// backupEnv is what each backup test starts with: a namespace of its own,
// with the S3 credentials in it and its own prefix in the shared bucket.
type backupEnv struct {
	g      *WithT
	c      client.Client
	ns     string
	prefix string
	bucket *store.S3
	// restoreKey, if set, is the key roundTrip restores with.
	restoreKey *v1alpha1.SnapshotEncryption
}

func newBackupEnv(ctx context.Context, t *testing.T, name string) *backupEnv {
	g := NewWithT(t)
	g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
	g.Expect(env.EnsureS3Bucket(ctx)).To(Succeed(), "the local cluster's S3 server answers")
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, name)
	g.Expect(env.CopyS3Credentials(ctx, ns)).To(Succeed())
	prefix := "e2e/" + ns + "/"
	bucket, err := env.S3Store(ctx, prefix)
	g.Expect(err).NotTo(HaveOccurred())
	return &backupEnv{g: g, c: c, ns: ns, prefix: prefix, bucket: bucket}
}

func (b *backupEnv) cluster(ctx context.Context, name string, replicas int32, version string, restore *v1alpha1.RestoreSpec) {
	cl := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns},
		Spec: v1alpha1.EtcdClusterSpec{
			Replicas: ptr.To(replicas),
			MemberTemplate: v1alpha1.MemberTemplate{Version: version,
				Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("1Gi"))}},
		},
	}
	if restore != nil {
		cl.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Restore: restore}
	}
	b.g.Expect(b.c.Create(ctx, cl)).To(Succeed())
}

func (b *backupEnv) ready(ctx context.Context, name string) *v1alpha1.EtcdCluster {
	cl, err := framework.WaitForClusterReady(ctx, b.c, b.ns, name, 10*time.Minute)
	b.g.Expect(err).NotTo(HaveOccurred())
	return cl
}

func (b *backupEnv) etcd(ctx context.Context, cluster string) *clientv3.Client {
	ep, err := env.ClientServiceEndpoint(ctx, b.ns, cluster)
	b.g.Expect(err).NotTo(HaveOccurred())
	cli, err := framework.EtcdClient(ep)
	b.g.Expect(err).NotTo(HaveOccurred())
	return cli
}

func (b *backupEnv) snapshot(ctx context.Context, name, cluster string, dest v1alpha1.SnapshotDestination) *v1alpha1.EtcdSnapshot {
	b.g.Expect(b.c.Create(ctx, &v1alpha1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns},
		Spec:       v1alpha1.EtcdSnapshotSpec{ClusterName: cluster, Destination: dest},
	})).To(Succeed())
	s, err := framework.WaitForSnapshot(ctx, b.c, b.ns, name, 10*time.Minute)
	b.g.Expect(err).NotTo(HaveOccurred())
	return s
}

func succeeded(s *v1alpha1.EtcdSnapshot) *metav1.Condition {
	return meta.FindStatusCondition(s.Status.Conditions, v1alpha1.SnapshotSucceededCondition)
}

// roundTrip is the acceptance scenario of both destinations: 10,000 keys,
// a snapshot, 100 keys more, and a new 3-member cluster restored from the
// snapshot in which every member holds exactly the 10,000 keys with the
// values written, revisions past the bump, a cluster ID of its own, and
// compacted history.
func roundTrip(ctx context.Context, t *testing.T, b *backupEnv, dest v1alpha1.SnapshotDestination, checkStored func(snap *v1alpha1.EtcdSnapshot, written map[string]string)) {
	g := b.g
	b.cluster(ctx, "source", 3, "", nil)
	source := b.ready(ctx, "source")
	cli := b.etcd(ctx, "source")
	defer cli.Close()
	t.Logf("writing %d keys", backupKeys)
	written := putRandom(ctx, g, cli, "backup", backupKeys)
	last, err := cli.Get(ctx, "backup/0000")
	g.Expect(err).NotTo(HaveOccurred())

	t.Log("snapshot")
	snap := b.snapshot(ctx, "snap", "source", dest)
	g.Expect(snap.Status.Phase).To(Equal(v1alpha1.SnapshotSucceeded), "%+v", succeeded(snap))
	g.Expect(succeeded(snap).Reason).To(Equal(v1alpha1.SnapshotSavedReason))
	g.Expect(snap.Status.Revision).To(BeNumerically(">=", last.Header.Revision), "every key written is in the snapshot")
	g.Expect(snap.Status.ClusterID).To(Equal(source.Status.ClusterID))
	g.Expect(snap.Status.SHA256).To(HaveLen(64))
	g.Expect(snap.Status.SizeBytes).To(BeNumerically(">", 0))
	g.Expect(snap.Status.Compression).To(Equal(v1alpha1.CompressionZstd), "compressed by default")
	g.Expect(snap.Status.EtcdVersion).To(Equal(v1alpha1.DefaultEtcdVersion))
	g.Expect(snap.Status.StartedAt).NotTo(BeNil())
	g.Expect(snap.Status.CompletedAt).NotTo(BeNil())
	checkStored(snap, written)

	t.Logf("writing %d keys after the snapshot", laterKeys)
	g.Expect(framework.PutKeys(ctx, cli, "later", laterKeys)).To(Succeed())

	t.Log("restore into a new 3-member cluster")
	began := time.Now()
	b.cluster(ctx, "restored", 3, "", &v1alpha1.RestoreSpec{SnapshotName: "snap", Encryption: b.restoreKey})
	restored := b.ready(ctx, "restored")
	t.Logf("restored cluster Ready %s after it was created", time.Since(began).Round(time.Second))

	g.Expect(restored.Status.ClusterID).NotTo(Equal(source.Status.ClusterID), "a restore forms a new cluster")
	rf := restored.Status.RestoredFrom
	g.Expect(rf).NotTo(BeNil())
	g.Expect(rf.SnapshotName).To(Equal("snap"))
	g.Expect(rf.SHA256).To(Equal(snap.Status.SHA256))
	g.Expect(rf.Compression).To(Equal(v1alpha1.CompressionZstd), "decompressed by what the metadata recorded")
	g.Expect(rf.Revision).To(Equal(snap.Status.Revision))
	g.Expect(rf.RestoredAt).NotTo(BeNil())

	eps, err := env.MemberEndpoints(ctx, b.ns, "restored")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(eps).To(HaveLen(3))
	for _, ep := range eps {
		got := readAll(ctx, g, ep)
		g.Expect(got).To(HaveLen(len(written)), "%s holds as many keys as were written before the snapshot, none written after it", ep)
		g.Expect(got).To(Equal(written), "%s holds every key written before the snapshot, with its value", ep)
	}
	rcli := b.etcd(ctx, "restored")
	defer rcli.Close()
	st, err := rcli.Status(ctx, eps[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Header.Revision).To(BeNumerically(">=", snap.Status.Revision+bump))
	g.Expect(fmt.Sprintf("%016x", st.Header.ClusterId)).To(Equal(restored.Status.ClusterID))

	for _, rev := range []int64{snap.Status.Revision, bump, snap.Status.Revision + bump - 1} {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		resp, ok := <-rcli.Watch(wctx, "backup/", clientv3.WithPrefix(), clientv3.WithRev(rev))
		cancel()
		g.Expect(ok).To(BeTrue(), "a watch from revision %d ended without an answer", rev)
		g.Expect(resp.CompactRevision).To(BeNumerically(">", 0), "a watch from revision %d must be told it was compacted", rev)
	}
}

// putRandom writes n keys prefix/0000.. with random values, and returns
// what it wrote: a value derived from its key would be found again by a
// check that derives it the same way, whatever was restored.
func putRandom(ctx context.Context, g *WithT, cli *clientv3.Client, prefix string, n int) map[string]string {
	written := map[string]string{}
	for i := 0; i < n; i++ {
		k, v := fmt.Sprintf("%s/%04d", prefix, i), rand.String(16)
		_, err := cli.Put(ctx, k, v)
		g.Expect(err).NotTo(HaveOccurred(), "put %s", k)
		written[k] = v
	}
	return written
}

// readAll reads every key one member holds, from its own store.
func readAll(ctx context.Context, g *WithT, ep string) map[string]string {
	cli, err := framework.EtcdClient(ep)
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := cli.Get(rctx, "", clientv3.WithFromKey(), clientv3.WithSerializable())
	g.Expect(err).NotTo(HaveOccurred(), "read everything from %s", ep)
	g.Expect(resp.More).To(BeFalse())
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	return got
}

func TestBackupRoundTripThroughS3(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	b := newBackupEnv(ctx, t, "backup-s3")
	roundTrip(ctx, t, b, framework.S3Destination(b.prefix), func(snap *v1alpha1.EtcdSnapshot, _ map[string]string) {
		key := snap.Status.Key
		keys, err := framework.ObjectKeys(ctx, b.bucket)
		b.g.Expect(err).NotTo(HaveOccurred())
		b.g.Expect(keys).To(ConsistOf(key, backup.MetadataKey(key)), "the snapshot and its metadata, nothing else")
		pending, err := b.bucket.PendingUploads(ctx)
		b.g.Expect(err).NotTo(HaveOccurred())
		b.g.Expect(pending).To(BeEmpty(), "no multipart upload left open")
	})
}

func TestBackupRoundTripThroughAVolume(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	b := newBackupEnv(ctx, t, "backup-pvc")
	_, err := env.Clientset.CoreV1().PersistentVolumeClaims(b.ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: b.ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	b.g.Expect(err).NotTo(HaveOccurred())
	dest := v1alpha1.SnapshotDestination{PersistentVolumeClaim: &v1alpha1.PVCDestination{ClaimName: "backups", Path: "etcd"}}
	roundTrip(ctx, t, b, dest, func(snap *v1alpha1.EtcdSnapshot, _ map[string]string) {
		// The file itself, read off the claim: what the status says was
		// stored must be there, byte for byte.
		file := path.Join("/data", dest.PersistentVolumeClaim.Path, snap.Status.Key)
		_, out := runScript(ctx, t, b.ns, scriptPod("read-snapshot", "", "backups",
			fmt.Sprintf("set -e; sha256sum %[1]s | cut -d' ' -f1; stat -c %%s %[1]s", file)))
		b.g.Expect(strings.Fields(out)).To(Equal([]string{snap.Status.SHA256, fmt.Sprint(snap.Status.SizeBytes)}),
			"%s on the claim is the snapshot the status describes", file)
	})
}

// TestBackupSchedule runs a schedule every minute with keepLast 2: after 3
// successful runs exactly 2 snapshots are in the bucket and 2 EtcdSnapshots
// remain.
func TestBackupSchedule(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	b := newBackupEnv(ctx, t, "backup-schedule")
	g := b.g
	b.cluster(ctx, "main", 1, "", nil)
	b.ready(ctx, "main")
	cli := b.etcd(ctx, "main")
	g.Expect(framework.PutKeys(ctx, cli, "sched", 100)).To(Succeed())
	cli.Close()

	g.Expect(b.c.Create(ctx, &v1alpha1.EtcdSnapshotSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "every-minute", Namespace: b.ns},
		Spec: v1alpha1.EtcdSnapshotScheduleSpec{
			ClusterName: "main", Schedule: "*/1 * * * *", Destination: framework.S3Destination(b.prefix),
			Retention: &v1alpha1.SnapshotRetention{KeepLast: ptr.To[int32](2)},
		},
	})).To(Succeed())

	t.Log("waiting for 3 successful runs")
	seen := map[string]bool{}
	g.Expect(framework.WaitFor(ctx, 8*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		var list v1alpha1.EtcdSnapshotList
		if err := b.c.List(ctx, &list, client.InNamespace(b.ns)); err != nil {
			return false, err
		}
		for _, s := range list.Items {
			if s.Status.Phase == v1alpha1.SnapshotFailed {
				return false, fmt.Errorf("snapshot %s failed: %+v", s.Name, succeeded(&s))
			}
			if s.Status.Phase == v1alpha1.SnapshotSucceeded {
				seen[s.Name] = true
			}
		}
		return len(seen) >= 3, nil
	})).To(Succeed())

	// No further run may get in the way of the count: the schedule stops
	// creating snapshots, and pruning goes on.
	sched := &v1alpha1.EtcdSnapshotSchedule{}
	g.Expect(b.c.Get(ctx, types.NamespacedName{Namespace: b.ns, Name: "every-minute"}, sched)).To(Succeed())
	patch := client.MergeFrom(sched.DeepCopy())
	sched.Spec.Suspend = true
	g.Expect(b.c.Patch(ctx, sched, patch)).To(Succeed())

	t.Log("waiting for retention to settle")
	var remaining []string
	g.Expect(framework.WaitFor(ctx, 3*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		s := &v1alpha1.EtcdSnapshotSchedule{}
		if err := b.c.Get(ctx, types.NamespacedName{Namespace: b.ns, Name: "every-minute"}, s); err != nil {
			return false, err
		}
		pruned := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.PrunedCondition)
		if pruned == nil || pruned.Status != metav1.ConditionTrue || s.Status.ObservedGeneration != s.Generation {
			return false, nil
		}
		var list v1alpha1.EtcdSnapshotList
		if err := b.c.List(ctx, &list, client.InNamespace(b.ns)); err != nil {
			return false, err
		}
		remaining = nil
		for _, snap := range list.Items {
			if !snap.Status.Phase.Terminal() {
				return false, nil
			}
			remaining = append(remaining, snap.Name)
		}
		return len(remaining) == 2, nil
	})).To(Succeed(), "exactly 2 EtcdSnapshots remain: %v", remaining)
	sort.Strings(remaining)

	keys, err := framework.ObjectKeys(ctx, b.bucket)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(framework.SnapshotKeys(keys)).To(HaveLen(2), "exactly 2 snapshot objects: %v", keys)
	for _, name := range remaining {
		key := backup.SnapshotKey(b.ns, "main", name)
		g.Expect(keys).To(ContainElements(key, backup.MetadataKey(key)), "the remaining snapshots are the stored ones")
	}
	g.Expect(b.c.Get(ctx, types.NamespacedName{Namespace: b.ns, Name: "every-minute"}, sched)).To(Succeed())
	g.Expect(sched.Status.LastSuccessfulTime).NotTo(BeNil())
	g.Expect(sched.Status.LastScheduleTime).NotTo(BeNil())
}

// TestBackupBadInput: each refusal has its reason, and nothing is half-made.
func TestBackupBadInput(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	// The subtests run in parallel, after this function has returned.
	t.Cleanup(cancel)

	t.Run("wrong credentials", func(t *testing.T) {
		t.Parallel()
		b := newBackupEnv(ctx, t, "backup-creds")
		_, err := env.Clientset.CoreV1().Secrets(b.ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "wrong"},
			StringData: map[string]string{v1alpha1.S3AccessKeyIDKey: "localcluster", v1alpha1.S3SecretAccessKeyKey: "not-the-secret"},
		}, metav1.CreateOptions{})
		b.g.Expect(err).NotTo(HaveOccurred())
		b.cluster(ctx, "main", 1, "", nil)
		b.ready(ctx, "main")
		dest := framework.S3Destination(b.prefix)
		dest.S3.CredentialsSecretName = "wrong"
		s := b.snapshot(ctx, "snap", "main", dest)
		b.g.Expect(s.Status.Phase).To(Equal(v1alpha1.SnapshotFailed))
		b.g.Expect(succeeded(s).Reason).To(Equal(v1alpha1.CredentialsInvalidReason))
		b.g.Expect(succeeded(s).Message).NotTo(ContainSubstring("not-the-secret"), "no credential in status")
		keys, err := framework.ObjectKeys(ctx, b.bucket)
		b.g.Expect(err).NotTo(HaveOccurred())
		b.g.Expect(keys).To(BeEmpty(), "no object is left in the bucket")
		pending, err := b.bucket.PendingUploads(ctx)
		b.g.Expect(err).NotTo(HaveOccurred())
		b.g.Expect(pending).To(BeEmpty())
		events, err := env.Clientset.CoreV1().Events(b.ns).List(ctx, metav1.ListOptions{})
		b.g.Expect(err).NotTo(HaveOccurred())
		for _, e := range events.Items {
			b.g.Expect(e.Message).NotTo(ContainSubstring("not-the-secret"), "no credential in Events")
		}
	})

	t.Run("missing bucket", func(t *testing.T) {
		t.Parallel()
		b := newBackupEnv(ctx, t, "backup-bucket")
		b.cluster(ctx, "main", 1, "", nil)
		b.ready(ctx, "main")
		dest := framework.S3Destination(b.prefix)
		dest.S3.Bucket = "no-such-bucket"
		s := b.snapshot(ctx, "snap", "main", dest)
		b.g.Expect(s.Status.Phase).To(Equal(v1alpha1.SnapshotFailed))
		b.g.Expect(succeeded(s).Reason).To(Equal(v1alpha1.BucketNotFoundReason))

		b.cluster(ctx, "restored", 1, "", &v1alpha1.RestoreSpec{Source: &v1alpha1.RestoreSource{S3: dest.S3, Key: "x.db"}})
		_, err := framework.WaitForClusterCondition(ctx, b.c, b.ns, "restored", v1alpha1.AvailableCondition,
			metav1.ConditionFalse, v1alpha1.RestoreBucketNotFoundReason, 5*time.Minute)
		b.g.Expect(err).NotTo(HaveOccurred())
		b.expectNoMembers(ctx, "restored")
	})

	t.Run("corrupted object", func(t *testing.T) {
		t.Parallel()
		b := newBackupEnv(ctx, t, "backup-corrupt")
		b.cluster(ctx, "main", 1, "", nil)
		b.ready(ctx, "main")
		cli := b.etcd(ctx, "main")
		b.g.Expect(framework.PutKeys(ctx, cli, "c", 500)).To(Succeed())
		cli.Close()
		s := b.snapshot(ctx, "snap", "main", framework.S3Destination(b.prefix))
		b.g.Expect(s.Status.Phase).To(Equal(v1alpha1.SnapshotSucceeded))

		t.Log("flipping one byte of the stored object")
		data, err := store.Get(ctx, b.bucket, s.Status.Key, 1<<30)
		b.g.Expect(err).NotTo(HaveOccurred())
		data[len(data)/2] ^= 0x01
		w, err := b.bucket.Writer(ctx, s.Status.Key)
		b.g.Expect(err).NotTo(HaveOccurred())
		_, err = io.Copy(w, bytes.NewReader(data))
		b.g.Expect(err).NotTo(HaveOccurred())
		b.g.Expect(w.Commit()).To(Succeed())

		b.cluster(ctx, "restored", 3, "", &v1alpha1.RestoreSpec{SnapshotName: "snap"})
		cl, err := framework.WaitForClusterCondition(ctx, b.c, b.ns, "restored", v1alpha1.AvailableCondition,
			metav1.ConditionFalse, v1alpha1.RestoreChecksumMismatchReason, 5*time.Minute)
		b.g.Expect(err).NotTo(HaveOccurred())
		b.g.Expect(meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.RestoreChecksumMismatchReason))
		b.g.Expect(cl.Status.ClusterID).To(BeEmpty(), "no seed serves")
		pods, err := env.MemberPods(ctx, b.ns, "restored")
		b.g.Expect(err).NotTo(HaveOccurred())
		b.g.Expect(pods).To(HaveLen(1), "only the seed, and it never started etcd")
		for _, p := range pods {
			b.g.Expect(framework.PodReady(p)).To(BeFalse())
			for _, c := range p.Status.ContainerStatuses {
				b.g.Expect(c.State.Running).To(BeNil(), "etcd never runs on partial data")
			}
		}
	})

	t.Run("newer minor", func(t *testing.T) {
		t.Parallel()
		b := newBackupEnv(ctx, t, "backup-minor")
		b.cluster(ctx, "main", 1, "3.7.3", nil)
		b.ready(ctx, "main")
		s := b.snapshot(ctx, "snap", "main", framework.S3Destination(b.prefix))
		b.g.Expect(s.Status.Phase).To(Equal(v1alpha1.SnapshotSucceeded))
		b.g.Expect(s.Status.EtcdVersion).To(Equal("3.7.3"))

		b.cluster(ctx, "restored", 1, "3.6.16", &v1alpha1.RestoreSpec{SnapshotName: "snap"})
		_, err := framework.WaitForClusterCondition(ctx, b.c, b.ns, "restored", v1alpha1.StalledCondition,
			metav1.ConditionTrue, v1alpha1.RestoreVersionTooNewReason, 5*time.Minute)
		b.g.Expect(err).NotTo(HaveOccurred())
		b.expectNoMembers(ctx, "restored")
	})

	t.Run("missing object", func(t *testing.T) {
		t.Parallel()
		b := newBackupEnv(ctx, t, "backup-missing")
		dest := framework.S3Destination(b.prefix)
		b.cluster(ctx, "restored", 1, "", &v1alpha1.RestoreSpec{Source: &v1alpha1.RestoreSource{S3: dest.S3, Key: "nothing/here.db"}})
		_, err := framework.WaitForClusterCondition(ctx, b.c, b.ns, "restored", v1alpha1.AvailableCondition,
			metav1.ConditionFalse, v1alpha1.RestoreObjectNotFoundReason, 5*time.Minute)
		b.g.Expect(err).NotTo(HaveOccurred())
		b.expectNoMembers(ctx, "restored")
	})
}

func (b *backupEnv) expectNoMembers(ctx context.Context, cluster string) {
	var list v1alpha1.EtcdMemberList
	b.g.Expect(b.c.List(ctx, &list, client.InNamespace(b.ns), client.MatchingLabels{v1alpha1.ClusterLabel: cluster})).To(Succeed())
	b.g.Expect(list.Items).To(BeEmpty(), "a refused restore creates no seed")
}
