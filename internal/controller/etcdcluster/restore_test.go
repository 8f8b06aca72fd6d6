package etcdcluster

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/crypt"
	"github.com/quorumctl/etcd-operator/internal/component/backupjob"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
)

var restoreDest = v1alpha1.SnapshotDestination{S3: &v1alpha1.S3Destination{
	Endpoint: "http://s3:7070", Bucket: "backups", ForcePathStyle: true, CredentialsSecretName: "s3-credentials",
}}

// newRestoreHarness is the harness with Jobs and EtcdSnapshots in its scheme.
func newRestoreHarness(t *testing.T, restore *v1alpha1.RestoreSpec) *harness {
	h := newHarness(t)
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = policyv1.AddToScheme(scheme)
	_ = batchv1.AddToScheme(scheme)
	_ = networkingv1.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	c := fakeclient.NewClientBuilder().WithScheme(scheme).
		WithStatusSubresource(&v1alpha1.EtcdCluster{}, &v1alpha1.EtcdMember{}, &v1alpha1.EtcdSnapshot{}).Build()
	h.c, h.r.Client, h.r.APIReader, h.r.OperatorImage = c, c, c, "op:v1"
	cl := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: testName, Namespace: testNS, UID: "uid-" + testName, Generation: 1},
		Spec: v1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3), Bootstrap: &v1alpha1.BootstrapSpec{Restore: restore},
			MemberTemplate: v1alpha1.MemberTemplate{Version: "3.6.16"}},
	}
	h.g.Expect(c.Create(context.Background(), cl)).To(Succeed())
	return h
}

func sourceRestore() *v1alpha1.RestoreSpec {
	return &v1alpha1.RestoreSpec{Source: &v1alpha1.RestoreSource{S3: restoreDest.S3, Key: "prod/old/snap.db"},
		BumpRevision: ptr.To[int64](1000000000), MarkCompacted: ptr.To(true)}
}

func goodMetadata(version string) *backup.Metadata {
	return &backup.Metadata{Format: backup.MetadataFormatPlain, Key: "prod/old/snap.db", Revision: 10042, EtcdVersion: version,
		ClusterID: "aaaabbbbccccdddd", SizeBytes: 8224, SHA256: strings.Repeat("5", 64)}
}

func (h *harness) checkJob() *batchv1.Job {
	j := &batchv1.Job{}
	err := h.c.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: backupjob.RestoreCheckJobName(testName)}, j)
	if apierrors.IsNotFound(err) {
		return nil
	}
	h.g.Expect(err).NotTo(HaveOccurred())
	return j
}

// finishCheck ends the check Job with a result, as its agent would.
func (h *harness) finishCheck(res backup.Result) {
	ctx := context.Background()
	j := h.checkJob()
	h.g.Expect(j).NotTo(BeNil())
	// The fake client gives Jobs no UID, so an earlier check's Pod would
	// be taken for this one's: it goes first, as the garbage collector
	// would take it with its Job.
	var old corev1.PodList
	h.g.Expect(h.c.List(ctx, &old, client.InNamespace(testNS), client.MatchingLabels{batchv1.ControllerUidLabel: string(j.UID)})).To(Succeed())
	for i := range old.Items {
		h.g.Expect(h.c.Delete(ctx, &old.Items[i])).To(Succeed())
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-p", Namespace: testNS, Labels: map[string]string{batchv1.ControllerUidLabel: string(j.UID)}}}
	h.g.Expect(h.c.Create(ctx, p)).To(Succeed())
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: backupjob.ContainerName,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: string(res.Encode())}}}}
	h.g.Expect(h.c.Status().Update(ctx, p)).To(Succeed())
	cond := batchv1.JobComplete
	if res.Code != backup.CodeOK {
		cond = batchv1.JobFailed
	}
	j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(h.now)}}
	h.g.Expect(h.c.Status().Update(ctx, j)).To(Succeed())
}

func (h *harness) seedMembers() []v1alpha1.EtcdMember {
	var out []v1alpha1.EtcdMember
	for _, m := range h.members() {
		if m.Spec.Bootstrap {
			out = append(out, m)
		}
	}
	return out
}

func TestRestoreChecksTheSourceBeforeTheSeed(t *testing.T) {
	h := newRestoreHarness(t, sourceRestore())
	h.reconcile()
	h.g.Expect(h.seedMembers()).To(BeEmpty(), "no seed before the source is checked")
	job := h.checkJob()
	h.g.Expect(job).NotTo(BeNil())
	h.g.Expect(job.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--key=prod/old/snap.db"))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.RestoreCheckingReason))

	h.finishCheck(backup.Result{Code: backup.CodeOK, Metadata: goodMetadata("3.6.10")})
	h.reconcile()
	seeds := h.seedMembers()
	h.g.Expect(seeds).To(HaveLen(1))
	r := seeds[0].Spec.Restore
	h.g.Expect(r).NotTo(BeNil(), "the seed carries its restore, so its Pod cannot start without it")
	h.g.Expect(r.Key).To(Equal("prod/old/snap.db"))
	h.g.Expect(r.SHA256).To(Equal(strings.Repeat("5", 64)))
	h.g.Expect(r.SizeBytes).To(Equal(int64(8224)))
	h.g.Expect(r.Compression).To(Equal(v1alpha1.CompressionNone), "format 1 metadata: stored as etcd sent it")
	h.g.Expect(r.BumpRevision).To(Equal(int64(1000000000)))
	h.g.Expect(r.MarkCompacted).To(BeTrue())
	h.g.Expect(r.Source.S3.CredentialsSecretName).To(Equal("s3-credentials"))
	rf := h.cluster().Status.RestoredFrom
	h.g.Expect(rf).NotTo(BeNil())
	h.g.Expect(rf.Location).To(Equal("s3://backups/prod/old/snap.db"))
	h.g.Expect(rf.Revision).To(Equal(int64(10042)))
	h.g.Expect(rf.SourceClusterID).To(Equal("aaaabbbbccccdddd"))
	h.g.Expect(rf.RestoredAt).To(BeNil(), "not formed yet")
}

func TestRestoreRefusals(t *testing.T) {
	cases := []struct {
		name   string
		result backup.Result
		reason string
	}{
		{"bad credentials", backup.ResultOf(backup.ErrCredentials), v1alpha1.RestoreCredentialsInvalidReason},
		{"a missing object", backup.ResultOf(backup.ErrNotFound), v1alpha1.RestoreObjectNotFoundReason},
		{"a missing bucket", backup.ResultOf(backup.ErrBucketNotFound), v1alpha1.RestoreBucketNotFoundReason},
		{"a newer minor", backup.Result{Code: backup.CodeOK, Metadata: goodMetadata("3.7.3")}, v1alpha1.RestoreVersionTooNewReason},
		{"an unknown compression", backup.ResultOf(&backup.UnsupportedError{What: `compression "Lz4"`, Known: "None and Zstd"}),
			v1alpha1.RestoreSnapshotUnsupportedReason},
		{"a missing key", backup.ResultOf(backup.CheckKey(testFingerprint, "")), v1alpha1.RestoreEncryptionKeyMissingReason},
		{"an invalid key", backup.ResultOf(crypt.ErrInvalidKey), v1alpha1.RestoreEncryptionKeyInvalidReason},
		{"the wrong key", backup.ResultOf(backup.CheckKey(testFingerprint, "sha256:ffffffffffffffffffffffffffffffff")),
			v1alpha1.RestoreEncryptionKeyWrongReason},
		{"an encrypted snapshot and no key named", backup.Result{Code: backup.CodeOK, Metadata: encryptedMetadata()},
			v1alpha1.RestoreEncryptionKeyMissingReason},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newRestoreHarness(t, sourceRestore())
			h.reconcile()
			h.finishCheck(tc.result)
			h.reconcile()
			h.g.Expect(h.seedMembers()).To(BeEmpty(), "a refused restore creates no seed")
			for _, c := range []string{v1alpha1.AvailableCondition, v1alpha1.ReadyCondition} {
				h.g.Expect(h.condition(c).Status).To(Equal(metav1.ConditionFalse))
				h.g.Expect(h.condition(c).Reason).To(Equal(tc.reason), c)
			}
			h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionTrue), "bad input stalls")
			h.g.Expect(h.cluster().Status.RestoredFrom).To(BeNil())
			h.g.Expect(h.events.Events).To(HaveLen(1), "one Warning Event with the reason")
			h.g.Expect(<-h.events.Events).To(And(ContainSubstring("Warning"), ContainSubstring(tc.reason)))
			h.reconcile()
			h.g.Expect(h.events.Events).To(BeEmpty(), "announced once")
		})
	}
}

func TestRestoreRefusalStandsWhileItIsCheckedAgain(t *testing.T) {
	h := newRestoreHarness(t, sourceRestore())
	h.reconcile()
	h.finishCheck(backup.ResultOf(backup.ErrCredentials))
	h.reconcile()
	h.now = h.now.Add(2 * restoreRecheckAfter)
	h.reconcile()
	h.g.Expect(h.checkJob()).To(BeNil(), "the failed check goes, to be run again")
	h.reconcile()
	h.g.Expect(h.checkJob()).NotTo(BeNil())
	h.g.Expect(h.condition(v1alpha1.AvailableCondition).Reason).To(Equal(v1alpha1.RestoreCredentialsInvalidReason), "until a check passes")

	h.finishCheck(backup.Result{Code: backup.CodeOK, Metadata: goodMetadata("3.6.16")})
	h.reconcile()
	h.g.Expect(h.seedMembers()).To(HaveLen(1), "fixed credentials let the restore go on")
}

func (h *harness) snapshotObject(phase v1alpha1.SnapshotPhase, sha string) {
	ctx := context.Background()
	s := &v1alpha1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: testNS},
		Spec: v1alpha1.EtcdSnapshotSpec{ClusterName: "old", Destination: restoreDest}}
	h.g.Expect(h.c.Create(ctx, s)).To(Succeed())
	// status.key points elsewhere: the restore reads only the key the
	// snapshot's own name, namespace and cluster give.
	s.Status.Phase, s.Status.SHA256, s.Status.Key = phase, sha, "other-tenant/db/nightly.db"
	h.g.Expect(h.c.Status().Update(ctx, s)).To(Succeed())
}

func TestRestoreFromAnEtcdSnapshot(t *testing.T) {
	named := &v1alpha1.RestoreSpec{SnapshotName: "nightly"}

	h := newRestoreHarness(t, named)
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.RestoreSnapshotNotFoundReason))
	h.g.Expect(h.checkJob()).To(BeNil())

	h = newRestoreHarness(t, named)
	h.snapshotObject(v1alpha1.SnapshotRunning, "")
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.RestoreSnapshotNotReadyReason), "waits for it")
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionFalse), "waiting is not bad input")

	h = newRestoreHarness(t, named)
	h.snapshotObject(v1alpha1.SnapshotSucceeded, strings.Repeat("e", 64))
	h.reconcile()
	h.g.Expect(h.checkJob().Spec.Template.Spec.Containers[0].Args).To(ContainElement("--key=" + testNS + "/old/nightly.db"))
	h.finishCheck(backup.Result{Code: backup.CodeOK, Metadata: goodMetadata("3.6.16")})
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.RestoreMetadataInvalidReason),
		"the metadata must describe the snapshot the EtcdSnapshot recorded")
	h.g.Expect(h.seedMembers()).To(BeEmpty())
}

// The seed decodes what the metadata recorded, whatever the EtcdSnapshot's
// destination asks of new snapshots.
func TestRestoreTakesTheCompressionFromTheMetadata(t *testing.T) {
	ctx := context.Background()
	h := newRestoreHarness(t, &v1alpha1.RestoreSpec{SnapshotName: "nightly"})
	dest := *restoreDest.DeepCopy()
	dest.Compression = v1alpha1.CompressionNone
	s := &v1alpha1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: testNS},
		Spec: v1alpha1.EtcdSnapshotSpec{ClusterName: "old", Destination: dest}}
	h.g.Expect(h.c.Create(ctx, s)).To(Succeed())
	s.Status.Phase, s.Status.SHA256 = v1alpha1.SnapshotSucceeded, strings.Repeat("5", 64)
	h.g.Expect(h.c.Status().Update(ctx, s)).To(Succeed())
	h.reconcile()
	m := goodMetadata("3.6.16")
	m.Format, m.Compression = backup.MetadataFormatCompressed, v1alpha1.CompressionZstd
	h.finishCheck(backup.Result{Code: backup.CodeOK, Metadata: m})
	h.reconcile()
	seeds := h.seedMembers()
	h.g.Expect(seeds).To(HaveLen(1))
	r := seeds[0].Spec.Restore
	h.g.Expect(r.Compression).To(Equal(v1alpha1.CompressionZstd))
	h.g.Expect(r.Source.Compression).To(BeEmpty(), "the destination's setting is for writers; the seed reads by the metadata")
	h.g.Expect(h.cluster().Status.RestoredFrom.Compression).To(Equal(v1alpha1.CompressionZstd))
}

const testFingerprint = "sha256:0123456789abcdef0123456789abcdef"

func encryptedMetadata() *backup.Metadata {
	m := goodMetadata("3.6.16")
	m.Format, m.Compression = backup.MetadataFormatEncrypted, v1alpha1.CompressionZstd
	m.Encryption, m.KeyFingerprint = v1alpha1.EncryptionAge, testFingerprint
	return m
}

// The key named in spec.bootstrap.restore reaches the check Job and the
// seed as a mounted Secret file, with the fingerprint the metadata
// recorded; the writer's key in the EtcdSnapshot's destination does not.
func TestRestoreDecryptsWithTheKeyItNames(t *testing.T) {
	ctx := context.Background()
	key := &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: "restore-key", Key: "age.key"}}
	h := newRestoreHarness(t, &v1alpha1.RestoreSpec{SnapshotName: "nightly", Encryption: key})
	dest := *restoreDest.DeepCopy()
	dest.Encryption = &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: "writer-recipient", Key: "r"}}
	s := &v1alpha1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: testNS},
		Spec: v1alpha1.EtcdSnapshotSpec{ClusterName: "old", Destination: dest}}
	h.g.Expect(h.c.Create(ctx, s)).To(Succeed())
	s.Status.Phase, s.Status.SHA256 = v1alpha1.SnapshotSucceeded, strings.Repeat("5", 64)
	h.g.Expect(h.c.Status().Update(ctx, s)).To(Succeed())
	h.reconcile()
	check := h.checkJob().Spec.Template.Spec
	h.g.Expect(check.Containers[0].Args).To(ContainElement("--encryption-key=restore-key/age.key"))
	h.g.Expect(check.Volumes).To(ContainElement(HaveField("VolumeSource.Secret.SecretName", "restore-key")))
	h.g.Expect(check.Volumes).NotTo(ContainElement(HaveField("VolumeSource.Secret.SecretName", "writer-recipient")))
	h.finishCheck(backup.Result{Code: backup.CodeOK, Metadata: encryptedMetadata()})
	h.reconcile()
	seeds := h.seedMembers()
	h.g.Expect(seeds).To(HaveLen(1))
	r := seeds[0].Spec.Restore
	h.g.Expect(r.Encryption).To(Equal(v1alpha1.EncryptionAge))
	h.g.Expect(r.KeyFingerprint).To(Equal(testFingerprint))
	h.g.Expect(r.EncryptionKey).To(Equal(key))
	h.g.Expect(r.Source.Encryption).To(BeNil(), "the writer's key is not the reader's")
	rf := h.cluster().Status.RestoredFrom
	h.g.Expect(rf.Encryption).To(Equal(v1alpha1.EncryptionAge))
	h.g.Expect(rf.KeyFingerprint).To(Equal(testFingerprint))
}

func TestRestoreReportsTheSeedsRefusal(t *testing.T) {
	h := newRestoreHarness(t, sourceRestore())
	h.reconcile()
	h.finishCheck(backup.Result{Code: backup.CodeOK, Metadata: goodMetadata("3.6.16")})
	h.reconcile()
	seed := h.seedMembers()[0]
	h.reconcile()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: seed.Name, Namespace: testNS, Labels: v1alpha1.MemberLabels(testName, seed.Name)}}
	h.g.Expect(h.c.Create(context.Background(), p)).To(Succeed())
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.RestoringReason))

	p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: pod.RestoreFetchContainer,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: string(backup.ResultOf(backup.ErrChecksumMismatch).Encode())}},
	}}
	h.g.Expect(h.c.Status().Update(context.Background(), p)).To(Succeed())
	h.reconcile()
	for _, c := range []string{v1alpha1.AvailableCondition, v1alpha1.ReadyCondition} {
		h.g.Expect(h.condition(c).Reason).To(Equal(v1alpha1.RestoreChecksumMismatchReason), c)
	}
	h.g.Expect(h.cluster().Status.ClusterID).To(BeEmpty(), "no seed serves")
}

func TestRestoredClusterRecordsWhenItFormed(t *testing.T) {
	h := newRestoreHarness(t, sourceRestore())
	h.reconcile()
	h.finishCheck(backup.Result{Code: backup.CodeOK, Metadata: goodMetadata("3.6.16")})
	h.reconcile()
	seed := h.seedMembers()[0]
	h.reconcile()
	h.readyPod(seed.Name)
	h.etcd.AddVoter(seed.Name, h.member(seed.Name).Spec.PeerURL, h.member(seed.Name).Spec.ClientURL)
	h.reconcile()
	cl := h.cluster()
	h.g.Expect(cl.Status.ClusterID).NotTo(BeEmpty())
	h.g.Expect(cl.Status.RestoredFrom.RestoredAt).NotTo(BeNil())
	h.g.Expect(h.checkJob()).To(BeNil(), "the check is dropped once the cluster exists")
	var jobs batchv1.JobList
	h.g.Expect(h.c.List(context.Background(), &jobs, client.InNamespace(testNS))).To(Succeed())
	h.g.Expect(jobs.Items).To(BeEmpty())
}
