package etcdsnapshotschedule

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/robfig/cron/v3"
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
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/component/backupjob"
	"github.com/quorumctl/etcd-operator/internal/controller/ratelimit"
	"github.com/quorumctl/etcd-operator/internal/metrics"
)

const (
	// requeueBusy re-checks a tick held back by a running snapshot, and
	// pruning in progress.
	requeueBusy = 10 * time.Second
	// requeueRefused re-tries a tick whose snapshot the API server refused,
	// in case what it refused for (a CRD rule) changes without the spec.
	requeueRefused = time.Minute
	// pruneRetryAfter is how long a failed prune Job is kept, reported,
	// before it is deleted so the next pass tries again.
	pruneRetryAfter = time.Minute
)

// EventRecorder is the part of the events API the controller uses.
type EventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Reconciler reconciles EtcdSnapshotSchedule objects.
type Reconciler struct {
	client.Client
	// APIReader reads the prune Jobs' Pods, which the cache does not hold.
	APIReader     client.Reader
	Recorder      EventRecorder
	OperatorImage string
	// Credentials is which destinations the prune Jobs may reach with
	// ambient credentials.
	Credentials backup.CredentialsPolicy
	Now         func() time.Time
}

// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdsnapshotschedules,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdsnapshotschedules/status,verbs=patch
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdsnapshotschedules/finalizers,verbs=update
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdsnapshots,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// pass is what one reconcile saw and decided.
type pass struct {
	s         *v1alpha1.EtcdSnapshotSchedule
	now       time.Time
	snapshots []v1alpha1.EtcdSnapshot
	schedule  cron.Schedule
	parseErr  error
	// refused is the API server's refusal of the tick's snapshot: the
	// schedule's spec would make an EtcdSnapshot admission refuses.
	refused error
	// pruning says what pruning did or waits for, for the Pruned condition.
	pruneReason, pruneMessage string
}

// Reconcile creates the snapshot that is due and prunes old ones.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, reterr error) {
	s := &v1alpha1.EtcdSnapshotSchedule{}
	if err := r.Get(ctx, req.NamespacedName, s); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.ForgetSchedule(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() {
		metrics.ForgetSchedule(s.Namespace, s.Name)
		return ctrl.Result{}, nil
	}
	before := s.DeepCopy()
	p := &pass{s: s, now: r.now()}
	p.schedule, p.parseErr = backup.ParseSchedule(s.Spec.Schedule)
	if err := r.listOwned(ctx, p); err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		updateStatus(p)
		if err := r.patchStatus(ctx, before, s); err != nil {
			reterr = errors.Join(reterr, err)
		}
	}()
	pruneRes, pruneErr := r.prune(ctx, p)
	schedRes, schedErr := r.schedule(ctx, p)
	return soonest(pruneRes, schedRes), errors.Join(pruneErr, schedErr)
}

func (r *Reconciler) listOwned(ctx context.Context, p *pass) error {
	var list v1alpha1.EtcdSnapshotList
	if err := r.List(ctx, &list, client.InNamespace(p.s.Namespace), client.MatchingLabels{v1alpha1.ScheduleLabel: p.s.Name}); err != nil {
		return fmt.Errorf("failed to list the EtcdSnapshots of %s: %w", p.s.Name, err)
	}
	for _, snap := range list.Items {
		if metav1.IsControlledBy(&snap, p.s) {
			p.snapshots = append(p.snapshots, snap)
		}
	}
	return nil
}

// schedule creates the snapshot of the latest tick that is due. While one
// of the schedule's own snapshots is not done, the tick waits: when that
// one ends, the latest tick by then gets one snapshot, however many passed.
func (r *Reconciler) schedule(ctx context.Context, p *pass) (ctrl.Result, error) {
	s := p.s
	if s.Spec.Suspend || p.parseErr != nil {
		return ctrl.Result{}, nil
	}
	last := s.CreationTimestamp.Time
	if s.Status.LastScheduleTime != nil {
		last = s.Status.LastScheduleTime.Time
	}
	tick := backup.Ticks(p.schedule, last, p.now)
	s.Status.NextScheduleTime = &metav1.Time{Time: tick.Next}
	untilNext := ctrl.Result{RequeueAfter: tick.Next.Sub(p.now) + 100*time.Millisecond}
	if tick.Due.IsZero() {
		return untilNext, nil
	}
	for _, snap := range p.snapshots {
		if !snap.Status.Phase.Terminal() && snap.DeletionTimestamp.IsZero() {
			return ctrl.Result{RequeueAfter: requeueBusy}, nil
		}
	}
	snap := &v1alpha1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{
			// The tick names the snapshot, so a pass that repeats the create
			// (its status write lost, or a stale cache) finds it made.
			Name:      snapshotName(s.Name, tick.Due),
			Namespace: s.Namespace,
			Labels:    map[string]string{v1alpha1.ScheduleLabel: s.Name, v1alpha1.ClusterLabel: s.Spec.ClusterName},
		},
		Spec: v1alpha1.EtcdSnapshotSpec{ClusterName: s.Spec.ClusterName, Destination: *s.Spec.Destination.DeepCopy()},
	}
	if err := controllerutil.SetControllerReference(s, snap, r.Scheme()); err != nil {
		return ctrl.Result{}, err
	}
	err := r.Create(ctx, snap, client.FieldOwner(v1alpha1.FieldOwner))
	if apierrors.IsInvalid(err) {
		// Retrying cannot help until the spec changes, which wakes the
		// schedule anyway; the tick stays due so the edit gets its snapshot.
		p.refused = err
		return ctrl.Result{RequeueAfter: requeueRefused}, nil
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, fmt.Errorf("failed to create EtcdSnapshot %s: %w", snap.Name, err)
	}
	if err == nil {
		msg := fmt.Sprintf("Created snapshot %s for the tick at %s", snap.Name, tick.Due.UTC().Format(time.RFC3339))
		if tick.Missed > 1 {
			msg += fmt.Sprintf("; it stands for %d ticks missed", tick.Missed)
		}
		r.event(s, corev1.EventTypeNormal, "SnapshotCreated", "Schedule", "%s", msg)
	}
	s.Status.LastScheduleTime = &metav1.Time{Time: tick.Due}
	s.Status.LastSnapshotName = snap.Name
	return untilNext, nil
}

// snapshotName is the schedule's name and the tick's Unix time.
func snapshotName(schedule string, tick time.Time) string {
	suffix := "-" + strconv.FormatInt(tick.Unix(), 10)
	if limit := 253 - len(suffix); len(schedule) > limit {
		schedule = schedule[:limit]
	}
	return schedule + suffix
}

// prune deletes the snapshots retention releases: a successful one's
// objects first (a Job, as only Jobs hold the credentials), then its
// EtcdSnapshot; a failed one stored nothing and goes at once.
func (r *Reconciler) prune(ctx context.Context, p *pass) (ctrl.Result, error) {
	s := p.s
	var entries []backup.Entry
	byName := map[string]*v1alpha1.EtcdSnapshot{}
	for i := range p.snapshots {
		snap := &p.snapshots[i]
		byName[snap.Name] = snap
		e := backup.Entry{Name: snap.Name, Created: snap.CreationTimestamp.Time}
		switch {
		case !snap.DeletionTimestamp.IsZero():
			continue
		case snap.Status.Phase == v1alpha1.SnapshotSucceeded:
			e.State = backup.Succeeded
		case snap.Status.Phase == v1alpha1.SnapshotFailed:
			e.State = backup.Failed
		default:
			e.State = backup.Active
		}
		if snap.Status.CompletedAt != nil {
			e.Completed = snap.Status.CompletedAt.Time
		}
		entries = append(entries, e)
	}
	var rules backup.Retention
	if ret := s.Spec.Retention; ret != nil {
		if ret.KeepLast != nil {
			rules.KeepLast = int(*ret.KeepLast)
		}
		if ret.MaxAge != nil {
			rules.MaxAge = ret.MaxAge.Duration
		}
	}
	names := backup.Prune(entries, rules, p.now)
	p.pruneReason, p.pruneMessage = v1alpha1.RetentionMetReason, "nothing to prune"
	var result ctrl.Result
	var errs []error
	for _, name := range names {
		snap := byName[name]
		res, err := r.pruneOne(ctx, p, snap)
		result = soonest(result, res)
		errs = append(errs, err)
	}
	return result, errors.Join(errs...)
}

func (r *Reconciler) pruneOne(ctx context.Context, p *pass, snap *v1alpha1.EtcdSnapshot) (ctrl.Result, error) {
	if snap.Status.Phase != v1alpha1.SnapshotSucceeded {
		return ctrl.Result{}, r.deleteSnapshot(ctx, p, snap, "failed snapshots beyond the newest "+strconv.Itoa(backup.FailedHistory))
	}
	setPruning(p, v1alpha1.PruningReason, "deleting the stored objects of "+snap.Name)
	job := &batchv1.Job{}
	err := r.Get(ctx, types.NamespacedName{Namespace: snap.Namespace, Name: backupjob.PruneJobName(snap.Name)}, job)
	switch {
	case apierrors.IsNotFound(err):
		if r.OperatorImage == "" {
			setPruning(p, v1alpha1.PruneFailedReason, "the operator was started without --operator-image, which runs prune Jobs")
			return ctrl.Result{}, nil
		}
		d := r.Credentials.Decide(snap.Spec.Destination)
		if d.Refused() {
			// Taken while the operator allowed ambient credentials for it;
			// the snapshot and its objects stay until it does again.
			setPruning(p, v1alpha1.PruneFailedReason, fmt.Sprintf("cannot delete the objects of %s (%s): %s", snap.Name,
				v1alpha1.AmbientCredentialsRefusedReason, d.Refusal))
			return ctrl.Result{RequeueAfter: pruneRetryAfter}, nil
		}
		job = backupjob.Prune(snap, backup.KeyOf(snap), r.OperatorImage, d.Ambient)
		if err := r.Create(ctx, job, client.FieldOwner(v1alpha1.FieldOwner)); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("failed to create Job %s: %w", job.Name, err)
		}
		return ctrl.Result{RequeueAfter: requeueBusy}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("failed to get Job %s: %w", backupjob.PruneJobName(snap.Name), err)
	case !metav1.IsControlledBy(job, snap):
		setPruning(p, v1alpha1.PruneFailedReason, fmt.Sprintf("Job %s exists but does not belong to snapshot %s", job.Name, snap.Name))
		return ctrl.Result{RequeueAfter: pruneRetryAfter}, nil
	}
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)}); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to list the Pods of Job %s: %w", job.Name, err)
	}
	o := backupjob.Observe(job, pods.Items)
	switch {
	case o.Result.Code == backup.CodeOK:
		// Its Job is owned by the snapshot and goes with it.
		return ctrl.Result{}, r.deleteSnapshot(ctx, p, snap, "retention")
	case o.Result.Code != "" || o.Done || o.Stuck != "":
		why := o.Result.Message
		if why == "" {
			why = o.NoResult + o.Stuck
		}
		setPruning(p, v1alpha1.PruneFailedReason, fmt.Sprintf("deleting the objects of %s failed (%s): %s; the EtcdSnapshot is kept and the deletion retried", snap.Name, o.Result.Code, why))
		if finished := jobFinished(job); !finished.IsZero() && p.now.Sub(finished) > pruneRetryAfter || o.Stuck != "" && p.now.Sub(job.CreationTimestamp.Time) > pruneRetryAfter {
			if err := r.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("failed to delete Job %s: %w", job.Name, err)
			}
		}
		return ctrl.Result{RequeueAfter: pruneRetryAfter}, nil
	}
	return ctrl.Result{RequeueAfter: requeueBusy}, nil
}

func jobFinished(j *batchv1.Job) time.Time {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

func (r *Reconciler) deleteSnapshot(ctx context.Context, p *pass, snap *v1alpha1.EtcdSnapshot, why string) error {
	if err := r.Delete(ctx, snap, client.Preconditions{UID: &snap.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to delete EtcdSnapshot %s: %w", snap.Name, err)
	}
	r.event(p.s, corev1.EventTypeNormal, "SnapshotPruned", "Prune", "Pruned snapshot %s (%s)", snap.Name, why)
	return nil
}

func setPruning(p *pass, reason, message string) {
	// A failure outranks work in progress, which outranks nothing to do.
	if p.pruneReason == v1alpha1.PruneFailedReason && reason != v1alpha1.PruneFailedReason {
		return
	}
	p.pruneReason, p.pruneMessage = reason, message
}

// updateStatus computes the status from the pass; the only place the
// conditions are set.
func updateStatus(p *pass) {
	s := p.s
	var lastSuccess *metav1.Time
	for _, snap := range p.snapshots {
		if snap.Status.Phase == v1alpha1.SnapshotSucceeded && snap.Status.CompletedAt != nil &&
			(lastSuccess == nil || snap.Status.CompletedAt.After(lastSuccess.Time)) {
			lastSuccess = snap.Status.CompletedAt.DeepCopy()
		}
	}
	if lastSuccess != nil && (s.Status.LastSuccessfulTime == nil || lastSuccess.After(s.Status.LastSuccessfulTime.Time)) {
		s.Status.LastSuccessfulTime = lastSuccess
	}
	set := func(t string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: s.Generation})
	}
	var interval time.Duration
	switch {
	case p.parseErr != nil:
		set(v1alpha1.ScheduledCondition, metav1.ConditionFalse, v1alpha1.InvalidScheduleReason, p.parseErr.Error())
		s.Status.NextScheduleTime = nil
	case s.Spec.Suspend:
		set(v1alpha1.ScheduledCondition, metav1.ConditionFalse, v1alpha1.ScheduleSuspendedReason, "spec.suspend is true; no snapshot is created")
		s.Status.NextScheduleTime = nil
	case p.refused != nil:
		interval = backup.Interval(p.schedule, p.now)
		set(v1alpha1.ScheduledCondition, metav1.ConditionFalse, v1alpha1.SnapshotRefusedReason,
			"the API server refused the snapshot of the due tick; fix the schedule's spec: "+p.refused.Error())
	default:
		interval = backup.Interval(p.schedule, p.now)
		set(v1alpha1.ScheduledCondition, metav1.ConditionTrue, v1alpha1.ScheduleActiveReason,
			fmt.Sprintf("a snapshot of %s every %s", s.Spec.ClusterName, interval))
	}
	status := metav1.ConditionTrue
	if p.pruneReason != v1alpha1.RetentionMetReason {
		status = metav1.ConditionFalse
	}
	set(v1alpha1.PrunedCondition, status, p.pruneReason, p.pruneMessage)
	s.Status.ObservedGeneration = s.Generation

	since := s.CreationTimestamp.Time
	if s.Status.LastSuccessfulTime != nil {
		since = s.Status.LastSuccessfulTime.Time
	}
	metrics.ObserveSchedule(s.Namespace, s.Name, s.Spec.ClusterName, interval, since)
}

func (r *Reconciler) patchStatus(ctx context.Context, before, after *v1alpha1.EtcdSnapshotSchedule) error {
	if equality.Semantic.DeepEqual(before.Status, after.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, after, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to patch status of EtcdSnapshotSchedule %s: %w", after.Name, err)
	}
	return nil
}

func soonest(a, b ctrl.Result) ctrl.Result {
	switch {
	case a.RequeueAfter == 0:
		return b
	case b.RequeueAfter == 0 || a.RequeueAfter < b.RequeueAfter:
		return a
	}
	return b
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

// SetupWithManager registers the controller. A snapshot that ends wakes its
// schedule, which may prune, or create the snapshot of a tick held back.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.EtcdSnapshotSchedule{}).
		Owns(&v1alpha1.EtcdSnapshot{}).
		Named("etcdsnapshotschedule").
		WithOptions(controller.Options{RateLimiter: ratelimit.Capped()}).
		Complete(r)
}
