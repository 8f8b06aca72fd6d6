package etcdsnapshotschedule

import (
	"context"
	"sort"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/component/backupjob"
)

const ns = "prod"

type harness struct {
	t   *testing.T
	g   *WithT
	c   client.Client
	r   *Reconciler
	now time.Time
}

// t0 is a round minute.
var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func newHarness(t *testing.T) *harness {
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = batchv1.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	c := fakeclient.NewClientBuilder().WithScheme(scheme).
		WithStatusSubresource(&v1alpha1.EtcdSnapshot{}, &v1alpha1.EtcdSnapshotSchedule{}).Build()
	h := &harness{t: t, g: NewWithT(t), c: c, now: t0.Add(10 * time.Second)}
	h.r = &Reconciler{Client: c, APIReader: c, Recorder: events.NewFakeRecorder(100), OperatorImage: "op:v1",
		Now: func() time.Time { return h.now }}
	return h
}

func (h *harness) schedule(mutate func(*v1alpha1.EtcdSnapshotSchedule)) {
	s := &v1alpha1.EtcdSnapshotSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "every-minute", Namespace: ns, UID: "sched-uid", CreationTimestamp: metav1.NewTime(t0)},
		Spec: v1alpha1.EtcdSnapshotScheduleSpec{
			ClusterName: "main", Schedule: "*/1 * * * *",
			Destination: v1alpha1.SnapshotDestination{S3: &v1alpha1.S3Destination{Bucket: "backups", CredentialsSecretName: "creds"}},
			Retention:   &v1alpha1.SnapshotRetention{KeepLast: ptr.To[int32](2)},
		},
	}
	if mutate != nil {
		mutate(s)
	}
	h.g.Expect(h.c.Create(context.Background(), s)).To(Succeed())
}

func (h *harness) reconcile() ctrl.Result {
	h.t.Helper()
	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "every-minute"}})
	h.g.Expect(err).NotTo(HaveOccurred())
	return res
}

func (h *harness) get() *v1alpha1.EtcdSnapshotSchedule {
	s := &v1alpha1.EtcdSnapshotSchedule{}
	h.g.Expect(h.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "every-minute"}, s)).To(Succeed())
	return s
}

func (h *harness) snapshots() []v1alpha1.EtcdSnapshot {
	var list v1alpha1.EtcdSnapshotList
	h.g.Expect(h.c.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// complete finishes a snapshot as the etcdsnapshot controller would.
func (h *harness) complete(name string, phase v1alpha1.SnapshotPhase) {
	s := &v1alpha1.EtcdSnapshot{}
	h.g.Expect(h.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, s)).To(Succeed())
	s.Status.Phase = phase
	s.Status.Key = "prod/main/" + name + ".db"
	s.Status.CompletedAt = &metav1.Time{Time: h.now}
	h.g.Expect(h.c.Status().Update(context.Background(), s)).To(Succeed())
}

func (h *harness) condition(t string) *metav1.Condition {
	return meta.FindStatusCondition(h.get().Status.Conditions, t)
}

func TestCreatesOneSnapshotPerTick(t *testing.T) {
	h := newHarness(t)
	h.schedule(nil)
	res := h.reconcile()
	h.g.Expect(h.snapshots()).To(BeEmpty(), "no tick has passed since the schedule was created")
	h.g.Expect(res.RequeueAfter).To(BeNumerically("~", 50*time.Second, time.Second), "woken at the next tick")

	h.now = t0.Add(time.Minute + time.Second)
	h.reconcile()
	snaps := h.snapshots()
	h.g.Expect(snaps).To(HaveLen(1))
	s := snaps[0]
	h.g.Expect(s.Name).To(Equal(tickName(1)))
	h.g.Expect(s.Spec.ClusterName).To(Equal("main"))
	h.g.Expect(s.Labels).To(HaveKeyWithValue(v1alpha1.ScheduleLabel, "every-minute"))
	h.g.Expect(metav1.IsControlledBy(&s, h.get())).To(BeTrue())
	h.g.Expect(h.get().Status.LastScheduleTime.Time).To(BeTemporally("==", t0.Add(time.Minute)))
	h.g.Expect(h.condition(v1alpha1.ScheduledCondition).Reason).To(Equal(v1alpha1.ScheduleActiveReason))

	// Repeating the pass creates nothing more.
	h.reconcile()
	h.g.Expect(h.snapshots()).To(HaveLen(1))
}

func TestBacklogIsOneSnapshot(t *testing.T) {
	h := newHarness(t)
	h.schedule(nil)
	h.now = t0.Add(time.Hour + 30*time.Second)
	h.reconcile()
	h.g.Expect(h.snapshots()).To(HaveLen(1), "an hour of missed ticks is one snapshot")
	h.g.Expect(h.get().Status.LastScheduleTime.Time).To(BeTemporally("==", t0.Add(time.Hour)), "for the latest tick")
}

func TestNoNewSnapshotWhileOneRuns(t *testing.T) {
	h := newHarness(t)
	h.schedule(nil)
	h.now = t0.Add(time.Minute + time.Second)
	h.reconcile()
	first := h.snapshots()[0].Name

	h.now = t0.Add(3*time.Minute + time.Second)
	h.reconcile()
	h.g.Expect(h.snapshots()).To(HaveLen(1), "the first is still running")

	h.complete(first, v1alpha1.SnapshotSucceeded)
	h.reconcile()
	snaps := h.snapshots()
	h.g.Expect(snaps).To(HaveLen(2), "one for the two ticks held back")
	h.g.Expect(h.get().Status.LastScheduleTime.Time).To(BeTemporally("==", t0.Add(3*time.Minute)))
	h.g.Expect(h.get().Status.LastSuccessfulTime).NotTo(BeNil())
}

func TestSuspendedAndInvalidSchedules(t *testing.T) {
	h := newHarness(t)
	h.schedule(func(s *v1alpha1.EtcdSnapshotSchedule) { s.Spec.Suspend = true })
	h.now = t0.Add(10 * time.Minute)
	h.reconcile()
	h.g.Expect(h.snapshots()).To(BeEmpty())
	h.g.Expect(h.condition(v1alpha1.ScheduledCondition).Reason).To(Equal(v1alpha1.ScheduleSuspendedReason))

	s := h.get()
	s.Spec.Suspend = false
	s.Spec.Schedule = "every now and then"
	h.g.Expect(h.c.Update(context.Background(), s)).To(Succeed())
	h.reconcile()
	h.g.Expect(h.snapshots()).To(BeEmpty())
	c := h.condition(v1alpha1.ScheduledCondition)
	h.g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	h.g.Expect(c.Reason).To(Equal(v1alpha1.InvalidScheduleReason))
}

// TestKeepLastTwoAfterThreeRuns is the acceptance scenario at unit scale:
// three successful runs with keepLast 2 leave two snapshots, the oldest's
// objects deleted by a prune Job before its EtcdSnapshot goes.
func TestKeepLastTwoAfterThreeRuns(t *testing.T) {
	h := newHarness(t)
	h.schedule(nil)
	for i := 1; i <= 3; i++ {
		h.now = t0.Add(time.Duration(i)*time.Minute + time.Second)
		h.reconcile()
		snaps := h.snapshots()
		h.complete(snaps[len(snaps)-1].Name, v1alpha1.SnapshotSucceeded)
	}
	// Pruning goes on while suspended; no new tick gets in the way below.
	s := h.get()
	s.Spec.Suspend = true
	h.g.Expect(h.c.Update(context.Background(), s)).To(Succeed())
	// Whoever may write EtcdSnapshot status points the oldest's key at
	// someone else's objects: the prune Job still deletes only its own.
	oldest := tickName(1)
	tampered := &v1alpha1.EtcdSnapshot{}
	h.g.Expect(h.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: oldest}, tampered)).To(Succeed())
	tampered.Status.Key = "other-tenant/db/nightly.db"
	h.g.Expect(h.c.Status().Update(context.Background(), tampered)).To(Succeed())
	h.reconcile()
	job := &batchv1.Job{}
	h.g.Expect(h.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: backupjob.PruneJobName(oldest)}, job)).To(Succeed())
	h.g.Expect(job.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--key=prod/main/" + oldest + ".db"))
	h.g.Expect(job.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement(ContainSubstring("other-tenant")))
	h.g.Expect(h.snapshots()).To(HaveLen(3), "the EtcdSnapshot stays until its objects are gone")
	h.g.Expect(h.condition(v1alpha1.PrunedCondition).Reason).To(Equal(v1alpha1.PruningReason))

	// The prune Job fails: the snapshot is kept, and the failure reported.
	h.finish(job, backup.ResultOf(backup.ErrCredentials), batchv1.JobFailed)
	h.reconcile()
	h.g.Expect(h.snapshots()).To(HaveLen(3))
	h.g.Expect(h.condition(v1alpha1.PrunedCondition).Reason).To(Equal(v1alpha1.PruneFailedReason))
	h.now = h.now.Add(2 * pruneRetryAfter)
	h.reconcile()
	err := h.c.Get(context.Background(), client.ObjectKeyFromObject(job), &batchv1.Job{})
	h.g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a failed prune Job is retried after a while")

	h.reconcile()
	h.g.Expect(h.c.Get(context.Background(), client.ObjectKeyFromObject(job), job)).To(Succeed())
	h.finish(job, backup.Result{Code: backup.CodeOK}, batchv1.JobComplete)
	h.reconcile()
	var names []string
	for _, s := range h.snapshots() {
		names = append(names, s.Name)
	}
	h.g.Expect(names).To(Equal([]string{tickName(2), tickName(3)}))
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.PrunedCondition).Reason).To(Equal(v1alpha1.RetentionMetReason))
}

func TestFailedSnapshotsArePrunedWithoutTouchingStorage(t *testing.T) {
	h := newHarness(t)
	h.schedule(nil)
	for i := 1; i <= 5; i++ {
		h.now = t0.Add(time.Duration(i)*time.Minute + time.Second)
		h.reconcile()
		snaps := h.snapshots()
		h.complete(snaps[len(snaps)-1].Name, v1alpha1.SnapshotFailed)
	}
	h.reconcile()
	h.g.Expect(h.snapshots()).To(HaveLen(backup.FailedHistory))
	var jobs batchv1.JobList
	h.g.Expect(h.c.List(context.Background(), &jobs)).To(Succeed())
	h.g.Expect(jobs.Items).To(BeEmpty(), "a failed snapshot stored nothing")
}

func (h *harness) finish(job *batchv1.Job, res backup.Result, cond batchv1.JobConditionType) {
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-" + string(cond), Namespace: ns,
		Labels: map[string]string{batchv1.ControllerUidLabel: string(job.UID)}}}
	h.g.Expect(h.c.Create(ctx, pod)).To(Succeed())
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: backupjob.ContainerName, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{Message: string(res.Encode())}}}}
	h.g.Expect(h.c.Status().Update(ctx, pod)).To(Succeed())
	job.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(h.now)}}
	h.g.Expect(h.c.Status().Update(ctx, job)).To(Succeed())
}

// tickName is the snapshot of the n-th minute after t0.
func tickName(n int) string {
	return "every-minute-" + strconv.FormatInt(t0.Add(time.Duration(n)*time.Minute).Unix(), 10)
}

// A schedule stored before an admission rule existed makes snapshots the API
// server refuses; the Scheduled condition says so with the server's message,
// and the tick stays due for the fixed spec.
func TestRefusedSnapshotIsReported(t *testing.T) {
	h := newHarness(t)
	refused := true
	h.r.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*v1alpha1.EtcdSnapshot); ok && refused {
			return apierrors.NewInvalid(schema.GroupKind{Group: v1alpha1.GroupVersion.Group, Kind: "EtcdSnapshot"}, obj.GetName(),
				field.ErrorList{field.Invalid(field.NewPath("spec", "destination"), "", "s3.endpoint must be https:// unless s3.insecure is true")})
		}
		return c.Create(ctx, obj, opts...)
	}})
	h.schedule(nil)
	h.reconcile()
	h.now = t0.Add(70 * time.Second)
	h.reconcile()
	h.g.Expect(h.snapshots()).To(BeEmpty())
	c := h.condition(v1alpha1.ScheduledCondition)
	h.g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	h.g.Expect(c.Reason).To(Equal(v1alpha1.SnapshotRefusedReason))
	h.g.Expect(c.Message).To(ContainSubstring("s3.endpoint must be https:// unless s3.insecure is true"))
	h.g.Expect(h.get().Status.LastScheduleTime).To(BeNil(), "the tick is still due")

	refused = false
	h.reconcile()
	h.g.Expect(h.snapshots()).To(HaveLen(1), "the tick's snapshot once the API server admits it")
	h.g.Expect(h.condition(v1alpha1.ScheduledCondition).Reason).To(Equal(v1alpha1.ScheduleActiveReason))
}
