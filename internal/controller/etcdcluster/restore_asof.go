package etcdcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
)

// chooseFromSchedule resolves spec.bootstrap.restore.fromSchedule to the
// name of an EtcdSnapshot. The first choice is latched in
// status.restoreChoice, and every later pass takes it from there: a
// snapshot the schedule takes meanwhile must not change what a restore in
// progress checks and downloads (docs/design/0026-restore-as-of.md). A
// non-nil result means wait; the reason is reported.
func (r *Reconciler) chooseFromSchedule(ctx context.Context, s *scope, fs *v1alpha1.RestoreFromSchedule) (string, *ctrl.Result) {
	c := s.cluster
	if c.Status.RestoreChoice == nil {
		// The cache can trail the status write that latched a choice made
		// a moment ago; choosing again from a newer list of snapshots
		// could pick another, so ask the API server itself.
		live := &v1alpha1.EtcdCluster{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(c), live); err != nil {
			s.phaseErrs = append(s.phaseErrs, fmt.Errorf("failed to read EtcdCluster %s: %w", c.Name, err))
			return "", &ctrl.Result{RequeueAfter: requeueAfterError}
		}
		c.Status.RestoreChoice = live.Status.RestoreChoice.DeepCopy()
	}
	if ch := c.Status.RestoreChoice; ch != nil {
		return ch.SnapshotName, nil
	}
	before, err := backup.ParseBefore(fs.Before)
	if err != nil {
		// Admission refuses such a time; only an object stored before the
		// rule existed, or written past it, gets here.
		r.refuseRestore(s, v1alpha1.RestoreFailedReason, err.Error())
		return "", &ctrl.Result{}
	}
	var list v1alpha1.EtcdSnapshotList
	if err := r.List(ctx, &list, client.InNamespace(c.Namespace), client.MatchingLabels{v1alpha1.ScheduleLabel: fs.Name}); err != nil {
		s.phaseErrs = append(s.phaseErrs, fmt.Errorf("failed to list the EtcdSnapshots of schedule %s: %w", fs.Name, err))
		return "", &ctrl.Result{RequeueAfter: requeueAfterError}
	}
	entries := make([]backup.Entry, 0, len(list.Items))
	for i := range list.Items {
		entries = append(entries, asOfEntry(&list.Items[i]))
	}
	a := backup.ChooseAsOf(entries, before)
	if !a.Found {
		// Checked again every restoreRecheckAfter: the refusal clears by
		// itself once a snapshot qualifies.
		r.refuseRestore(s, v1alpha1.RestoreNoSnapshotBeforeReason, a.Refusal(fs.Name, before))
		return "", &ctrl.Result{RequeueAfter: restoreRecheckAfter}
	}
	c.Status.RestoreChoice = &v1alpha1.RestoreChoice{
		Schedule: fs.Name, Before: fs.Before, SnapshotName: a.Chosen,
		SnapshotCompletedAt: metav1.NewTime(a.Completed), ChosenAt: metav1.NewTime(s.now),
	}
	r.memos.get(c).rememberRefusal(nil)
	r.event(c, corev1.EventTypeNormal, "RestoreSnapshotChosen", "Restore",
		"Chose EtcdSnapshot %s of schedule %s, completed at %s, the newest before %s",
		a.Chosen, fs.Name, a.Completed.UTC().Format(time.RFC3339), before.UTC().Format(time.RFC3339))
	// The check starts on a later pass, after this pass's status write has
	// latched the choice: nothing is read from storage for a choice that
	// is not recorded.
	s.setProgress(v1alpha1.RestoreCheckingReason, "chose EtcdSnapshot %s of schedule %s", a.Chosen, fs.Name)
	return "", &ctrl.Result{RequeueAfter: requeueSoon}
}

// asOfEntry is a snapshot as ChooseAsOf sees it.
func asOfEntry(s *v1alpha1.EtcdSnapshot) backup.Entry {
	e := backup.Entry{Name: s.Name, Created: s.CreationTimestamp.Time}
	switch s.Status.Phase {
	case v1alpha1.SnapshotSucceeded:
		e.State = backup.Succeeded
	case v1alpha1.SnapshotFailed:
		e.State = backup.Failed
	default:
		e.State = backup.Active
	}
	if !s.DeletionTimestamp.IsZero() {
		// Being pruned: its objects may already be gone.
		e.State = backup.Active
	}
	if s.Status.CompletedAt != nil {
		e.Completed = s.Status.CompletedAt.Time
	}
	return e
}
