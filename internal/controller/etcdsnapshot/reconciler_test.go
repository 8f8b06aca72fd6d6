package etcdsnapshot

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/component/backupjob"
)

const ns = "prod"

type harness struct {
	t      *testing.T
	g      *WithT
	c      client.Client
	r      *Reconciler
	now    time.Time
	events *events.FakeRecorder
}

func newHarness(t *testing.T) *harness {
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = batchv1.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	c := fakeclient.NewClientBuilder().WithScheme(scheme).
		WithStatusSubresource(&v1alpha1.EtcdSnapshot{}, &v1alpha1.EtcdCluster{}).
		WithIndex(&corev1.Event{}, eventInvolvedUID, func(o client.Object) []string {
			return []string{string(o.(*corev1.Event).InvolvedObject.UID)}
		}).Build()
	h := &harness{t: t, g: NewWithT(t), c: c, now: time.Unix(1_800_000_000, 0), events: events.NewFakeRecorder(100)}
	h.r = &Reconciler{Client: c, APIReader: c, Recorder: h.events, OperatorImage: "op:v1", ClusterDomain: "cluster.local",
		Now: func() time.Time { return h.now }}
	return h
}

func (h *harness) cluster(available bool) *v1alpha1.EtcdCluster {
	return h.clusterWith(available, func(string) *v1alpha1.MemberTLS { return nil })
}

// clusterWith makes a cluster with each member's TLS shape (a member with client TLS records an https client URL, as the
// cluster controller does).
func (h *harness) clusterWith(available bool, memberTLS func(name string) *v1alpha1.MemberTLS) *v1alpha1.EtcdCluster {
	ctx := context.Background()
	c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: ns, UID: "cluster-uid"}}
	if memberTLS("main-aaaaa") != nil {
		c.Spec.TLS = &v1alpha1.TLSSpec{}
	}
	h.g.Expect(h.c.Create(ctx, c)).To(Succeed())
	c.Status.ClusterID = "cdf818194e3a8c32"
	status := metav1.ConditionFalse
	if available {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: v1alpha1.AvailableCondition, Status: status, Reason: "X"})
	h.g.Expect(h.c.Status().Update(ctx, c)).To(Succeed())
	for _, name := range []string{"main-aaaaa", "main-bbbbb"} {
		m := &v1alpha1.EtcdMember{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{v1alpha1.ClusterLabel: "main"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "etcd.quorumctl.io/v1alpha1", Kind: "EtcdCluster", Name: "main", UID: c.UID, Controller: ptr.To(true)}}},
			Spec: v1alpha1.EtcdMemberSpec{ClusterName: "main", InitialCluster: "x", ClientURL: "http://" + name + ".main.prod.svc.cluster.local:2379",
				TLS: memberTLS(name)},
		}
		if m.Spec.TLS != nil && m.Spec.TLS.Client != nil {
			m.Spec.ClientURL = "https://" + name + ".main.prod.svc.cluster.local:2379"
		}
		h.g.Expect(h.c.Create(ctx, m)).To(Succeed())
	}
	return c
}

func (h *harness) snapshot(name string, age time.Duration) {
	s := &v1alpha1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(h.now.Add(-age))},
		Spec: v1alpha1.EtcdSnapshotSpec{ClusterName: "main", Destination: v1alpha1.SnapshotDestination{
			S3: &v1alpha1.S3Destination{Endpoint: "http://s3:7070", Bucket: "backups", CredentialsSecretName: "creds"},
		}},
	}
	h.g.Expect(h.c.Create(context.Background(), s)).To(Succeed())
}

func (h *harness) reconcile(name string) ctrl.Result {
	h.t.Helper()
	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	h.g.Expect(err).NotTo(HaveOccurred())
	return res
}

func (h *harness) get(name string) *v1alpha1.EtcdSnapshot {
	s := &v1alpha1.EtcdSnapshot{}
	h.g.Expect(h.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, s)).To(Succeed())
	return s
}

func (h *harness) condition(name string) *metav1.Condition {
	return meta.FindStatusCondition(h.get(name).Status.Conditions, v1alpha1.SnapshotSucceededCondition)
}

func (h *harness) job() *batchv1.Job {
	j := &batchv1.Job{}
	err := h.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: backupjob.SnapshotJobName("main")}, j)
	if apierrors.IsNotFound(err) {
		return nil
	}
	h.g.Expect(err).NotTo(HaveOccurred())
	return j
}

// finishJob makes the Job's Pod end with result, as the agent would.
func (h *harness) finishJob(result backup.Result, exit int32) {
	ctx := context.Background()
	j := h.job()
	h.g.Expect(j).NotTo(BeNil())
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-x", Namespace: ns, Labels: map[string]string{batchv1.ControllerUidLabel: string(j.UID)}}}
	h.g.Expect(h.c.Create(ctx, pod)).To(Succeed())
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: backupjob.ContainerName, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: string(result.Encode())}}}}
	h.g.Expect(h.c.Status().Update(ctx, pod)).To(Succeed())
	cond := batchv1.JobComplete
	if exit != 0 {
		cond = batchv1.JobFailed
	}
	j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, Reason: "Done"}}
	h.g.Expect(h.c.Status().Update(ctx, j)).To(Succeed())
}

// The snapshot Job reaches a TLS cluster as the operator does: https with
// the operator's client certificate and the client trust bundle.
func TestSnapshotJobDialsWithTheClustersTLS(t *testing.T) {
	tlsOf := func(mutual bool) func(string) *v1alpha1.MemberTLS {
		return func(string) *v1alpha1.MemberTLS {
			return &v1alpha1.MemberTLS{Peer: &v1alpha1.MemberTLSEndpoint{TrustBundle: "p"}, Client: &v1alpha1.MemberTLSEndpoint{TrustBundle: "c", ClientCertAuth: mutual}}
		}
	}
	cases := []struct {
		name      string
		memberTLS func(string) *v1alpha1.MemberTLS
		scheme    string
		cert      bool
	}{
		{"plaintext", func(string) *v1alpha1.MemberTLS { return nil }, "http", false},
		{"mutual TLS", tlsOf(true), "https", true},
		{"server TLS only", tlsOf(false), "https", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.clusterWith(true, tc.memberTLS)
			h.snapshot("nightly", 0)
			h.reconcile("nightly")
			j := h.job()
			h.g.Expect(j).NotTo(BeNil())
			ctr := j.Spec.Template.Spec.Containers[0]
			h.g.Expect(ctr.Args).To(ContainElement(fmt.Sprintf(
				"--endpoints=%[1]s://main-aaaaa.main.prod.svc.cluster.local:2379,%[1]s://main-bbbbb.main.prod.svc.cluster.local:2379", tc.scheme)))
			mounted := false
			for _, v := range j.Spec.Template.Spec.Volumes {
				if v.Secret != nil && v.Secret.SecretName == v1alpha1.OperatorClientSecretName("main") {
					mounted = true
				}
			}
			h.g.Expect(mounted).To(Equal(tc.cert), "the operator's client certificate")
		})
	}
}

func TestSnapshotRunsAndRecordsItsResult(t *testing.T) {
	h := newHarness(t)
	h.cluster(true)
	h.snapshot("nightly", 0)
	h.reconcile("nightly")

	s := h.get("nightly")
	h.g.Expect(s.Status.Phase).To(Equal(v1alpha1.SnapshotRunning))
	h.g.Expect(s.Status.Key).To(Equal("prod/main/nightly.db"))
	h.g.Expect(s.Status.Location).To(Equal("s3://backups/prod/main/nightly.db"))
	h.g.Expect(s.Status.StartedAt).NotTo(BeNil())
	j := h.job()
	h.g.Expect(j).NotTo(BeNil())
	h.g.Expect(metav1.IsControlledBy(j, s)).To(BeTrue())
	h.g.Expect(j.Spec.Template.Spec.Containers[0].Args).To(ContainElement(
		"--endpoints=http://main-aaaaa.main.prod.svc.cluster.local:2379,http://main-bbbbb.main.prod.svc.cluster.local:2379"))

	meta := &backup.Metadata{Format: backup.MetadataFormatPlain, Revision: 4711, SizeBytes: 8224, SHA256: strings.Repeat("a", 64),
		EtcdVersion: "3.6.16", ClusterID: "cdf818194e3a8c32", MemberID: "8e9e05c52164694d",
		StartedAt: h.now, CompletedAt: h.now.Add(3 * time.Second)}
	h.finishJob(backup.Result{Code: backup.CodeOK, Metadata: meta}, 0)
	h.now = h.now.Add(5 * time.Second)
	h.reconcile("nightly")
	s = h.get("nightly")
	h.g.Expect(s.Status.Phase).To(Equal(v1alpha1.SnapshotSucceeded))
	h.g.Expect(s.Status.Revision).To(Equal(int64(4711)))
	h.g.Expect(s.Status.SizeBytes).To(Equal(int64(8224)))
	h.g.Expect(s.Status.SHA256).To(Equal(meta.SHA256))
	h.g.Expect(s.Status.Compression).To(Equal(v1alpha1.CompressionNone), "format 1 metadata")
	h.g.Expect(s.Status.EtcdVersion).To(Equal("3.6.16"))
	h.g.Expect(s.Status.ClusterID).To(Equal("cdf818194e3a8c32"))
	h.g.Expect(s.Status.CompletedAt).NotTo(BeNil())
	h.g.Expect(h.condition("nightly").Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(h.condition("nightly").Reason).To(Equal(v1alpha1.SnapshotSavedReason))

	// The next pass frees the cluster for the next snapshot.
	h.reconcile("nightly")
	h.g.Expect(h.job()).To(BeNil())
}

func TestSnapshotsOfOneClusterRunOneAtATimeOldestFirst(t *testing.T) {
	h := newHarness(t)
	h.cluster(true)
	h.snapshot("older", time.Minute)
	h.snapshot("newer", 0)

	h.reconcile("newer")
	h.g.Expect(h.job()).To(BeNil(), "the newer snapshot waits for the older one")
	h.g.Expect(h.condition("newer").Reason).To(Equal(v1alpha1.WaitingForTurnReason))

	h.reconcile("older")
	h.g.Expect(h.get("older").Status.Phase).To(Equal(v1alpha1.SnapshotRunning))
	h.reconcile("newer")
	h.g.Expect(h.condition("newer").Reason).To(Equal(v1alpha1.WaitingForTurnReason))
	h.g.Expect(metav1.IsControlledBy(h.job(), h.get("older"))).To(BeTrue(), "one Job for the cluster, the older one's")

	h.finishJob(backup.ResultOf(backup.ErrCredentials), 1)
	h.reconcile("older")
	h.g.Expect(h.get("older").Status.Phase).To(Equal(v1alpha1.SnapshotFailed))
	h.g.Expect(h.condition("older").Reason).To(Equal(v1alpha1.CredentialsInvalidReason))
	h.reconcile("newer")
	h.g.Expect(h.get("newer").Status.Phase).To(Equal(v1alpha1.SnapshotPending), "the older one's Job is still there")
	h.reconcile("older")
	h.reconcile("newer")
	h.g.Expect(h.get("newer").Status.Phase).To(Equal(v1alpha1.SnapshotRunning))
}

func TestSnapshotWaitsForItsCluster(t *testing.T) {
	h := newHarness(t)
	h.cluster(false)
	h.snapshot("s", 0)
	res := h.reconcile("s")
	h.g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
	h.g.Expect(h.get("s").Status.Phase).To(Equal(v1alpha1.SnapshotPending))
	h.g.Expect(h.condition("s").Reason).To(Equal(v1alpha1.ClusterNotReadyReason))
	h.g.Expect(h.job()).To(BeNil())
}

func TestSnapshotOfAMissingCluster(t *testing.T) {
	h := newHarness(t)
	h.snapshot("s", 0)
	h.reconcile("s")
	h.g.Expect(h.get("s").Status.Phase).To(Equal(v1alpha1.SnapshotFailed))
	h.g.Expect(h.condition("s").Reason).To(Equal(v1alpha1.ClusterNotFoundReason))
	h.g.Expect(h.condition("s").Status).To(Equal(metav1.ConditionFalse))
}

func TestAJobWithoutAResultFailsTheSnapshot(t *testing.T) {
	h := newHarness(t)
	h.cluster(true)
	h.snapshot("s", 0)
	h.reconcile("s")
	j := h.job()
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", Message: "too slow"}}
	h.g.Expect(h.c.Status().Update(context.Background(), j)).To(Succeed())
	h.reconcile("s")
	h.g.Expect(h.condition("s").Reason).To(Equal(v1alpha1.JobFailedReason))
	h.g.Expect(h.condition("s").Message).To(ContainSubstring("DeadlineExceeded"))
}

func TestAJobDeletedBeforeItsResultFailsTheSnapshot(t *testing.T) {
	h := newHarness(t)
	h.cluster(true)
	h.snapshot("s", 0)
	h.reconcile("s")
	h.g.Expect(h.c.Delete(context.Background(), h.job())).To(Succeed())
	h.reconcile("s")
	h.g.Expect(h.get("s").Status.Phase).To(Equal(v1alpha1.SnapshotFailed))
	h.g.Expect(h.job()).To(BeNil(), "a lost Job is not started again: its object may be stored already")
}

// laggingJobs is a cache whose Job informer has not caught up: it shows no
// Job at all, while the API server (the harness's APIReader) has it.
type laggingJobs struct{ client.Client }

func (c laggingJobs) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*batchv1.Job); ok {
		return apierrors.NewNotFound(batchv1.Resource("jobs"), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// The pass after the Job's create is woken by the status patch, often
// before the Job reaches the cache: CI saw a scheduled snapshot fail with
// "deleted before it reported a result" six seconds after it started.
func TestACacheBehindTheJobsCreateDoesNotFailTheSnapshot(t *testing.T) {
	h := newHarness(t)
	h.cluster(true)
	h.snapshot("s", 0)
	h.reconcile("s")
	h.g.Expect(h.get("s").Status.Phase).To(Equal(v1alpha1.SnapshotRunning))
	h.r.Client = laggingJobs{h.c}

	h.reconcile("s")
	h.g.Expect(h.get("s").Status.Phase).To(Equal(v1alpha1.SnapshotRunning), "%+v", h.condition("s"))
	h.g.Expect(h.job()).NotTo(BeNil())

	// The result is read through the live Job while the cache still lags.
	h.finishJob(backup.Result{Code: backup.CodeOK, Metadata: &backup.Metadata{Format: backup.MetadataFormatCompressed,
		Compression: v1alpha1.CompressionZstd, Revision: 7, SizeBytes: 42, SHA256: strings.Repeat("b", 64), EtcdVersion: "3.6.16",
		ClusterID: "cdf818194e3a8c32", MemberID: "8e9e05c52164694d", StartedAt: h.now, CompletedAt: h.now.Add(time.Second)}}, 0)
	h.reconcile("s")
	h.g.Expect(h.get("s").Status.Phase).To(Equal(v1alpha1.SnapshotSucceeded), "%+v", h.condition("s"))
	h.g.Expect(h.get("s").Status.Compression).To(Equal(v1alpha1.CompressionZstd), "as the metadata recorded")
}
