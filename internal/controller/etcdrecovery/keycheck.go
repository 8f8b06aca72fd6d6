package etcdrecovery

import (
	"context"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/component/backupjob"
	"github.com/quorumctl/etcd-operator/internal/recovery"
)

// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=list

// keyCheckAttemptAnnotation numbers a key check Job among the checks of its
// snapshot, so that the Job that ended without a verdict is recorded in
// status.keyCheck once, however often a stale cache shows it again.
const keyCheckAttemptAnnotation = v1alpha1.ReservedPrefix + "key-check-attempt"

// eventInvolvedUID is the field selector of core Events by the UID of the
// object they are about.
const eventInvolvedUID = "involvedObject.uid"

// keyCheck reads what the recovery's key check found: nil while there is
// no Job and none has failed to run, or while the Job runs. The Job
// records the snapshot it checks, so that a result is only ever used for
// that snapshot. A Job that ended without its agent's verdict is recorded
// in er.Status.KeyCheck and deleted, to be replaced after a backoff; the
// Job returned is the one still there.
func (r *Reconciler) keyCheck(ctx context.Context, er *v1alpha1.EtcdRecovery) (*recovery.KeyCheck, *batchv1.Job, error) {
	if er.Spec.Source.Snapshot == nil || er.Spec.Source.Snapshot.Encryption == nil {
		return nil, nil, nil
	}
	job := &batchv1.Job{}
	err := r.Get(ctx, types.NamespacedName{Namespace: er.Namespace, Name: backupjob.RecoveryKeyCheckJobName(er.Name)}, job)
	switch {
	case apierrors.IsNotFound(err):
		return notRunOf(er.Status.KeyCheck, r.now()), nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("failed to get Job %s: %w", backupjob.RecoveryKeyCheckJobName(er.Name), err)
	case !metav1.IsControlledBy(job, er):
		return nil, nil, fmt.Errorf("job %s exists but does not belong to EtcdRecovery %s; delete it", job.Name, er.Name)
	}
	var pods corev1.PodList
	if err := r.reader().List(ctx, &pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)}); err != nil {
		return nil, nil, fmt.Errorf("failed to list the Pods of Job %s: %w", job.Name, err)
	}
	o := classifyKeyCheck(job, pods.Items, r.warnings(ctx, job, pods.Items))
	snapshot := job.Labels[v1alpha1.SnapshotLabel]
	check := &recovery.KeyCheck{Snapshot: snapshot}
	switch o.state {
	case checkVerdict:
		check.Code, check.Message = o.result.Code, o.result.Message
	case checkHeldUp:
		check.NotRun = o.why
	case checkNotRun:
		er.Status.KeyCheck = recordNotRun(er.Status.KeyCheck, snapshot, jobAttempt(job), o.why, r.now())
		// Its Pod, if any, holds nothing worth keeping: why it did not
		// run is in the status now.
		if err := r.dropKeyCheck(ctx, job); err != nil {
			return nil, nil, err
		}
		return notRunOf(er.Status.KeyCheck, r.now()), nil, nil
	}
	return check, job, nil
}

// startKeyCheck creates the Job that checks the recovery's key against the
// snapshot the plan chose, replacing one that checked another snapshot,
// once the backoff after a check that did not run has passed.
func (r *Reconciler) startKeyCheck(ctx context.Context, er *v1alpha1.EtcdRecovery, snapshot string, old *batchv1.Job) error {
	if old != nil {
		if old.Labels[v1alpha1.SnapshotLabel] == snapshot {
			return nil
		}
		// The latest snapshot changed while the check ran: check the new one.
		return r.dropKeyCheck(ctx, old)
	}
	attempt, start := nextKeyCheck(er.Status.KeyCheck, snapshot, r.now())
	if !start {
		return nil
	}
	snap := &v1alpha1.EtcdSnapshot{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: er.Namespace, Name: snapshot}, snap); err != nil {
		return fmt.Errorf("failed to get EtcdSnapshot %s: %w", snapshot, err)
	}
	access := r.Credentials.Decide(snap.Spec.Destination)
	job := backupjob.RecoveryKeyCheck(er, snap, backup.KeyOf(snap), r.OperatorImage, access.Ambient)
	job.Annotations = map[string]string{keyCheckAttemptAnnotation: strconv.Itoa(int(attempt))}
	if err := r.Create(ctx, job, client.FieldOwner(v1alpha1.FieldOwner)); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create Job %s: %w", job.Name, err)
	}
	return nil
}

// dropKeyCheck deletes a key check Job whose result has been used: the
// recovery is planned or refused, or the Job ended without a verdict and
// is recorded. Only that Job: a stale cache may show it after its
// replacement, of the same name, was created.
func (r *Reconciler) dropKeyCheck(ctx context.Context, job *batchv1.Job) error {
	if job == nil {
		return nil
	}
	opts := []client.DeleteOption{client.PropagationPolicy(metav1.DeletePropagationBackground)}
	if job.UID != "" {
		opts = append(opts, client.Preconditions{UID: &job.UID})
	}
	if err := r.Delete(ctx, job, opts...); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("failed to delete Job %s: %w", job.Name, err)
	}
	return nil
}

// warnings reads the Warning Events about a key check Job that has no Pod
// (the API server refused it) or about its Pods that have not started (a
// volume that does not mount), which is where those causes show. Best
// effort: without them a held-up Pod is judged when its Job ends.
func (r *Reconciler) warnings(ctx context.Context, job *batchv1.Job, pods []corev1.Pod) []corev1.Event {
	uids := []types.UID{job.UID}
	for i := range pods {
		if pods[i].Status.Phase == corev1.PodPending {
			uids = append(uids, pods[i].UID)
		}
	}
	// Only the API server, never the cache: the cache holds no Events, and
	// a read through it would start watching every Event in the cluster.
	if r.APIReader == nil || len(pods) > 0 && len(uids) == 1 || jobDone(job) {
		return nil
	}
	var out []corev1.Event
	for _, uid := range uids {
		if uid == "" {
			continue
		}
		var list corev1.EventList
		if err := r.APIReader.List(ctx, &list, client.InNamespace(job.Namespace),
			client.MatchingFields{eventInvolvedUID: string(uid)}); err != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("Could not read the Events of the key check", "job", job.Name, "error", err.Error())
			return nil
		}
		for _, e := range list.Items {
			if e.Type == corev1.EventTypeWarning {
				out = append(out, e)
			}
		}
	}
	return out
}

func jobDone(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobAttempt is the Job's number among the checks of its snapshot; a Job
// without one (made by an operator before this one) is the first.
func jobAttempt(job *batchv1.Job) int32 {
	n, err := strconv.ParseInt(job.Annotations[keyCheckAttemptAnnotation], 10, 32)
	if err != nil || n < 1 {
		return 1
	}
	return int32(n)
}

func (r *Reconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}
