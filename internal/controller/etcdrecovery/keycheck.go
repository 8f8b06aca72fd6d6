package etcdrecovery

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/component/backupjob"
	"github.com/quorumctl/etcd-operator/internal/recovery"
)

// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// keyCheck reads what the recovery's key check Job found: nil while there
// is no Job or it runs. The Job records the snapshot it checks, so that a
// result is only ever used for that snapshot.
func (r *Reconciler) keyCheck(ctx context.Context, er *v1alpha1.EtcdRecovery) (*recovery.KeyCheck, *batchv1.Job, error) {
	if er.Spec.Source.Snapshot == nil || er.Spec.Source.Snapshot.Encryption == nil {
		return nil, nil, nil
	}
	job := &batchv1.Job{}
	err := r.Get(ctx, types.NamespacedName{Namespace: er.Namespace, Name: backupjob.RecoveryKeyCheckJobName(er.Name)}, job)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil, nil
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
	check := &recovery.KeyCheck{Snapshot: job.Labels[v1alpha1.SnapshotLabel]}
	o := backupjob.Observe(job, pods.Items)
	switch {
	case o.Result.Code != "":
		check.Code, check.Message = o.Result.Code, o.Result.Message
	case o.Stuck != "":
		// The kubelet's reasons that do not clear alone: the check would
		// sit until its deadline.
		check.Code, check.Message = backup.CodeStorageError, "the key check cannot start: "+o.Stuck
	case o.Done:
		check.Code, check.Message = backup.CodeStorageError, "the key check ended without a result: "+o.NoResult
	}
	return check, job, nil
}

// startKeyCheck creates the Job that checks the recovery's key against the
// snapshot the plan chose, replacing one that checked another snapshot.
func (r *Reconciler) startKeyCheck(ctx context.Context, er *v1alpha1.EtcdRecovery, snapshot string, old *batchv1.Job) error {
	if old != nil {
		if old.Labels[v1alpha1.SnapshotLabel] == snapshot {
			return nil
		}
		// The latest snapshot changed while the check ran: check the new one.
		return r.dropKeyCheck(ctx, old)
	}
	snap := &v1alpha1.EtcdSnapshot{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: er.Namespace, Name: snapshot}, snap); err != nil {
		return fmt.Errorf("failed to get EtcdSnapshot %s: %w", snapshot, err)
	}
	access := r.Credentials.Decide(snap.Spec.Destination)
	job := backupjob.RecoveryKeyCheck(er, snap, backup.KeyOf(snap), r.OperatorImage, access.Ambient)
	if err := r.Create(ctx, job, client.FieldOwner(v1alpha1.FieldOwner)); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create Job %s: %w", job.Name, err)
	}
	return nil
}

// dropKeyCheck deletes a key check Job whose result has been used: the
// recovery is planned or refused, and its Pod need not stay.
func (r *Reconciler) dropKeyCheck(ctx context.Context, job *batchv1.Job) error {
	if job == nil {
		return nil
	}
	if err := r.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to delete Job %s: %w", job.Name, err)
	}
	return nil
}

func (r *Reconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}
