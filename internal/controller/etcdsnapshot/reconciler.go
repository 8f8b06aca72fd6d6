package etcdsnapshot

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/component/backupjob"
	"github.com/quorumctl/etcd-operator/internal/component/refusal"
	"github.com/quorumctl/etcd-operator/internal/controller/ratelimit"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
	"github.com/quorumctl/etcd-operator/internal/metrics"
)

// Requeue intervals: a waiting snapshot looks again on its own, as nothing
// it owns changes when another snapshot's Job goes or the cluster recovers.
const (
	requeueWaiting = 5 * time.Second
	requeueCluster = 10 * time.Second
	requeueRunning = 30 * time.Second
)

// eventInvolvedUID is the field selector of core Events by the UID of the
// object they are about.
const eventInvolvedUID = "involvedObject.uid"

// EventRecorder is the part of the events API the controller uses.
type EventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Reconciler reconciles EtcdSnapshot objects.
type Reconciler struct {
	client.Client
	// APIReader reads past the cache: the Job's Pods (the cache holds only
	// labelled Pods) and the snapshot itself before starting its Job.
	APIReader client.Reader
	Recorder  EventRecorder
	// OperatorImage runs the Jobs.
	OperatorImage string
	// ClusterDomain builds the members' client URLs.
	ClusterDomain string
	// Credentials is which destinations the Jobs may reach with ambient
	// credentials.
	Credentials backup.CredentialsPolicy
	Now         func() time.Time
}

// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdsnapshots,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdsnapshots/status,verbs=patch
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdmembers,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=list
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile takes a snapshot once and reports it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, reterr error) {
	s := &v1alpha1.EtcdSnapshot{}
	if err := r.Get(ctx, req.NamespacedName, s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() {
		// The Job is owned and goes with it; the stored object stays: only
		// a schedule's pruning deletes what a snapshot stored.
		return ctrl.Result{}, nil
	}
	if s.Status.Phase.Terminal() {
		return ctrl.Result{}, r.releaseLock(ctx, s)
	}
	before := s.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, before, s); err != nil {
			reterr = errors.Join(reterr, err)
		}
	}()
	key := backup.KeyOf(s)
	s.Status.Key, s.Status.Location = key, backup.Location(s.Spec.Destination, key)
	if s.Status.Phase == "" {
		setPhase(s, v1alpha1.SnapshotPending, v1alpha1.SnapshotPendingReason, "waiting to start")
	}
	if d := r.Credentials.Decide(s.Spec.Destination); d.Refused() && s.Status.Phase != v1alpha1.SnapshotRunning {
		// Refused before anything waits or starts: no Job is created, so
		// no Pod ever holds credentials the tenant did not bring. A Job
		// already running was started under the policy of its time.
		r.finish(s, v1alpha1.AmbientCredentialsRefusedReason, d.Refusal)
		return ctrl.Result{}, nil
	}

	cluster := &v1alpha1.EtcdCluster{}
	err := r.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.ClusterName}, cluster)
	switch {
	case apierrors.IsNotFound(err):
		r.finish(s, v1alpha1.ClusterNotFoundReason, fmt.Sprintf("no EtcdCluster %s in namespace %s", s.Spec.ClusterName, s.Namespace))
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("failed to get EtcdCluster %s: %w", s.Spec.ClusterName, err)
	}

	job := &batchv1.Job{}
	err = r.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: backupjob.SnapshotJobName(cluster.Name)}, job)
	switch {
	case err == nil && metav1.IsControlledBy(job, s):
		return r.observe(ctx, s, job)
	case err == nil:
		setPhase(s, v1alpha1.SnapshotPending, v1alpha1.WaitingForTurnReason,
			fmt.Sprintf("another snapshot of %s is running (Job %s); snapshots of a cluster run one at a time", cluster.Name, job.Name))
		return ctrl.Result{RequeueAfter: requeueWaiting}, nil
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("failed to get Job %s: %w", backupjob.SnapshotJobName(cluster.Name), err)
	}
	if s.Status.Phase == v1alpha1.SnapshotRunning {
		// The Job went before its result was read (deleted by hand), or
		// this pass reads a cache that is behind: lostJob tells which.
		return r.lostJob(ctx, s)
	}
	return r.start(ctx, s, cluster)
}

// start creates the Job, once the cluster can be snapshotted and this is
// the oldest waiting snapshot of it.
func (r *Reconciler) start(ctx context.Context, s *v1alpha1.EtcdSnapshot, cluster *v1alpha1.EtcdCluster) (ctrl.Result, error) {
	if !cluster.ClusterFormed() || !meta.IsStatusConditionTrue(cluster.Status.Conditions, v1alpha1.AvailableCondition) {
		setPhase(s, v1alpha1.SnapshotPending, v1alpha1.ClusterNotReadyReason,
			fmt.Sprintf("cluster %s has not formed or has no quorum; the snapshot waits for it", cluster.Name))
		return ctrl.Result{RequeueAfter: requeueCluster}, nil
	}
	if ahead, err := r.olderWaiting(ctx, s); err != nil || ahead != "" {
		if ahead != "" {
			setPhase(s, v1alpha1.SnapshotPending, v1alpha1.WaitingForTurnReason,
				fmt.Sprintf("snapshot %s of %s is older and goes first", ahead, cluster.Name))
		}
		return ctrl.Result{RequeueAfter: requeueWaiting}, err
	}
	// The cache may still show a phase this snapshot has left; a Job
	// started from it would only fail, on the object it already stored.
	live := &v1alpha1.EtcdSnapshot{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s), live); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if live.Status.Phase.Terminal() || live.Status.Phase == v1alpha1.SnapshotRunning {
		return ctrl.Result{RequeueAfter: requeueWaiting}, nil
	}
	shape, endpoints, err := r.endpoints(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(endpoints) == 0 {
		setPhase(s, v1alpha1.SnapshotPending, v1alpha1.ClusterNotReadyReason, "no member of the cluster is running")
		return ctrl.Result{RequeueAfter: requeueCluster}, nil
	}
	if r.OperatorImage == "" {
		r.finish(s, v1alpha1.JobFailedReason, "the operator was started without --operator-image, which runs snapshot Jobs")
		return ctrl.Result{}, nil
	}
	job := backupjob.Snapshot(s, cluster, shape, endpoints, backup.KeyOf(s), r.OperatorImage, r.Credentials.Decide(s.Spec.Destination).Ambient)
	if err := r.Create(ctx, job, client.FieldOwner(v1alpha1.FieldOwner)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			setPhase(s, v1alpha1.SnapshotPending, v1alpha1.WaitingForTurnReason, "another snapshot of "+cluster.Name+" started first")
			return ctrl.Result{RequeueAfter: requeueWaiting}, nil
		}
		if msg, refused := refusal.Of(err); refused {
			// The Job's Pod template is validated with the Job: the Pod
			// would be refused too, and a snapshot is taken once.
			r.finish(s, v1alpha1.SnapshotPodCreateFailedReason, "the API server refused the snapshot Job "+job.Name+": "+msg)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to create Job %s: %w", job.Name, err)
	}
	now := metav1.NewTime(r.now())
	s.Status.StartedAt = &now
	setPhase(s, v1alpha1.SnapshotRunning, v1alpha1.SnapshotRunningReason, "Job "+job.Name+" is streaming the snapshot to "+s.Status.Location)
	r.event(s, corev1.EventTypeNormal, "SnapshotStarted", "Snapshot", "Job %s is taking the snapshot to %s", job.Name, s.Status.Location)
	return ctrl.Result{RequeueAfter: requeueRunning}, nil
}

// olderWaiting names a snapshot of the same cluster that is not done and
// was created earlier (names break ties), or "" if this one is first.
func (r *Reconciler) olderWaiting(ctx context.Context, s *v1alpha1.EtcdSnapshot) (string, error) {
	var list v1alpha1.EtcdSnapshotList
	if err := r.List(ctx, &list, client.InNamespace(s.Namespace)); err != nil {
		return "", fmt.Errorf("failed to list EtcdSnapshots: %w", err)
	}
	var waiting []v1alpha1.EtcdSnapshot
	for _, o := range list.Items {
		if o.Spec.ClusterName == s.Spec.ClusterName && !o.Status.Phase.Terminal() && o.DeletionTimestamp.IsZero() {
			waiting = append(waiting, o)
		}
	}
	sort.Slice(waiting, func(i, j int) bool {
		a, b := waiting[i], waiting[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	if len(waiting) > 0 && waiting[0].Name != s.Name {
		return waiting[0].Name, nil
	}
	return "", nil
}

// endpoints are the client URLs of the cluster's members that have a Pod,
// with the scheme the operator dials them with: https once every one of
// them serves TLS (etcdaccess decides for the Job as for the operator).
func (r *Reconciler) endpoints(ctx context.Context, c *v1alpha1.EtcdCluster) (etcdaccess.Shape, []string, error) {
	var list v1alpha1.EtcdMemberList
	if err := r.List(ctx, &list, client.InNamespace(c.Namespace), client.MatchingLabels{v1alpha1.ClusterLabel: c.Name}); err != nil {
		return etcdaccess.Shape{}, nil, fmt.Errorf("failed to list EtcdMembers of %s: %w", c.Name, err)
	}
	var members []*v1alpha1.EtcdMember
	for i := range list.Items {
		m := &list.Items[i]
		if m.Pending() || m.Spec.Dormant || !m.DeletionTimestamp.IsZero() || !metav1.IsControlledBy(m, c) {
			continue
		}
		members = append(members, m)
	}
	shape := etcdaccess.ShapeOf(c, members)
	var out []string
	for _, m := range members {
		out = append(out, shape.URL(m.ClientURLIn(r.ClusterDomain)))
	}
	sort.Strings(out)
	return shape, out, nil
}

// observe follows the snapshot's Job and records its result once it ends.
func (r *Reconciler) observe(ctx context.Context, s *v1alpha1.EtcdSnapshot, job *batchv1.Job) (ctrl.Result, error) {
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)}); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to list the Pods of Job %s: %w", job.Name, err)
	}
	o := backupjob.Observe(job, pods.Items)
	refused := r.podRefused(ctx, job, pods.Items, o)
	switch {
	case o.Result.Code == backup.CodeOK && o.Result.Metadata != nil:
		now := metav1.NewTime(r.now())
		succeed(s, o.Result.Metadata, now)
		took := o.Result.Metadata.CompletedAt.Sub(o.Result.Metadata.StartedAt)
		if s.Status.StartedAt != nil {
			took = o.Result.Metadata.CompletedAt.Sub(s.Status.StartedAt.Time)
		}
		metrics.SnapshotSucceeded(s.Namespace, s.Spec.ClusterName, o.Result.Metadata.CompletedAt, o.Result.Metadata.SizeBytes, took)
		r.event(s, corev1.EventTypeNormal, "SnapshotSucceeded", "Snapshot",
			"Snapshot at revision %d stored at %s (%d bytes)", s.Status.Revision, s.Status.Location, s.Status.SizeBytes)
	case o.Result.Code != "":
		r.finish(s, backup.SnapshotReason(o.Result.Code), o.Result.Message)
	case refused != "":
		r.finish(s, v1alpha1.SnapshotPodCreateFailedReason, "the API server refused the snapshot Job's Pod: "+refused)
	case o.Stuck != "":
		r.finish(s, v1alpha1.JobFailedReason, "the snapshot Pod cannot start: "+o.Stuck)
	case o.Done:
		r.finish(s, v1alpha1.JobFailedReason, "the snapshot Job ended without a result: "+o.NoResult)
	case len(pods.Items) == 0:
		// Nothing the controller watches changes when the Job controller
		// fails to create the Pod: look again soon.
		setPhase(s, v1alpha1.SnapshotRunning, v1alpha1.SnapshotRunningReason, "Job "+job.Name+" is streaming the snapshot to "+s.Status.Location)
		return ctrl.Result{RequeueAfter: requeueWaiting}, nil
	default:
		setPhase(s, v1alpha1.SnapshotRunning, v1alpha1.SnapshotRunningReason, "Job "+job.Name+" is streaming the snapshot to "+s.Status.Location)
		return ctrl.Result{RequeueAfter: requeueRunning}, nil
	}
	// The Job goes once its result is in the status: the status patch
	// brings the next pass, which finds the phase terminal (releaseLock).
	return ctrl.Result{}, nil
}

// podRefused reads the Events about a Job that has no Pod and no result,
// for the API server's refusal of its Pod (see backupjob.PodRefused). Best
// effort: Events that cannot be read (an operator installed without the
// permission to list them) leave the snapshot to its Job's deadline, as
// before, rather than stopping it from being followed.
func (r *Reconciler) podRefused(ctx context.Context, job *batchv1.Job, pods []corev1.Pod, o backupjob.Outcome) string {
	if len(pods) > 0 || o.Result.Code != "" {
		return ""
	}
	var events corev1.EventList
	if err := r.APIReader.List(ctx, &events, client.InNamespace(job.Namespace),
		client.MatchingFields{eventInvolvedUID: string(job.UID)}); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Could not read the Events of the snapshot Job", "job", job.Name, "error", err.Error())
		return ""
	}
	return backupjob.PodRefused(job, pods, events.Items)
}

// lostJob handles a running snapshot whose Job the cache does not show.
// Live reads decide: the cache may be from before the Job was created (the
// status patch that follows the create wakes the next pass, often before
// the Job informer has caught up), or from before the result was recorded.
func (r *Reconciler) lostJob(ctx context.Context, s *v1alpha1.EtcdSnapshot) (ctrl.Result, error) {
	job := &batchv1.Job{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: backupjob.SnapshotJobName(s.Spec.ClusterName)}, job)
	switch {
	case err == nil && metav1.IsControlledBy(job, s):
		return r.observe(ctx, s, job)
	case err != nil && !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("failed to get Job %s: %w", backupjob.SnapshotJobName(s.Spec.ClusterName), err)
	}
	live := &v1alpha1.EtcdSnapshot{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s), live); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if live.Status.Phase.Terminal() {
		return ctrl.Result{RequeueAfter: requeueWaiting}, nil
	}
	r.finish(s, v1alpha1.JobFailedReason, "the snapshot Job was deleted before it reported a result")
	return ctrl.Result{}, nil
}

// finish fails the snapshot.
func (r *Reconciler) finish(s *v1alpha1.EtcdSnapshot, reason, message string) {
	fail(s, reason, message, metav1.NewTime(r.now()))
	metrics.SnapshotFailed(s.Namespace, s.Spec.ClusterName, reason)
	r.event(s, corev1.EventTypeWarning, reason, "Snapshot", "Snapshot failed: %s", message)
}

// releaseLock deletes a finished snapshot's Job, which frees the cluster
// for the next snapshot.
func (r *Reconciler) releaseLock(ctx context.Context, s *v1alpha1.EtcdSnapshot) error {
	job := &batchv1.Job{}
	err := r.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: backupjob.SnapshotJobName(s.Spec.ClusterName)}, job)
	if apierrors.IsNotFound(err) || (err == nil && !metav1.IsControlledBy(job, s)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to get Job %s: %w", job.Name, err)
	}
	if err := r.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to delete Job %s: %w", job.Name, err)
	}
	return nil
}

func (r *Reconciler) patchStatus(ctx context.Context, before, after *v1alpha1.EtcdSnapshot) error {
	if equality.Semantic.DeepEqual(before.Status, after.Status) {
		return nil
	}
	// A pass that read a stale snapshot must not overwrite a result a
	// newer pass recorded.
	patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	if err := r.Status().Patch(ctx, after, patch); err != nil {
		return fmt.Errorf("failed to patch status of EtcdSnapshot %s: %w", after.Name, err)
	}
	return nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) event(obj runtime.Object, eventType, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, eventType, reason, action, format, args...)
	}
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.EtcdSnapshot{}).
		Owns(&batchv1.Job{}).
		Named("etcdsnapshot").
		WithOptions(controller.Options{RateLimiter: ratelimit.Capped()}).
		Complete(r)
}
