package etcdrecovery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/controller/ratelimit"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/recovery"
)

const (
	// requeueWaiting is how often a running recovery looks at its cluster
	// when no change of the cluster's status announced itself.
	requeueWaiting = 5 * time.Second
	// requeuePlanning retries a plan that could not be made for a reason
	// that passes (the API server or the members did not answer).
	requeuePlanning = 5 * time.Second
)

// EventRecorder is the part of the events API the controller uses.
type EventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Reconciler reconciles EtcdRecovery objects.
type Reconciler struct {
	client.Client
	// APIReader reads a root Secret the user named (spec.auth), which the
	// cache, holding only the operator's labelled objects, does not; nil
	// reads it through Client.
	APIReader client.Reader
	Recorder  EventRecorder
	Dialer    etcd.Dialer
	// Metrics reads a member's metrics endpoint when its client endpoint
	// does not answer; nil leaves such a member unanswered.
	Metrics       etcd.MetricsReader
	ClusterDomain string
	// OperatorImage is the operator's own image, which a restore's seed
	// runs to fetch the snapshot; without it, a recovery from a snapshot is
	// refused before anything is planned.
	OperatorImage string
	// Credentials is which snapshot storage the operator's Pods may reach
	// with ambient credentials.
	Credentials backup.CredentialsPolicy
	// Now is the clock; tests set it.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdrecoveries,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdrecoveries/status,verbs=patch
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdmembers,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile plans a new recovery, or follows a running one to its end. A
// finished recovery is a record and is never touched again.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, reterr error) {
	er := &v1alpha1.EtcdRecovery{}
	if err := r.Get(ctx, req.NamespacedName, er); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if er.Status.Phase.Terminal() || !er.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	cluster := &v1alpha1.EtcdCluster{}
	err := r.Get(ctx, types.NamespacedName{Namespace: er.Namespace, Name: er.Spec.ClusterName}, cluster)
	switch {
	case apierrors.IsNotFound(err):
		cluster = nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("failed to get EtcdCluster %s: %w", er.Spec.ClusterName, err)
	default:
		if err := r.ownBy(ctx, er, cluster); err != nil {
			return ctrl.Result{}, err
		}
	}
	before := er.DeepCopy()
	defer func() {
		er.Status.ObservedGeneration = er.Generation
		if err := r.patchStatus(ctx, before, er); err != nil {
			reterr = errors.Join(reterr, err)
		}
	}()
	if cluster == nil {
		r.refuse(er, &recovery.Refusal{Reason: v1alpha1.ClusterNotFoundReason,
			Message: fmt.Sprintf("no EtcdCluster %s in namespace %s", er.Spec.ClusterName, er.Namespace)})
		return ctrl.Result{}, nil
	}
	if er.Status.Phase == v1alpha1.RecoveryRunning {
		return r.follow(er, cluster), nil
	}
	return r.plan(ctx, er, cluster), nil
}

// ownBy makes the cluster an owner of the recovery, so that the recovery
// goes with the cluster. It is not the controller: the recovery is a
// record of what was asked, not something the cluster makes.
func (r *Reconciler) ownBy(ctx context.Context, er *v1alpha1.EtcdRecovery, cluster *v1alpha1.EtcdCluster) error {
	for _, ref := range er.OwnerReferences {
		if ref.UID == cluster.UID {
			return nil
		}
	}
	patch := client.MergeFrom(er.DeepCopy())
	if err := controllerutil.SetOwnerReference(cluster, er, r.Scheme()); err != nil {
		return fmt.Errorf("failed to reference EtcdCluster %s from EtcdRecovery %s: %w", cluster.Name, er.Name, err)
	}
	if err := r.Patch(ctx, er, patch); err != nil {
		return fmt.Errorf("failed to reference EtcdCluster %s from EtcdRecovery %s: %w", cluster.Name, er.Name, err)
	}
	return nil
}

// plan applies the guards and, when they pass, records the plan and sets
// the recovery running, in one write: the cluster controller acts on a
// running recovery only, so the plan is on record before anything changes.
func (r *Reconciler) plan(ctx context.Context, er *v1alpha1.EtcdRecovery, cluster *v1alpha1.EtcdCluster) ctrl.Result {
	log := ctrl.LoggerFrom(ctx)
	if er.Status.Phase == "" {
		er.Status.Phase = v1alpha1.RecoveryPending
	}
	if other, err := r.otherRecovery(ctx, er, cluster); err != nil || other != "" {
		if err != nil {
			return r.pending(er, err)
		}
		r.refuse(er, &recovery.Refusal{Reason: v1alpha1.AnotherRecoveryReason,
			Message: fmt.Sprintf("EtcdCluster %s is being recovered by EtcdRecovery %s; wait for it to finish", cluster.Name, other)})
		return ctrl.Result{}
	}
	if er.Spec.Source.Snapshot != nil && r.OperatorImage == "" {
		r.refuse(er, &recovery.Refusal{Reason: v1alpha1.SnapshotRecoveryUnavailableReason,
			Message: "the operator was started without --operator-image, which a restore needs to fetch the snapshot; recover from a survivor (source.survivor) instead, or give the operator its image"})
		return ctrl.Result{}
	}
	facts, err := r.probe(ctx, cluster)
	if err != nil {
		return r.pending(er, err)
	}
	snapshots, err := r.snapshotsOf(ctx, er)
	if err != nil {
		return r.pending(er, err)
	}
	check, checkJob, err := r.keyCheck(ctx, er)
	if err != nil {
		return r.pending(er, err)
	}
	plan, refused := recovery.Decide(facts, recovery.Request{Source: er.Spec.Source, Force: er.Spec.Force, KeyCheck: check}, snapshots, r.now())
	if refused != nil && refused.CheckKeyOf != "" {
		// Before anything changes, a Job reads the key (the operator never
		// does) and checks it against the snapshot the plan chose.
		if err := r.startKeyCheck(ctx, er, refused.CheckKeyOf, checkJob); err != nil {
			return r.pending(er, err)
		}
	}
	if refused != nil && refused.Waiting {
		log.Info("Recovery waits", "reason", refused.Reason, "message", refused.Message)
		return r.wait(er, refused)
	}
	if err := r.dropKeyCheck(ctx, checkJob); err != nil {
		// Its result is used; the Job goes with the EtcdRecovery anyway.
		log.Error(err, "Failed to delete the key check Job")
	}
	if refused != nil {
		log.Info("Recovery refused", "reason", refused.Reason, "message", refused.Message)
		r.refuse(er, refused)
		return ctrl.Result{}
	}
	now := metav1.NewTime(r.now())
	er.Status.Plan, er.Status.Phase, er.Status.StartedAt = plan, v1alpha1.RecoveryRunning, &now
	r.setCondition(er, v1alpha1.RecoveryPlannedCondition, metav1.ConditionTrue, v1alpha1.PlanRecordedReason, planSummary(plan))
	r.setCondition(er, v1alpha1.RecoveredCondition, metav1.ConditionFalse, v1alpha1.RecoveryInProgressReason,
		"waiting for the EtcdCluster controller to take the recovery up")
	log.Info("Recovery planned", "source", plan.Source, "survivor", plan.Survivor, "snapshot", plan.Snapshot, "revisionGap", plan.RevisionGap)
	r.event(er, cluster, corev1.EventTypeWarning, "RecoveryPlanned", "Plan", "%s. Keeps %s. Loses %s.", planSummary(plan), plan.Keeps, plan.Loses)
	return ctrl.Result{RequeueAfter: requeueWaiting}
}

// otherRecovery names another recovery of the cluster that is running or
// being carried out.
func (r *Reconciler) otherRecovery(ctx context.Context, er *v1alpha1.EtcdRecovery, cluster *v1alpha1.EtcdCluster) (string, error) {
	if rec := cluster.Status.Recovery; rec.Active() && rec.Name != er.Name {
		return rec.Name, nil
	}
	var list v1alpha1.EtcdRecoveryList
	if err := r.List(ctx, &list, client.InNamespace(er.Namespace)); err != nil {
		return "", fmt.Errorf("failed to list EtcdRecoveries: %w", err)
	}
	for _, o := range list.Items {
		if o.Name != er.Name && o.Spec.ClusterName == er.Spec.ClusterName && o.Status.Phase == v1alpha1.RecoveryRunning {
			return o.Name, nil
		}
	}
	return "", nil
}

// follow reports the recovery the cluster controller carries out, from the
// cluster's status.recovery, which only that controller writes.
func (r *Reconciler) follow(er *v1alpha1.EtcdRecovery, cluster *v1alpha1.EtcdCluster) ctrl.Result {
	rec := cluster.Status.Recovery
	switch {
	case rec == nil:
		r.setCondition(er, v1alpha1.RecoveredCondition, metav1.ConditionFalse, v1alpha1.RecoveryInProgressReason,
			"waiting for the EtcdCluster controller to take the recovery up")
		return ctrl.Result{RequeueAfter: requeueWaiting}
	case rec.Name != er.Name || (rec.UID != "" && rec.UID != er.UID):
		if rec.Active() {
			r.fail(er, cluster, fmt.Sprintf("EtcdCluster %s is being recovered by EtcdRecovery %s, taken up first; nothing was done for this one", cluster.Name, rec.Name))
			return ctrl.Result{}
		}
		r.setCondition(er, v1alpha1.RecoveredCondition, metav1.ConditionFalse, v1alpha1.RecoveryInProgressReason,
			fmt.Sprintf("waiting for the EtcdCluster controller to finish with EtcdRecovery %s", rec.Name))
		return ctrl.Result{RequeueAfter: requeueWaiting}
	case rec.Failed != "":
		r.fail(er, cluster, rec.Failed)
		return ctrl.Result{}
	case rec.RestoredAt != nil:
		er.Status.Phase, er.Status.CompletedAt = v1alpha1.RecoverySucceeded, rec.RestoredAt.DeepCopy()
		msg := fmt.Sprintf("%s answers as a one-member cluster (cluster ID %s); it grows back to %d members by ordinary scale-up, which the EtcdCluster's Ready condition reports",
			recoveredFrom(rec), cluster.Status.ClusterID, cluster.DesiredReplicas())
		if rec.PreviousClusterID != "" && rec.PreviousClusterID != cluster.Status.ClusterID {
			msg += fmt.Sprintf(". The cluster ID was %s: clients and watchers of the old cluster must reconnect, and a watch resumed from an old revision ends with a compacted error, so its client lists anew", rec.PreviousClusterID)
		}
		r.setCondition(er, v1alpha1.RecoveredCondition, metav1.ConditionTrue, v1alpha1.ClusterRestoredReason, msg)
		r.event(er, cluster, corev1.EventTypeNormal, "Recovered", "Recover", "%s", msg)
		return ctrl.Result{}
	}
	// Whatever the cluster is doing is the recovery's work, the bootstrap's
	// restore of a snapshot included.
	msg := "the EtcdCluster controller is rebuilding the cluster"
	if p := meta.FindStatusCondition(cluster.Status.Conditions, v1alpha1.ProgressingCondition); p != nil && p.Message != "" {
		msg = p.Message
	}
	r.setCondition(er, v1alpha1.RecoveredCondition, metav1.ConditionFalse, v1alpha1.RecoveryInProgressReason, msg)
	return ctrl.Result{RequeueAfter: requeueWaiting}
}

func recoveredFrom(rec *v1alpha1.ClusterRecovery) string {
	if rec.Source == v1alpha1.RecoveryFromSnapshot {
		return "the cluster restored from EtcdSnapshot " + rec.Snapshot
	}
	return "member " + rec.Survivor
}

func (r *Reconciler) refuse(er *v1alpha1.EtcdRecovery, refused *recovery.Refusal) {
	er.Status.Phase = v1alpha1.RecoveryRefused
	r.setCondition(er, v1alpha1.RecoveryPlannedCondition, metav1.ConditionFalse, refused.Reason, refused.Message)
	r.setCondition(er, v1alpha1.RecoveredCondition, metav1.ConditionFalse, v1alpha1.NotStartedReason,
		"refused; nothing was changed. Create a new EtcdRecovery to try again")
	r.event(er, nil, corev1.EventTypeWarning, refused.Reason, "Plan", "Recovery refused: %s", refused.Message)
}

// wait keeps the recovery pending on a guard that may pass by itself, and
// says so once with an Event.
func (r *Reconciler) wait(er *v1alpha1.EtcdRecovery, w *recovery.Refusal) ctrl.Result {
	if c := meta.FindStatusCondition(er.Status.Conditions, v1alpha1.RecoveryPlannedCondition); c == nil || c.Reason != w.Reason {
		r.event(er, nil, corev1.EventTypeNormal, w.Reason, "Plan", "Recovery waits: %s", w.Message)
	}
	r.setCondition(er, v1alpha1.RecoveryPlannedCondition, metav1.ConditionFalse, w.Reason, w.Message)
	r.setCondition(er, v1alpha1.RecoveredCondition, metav1.ConditionFalse, v1alpha1.NotStartedReason, "the plan is not made yet")
	return ctrl.Result{RequeueAfter: requeuePlanning}
}

// pending keeps the recovery pending after a failure that passes.
func (r *Reconciler) pending(er *v1alpha1.EtcdRecovery, err error) ctrl.Result {
	r.setCondition(er, v1alpha1.RecoveryPlannedCondition, metav1.ConditionFalse, v1alpha1.PlanningReason,
		fmt.Sprintf("could not look at the cluster yet, retrying: %v", err))
	r.setCondition(er, v1alpha1.RecoveredCondition, metav1.ConditionFalse, v1alpha1.NotStartedReason, "the plan is not made yet")
	return ctrl.Result{RequeueAfter: requeuePlanning}
}

func (r *Reconciler) fail(er *v1alpha1.EtcdRecovery, cluster *v1alpha1.EtcdCluster, why string) {
	now := metav1.NewTime(r.now())
	er.Status.Phase, er.Status.CompletedAt = v1alpha1.RecoveryFailed, &now
	r.setCondition(er, v1alpha1.RecoveredCondition, metav1.ConditionFalse, v1alpha1.RecoveryFailedReason, why)
	r.event(er, cluster, corev1.EventTypeWarning, v1alpha1.RecoveryFailedReason, "Recover", "%s", why)
}

// planSummary is the plan in one sentence.
func planSummary(p *v1alpha1.RecoveryPlan) string {
	var what string
	if p.Source == v1alpha1.RecoveryFromSnapshot {
		what = fmt.Sprintf("recover from EtcdSnapshot %s at revision %d", p.Snapshot, p.Revision)
	} else {
		what = fmt.Sprintf("recover from member %s at revision %d", p.Survivor, p.Revision)
	}
	if p.BestKnownMember != "" {
		what += fmt.Sprintf(", %d behind the best revision any member still has (%d, %s)", p.RevisionGap, p.BestKnownRevision, p.BestKnownMember)
	}
	if len(p.Removed) > 0 {
		what += "; replaces " + strings.Join(p.Removed, ", ")
	}
	if len(p.Forced) > 0 {
		what += "; spec.force overrode " + strings.Join(p.Forced, ", ")
	}
	return what
}

func (r *Reconciler) setCondition(er *v1alpha1.EtcdRecovery, t string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&er.Status.Conditions, metav1.Condition{
		Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: er.Generation,
	})
}

func (r *Reconciler) patchStatus(ctx context.Context, before, after *v1alpha1.EtcdRecovery) error {
	patch := client.MergeFrom(before)
	data, err := patch.Data(after)
	if err != nil {
		return err
	}
	if string(data) == "{}" {
		return nil
	}
	if err := r.Status().Patch(ctx, after, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to patch status of EtcdRecovery %s: %w", after.Name, err)
	}
	return nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) event(obj, related runtime.Object, eventType, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, related, eventType, reason, action, format, args...)
	}
}

// SetupWithManager registers the controller. A change of an EtcdCluster,
// its status above all, moves on the recoveries of that cluster that are
// not finished.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.EtcdRecovery{}).
		Watches(&v1alpha1.EtcdCluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToRecoveries)).
		// The key check's end moves the plan on.
		Owns(&batchv1.Job{}).
		Named("etcdrecovery").
		WithOptions(controller.Options{RateLimiter: ratelimit.Capped()}).
		Complete(r)
}

func (r *Reconciler) clusterToRecoveries(ctx context.Context, obj client.Object) []reconcile.Request {
	var list v1alpha1.EtcdRecoveryList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list the recoveries of a cluster", "cluster", obj.GetName())
		return nil
	}
	var out []reconcile.Request
	for _, er := range list.Items {
		if er.Spec.ClusterName == obj.GetName() && !er.Status.Phase.Terminal() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&er)})
		}
	}
	return out
}
