package etcdcluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/backupjob"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/recovery"
	"github.com/quorumctl/etcd-operator/internal/remediation"
)

// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdrecoveries,verbs=get;list;watch;create

// reconcileRecovery is the first membership step of a formed cluster. While
// an EtcdRecovery is being carried out (status.recovery), it is the only
// step: nothing else may touch a membership that is being rebuilt. Each
// pass re-derives where the recovery stands from what it observes, so an
// operator restart at any point carries on where it stopped
// (docs/design/0011). Otherwise it takes up a recovery the recovery
// controller has planned, or starts one when spec.disasterRecovery asks.
//
// Who writes what: this controller writes status.recovery and the
// survivor's spec.forceNewCluster; the recovery controller writes the
// EtcdRecovery's status, from status.recovery; the member controller
// restarts the survivor's Pod.
func (r *Reconciler) reconcileRecovery(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	rec := s.cluster.Status.Recovery
	if rec.Active() {
		return r.carryOut(ctx, s, rec)
	}
	// Outside an active recovery no member may start with
	// --force-new-cluster: once the cluster has grown back, a survivor that
	// forced again would drop every member that joined since.
	for _, m := range s.members {
		if m.Spec.ForceNewCluster {
			s.setProgress(v1alpha1.RecoveringReason, "clearing --force-new-cluster from %s", m.Name)
			return ctrl.Result{RequeueAfter: requeueSoon}, true, r.setForceNewCluster(ctx, m, false)
		}
	}
	recoveries, err := r.recoveriesOf(ctx, s)
	if err != nil {
		// Reported, and no reason to hold back the other steps.
		s.phaseErrs = append(s.phaseErrs, err)
		return ctrl.Result{}, false, nil
	}
	if rec != nil && finished(recoveries, rec) {
		// Its EtcdRecovery has recorded the outcome (or is gone).
		s.cluster.Status.Recovery = nil
	}
	if s.cluster.Status.Recovery == nil {
		if next := planned(recoveries); next != nil {
			return r.takeUp(ctx, s, next)
		}
	}
	return r.recoverAutomatically(ctx, s, recoveries)
}

// recoveriesOf lists the EtcdRecoveries of the cluster, oldest first.
func (r *Reconciler) recoveriesOf(ctx context.Context, s *scope) ([]v1alpha1.EtcdRecovery, error) {
	var list v1alpha1.EtcdRecoveryList
	if err := r.List(ctx, &list, client.InNamespace(s.cluster.Namespace)); err != nil {
		return nil, fmt.Errorf("failed to list EtcdRecoveries of %s: %w", s.cluster.Name, err)
	}
	var out []v1alpha1.EtcdRecovery
	for _, er := range list.Items {
		if er.Spec.ClusterName == s.cluster.Name {
			out = append(out, er)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].CreationTimestamp, out[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// finished: the recovery's EtcdRecovery is gone or has recorded an end.
func finished(recoveries []v1alpha1.EtcdRecovery, rec *v1alpha1.ClusterRecovery) bool {
	for _, er := range recoveries {
		if er.Name == rec.Name && er.UID == rec.UID {
			return er.Status.Phase.Terminal()
		}
	}
	return true
}

// planned is the oldest recovery whose plan is recorded and that is running.
func planned(recoveries []v1alpha1.EtcdRecovery) *v1alpha1.EtcdRecovery {
	for i := range recoveries {
		er := &recoveries[i]
		if er.Status.Phase == v1alpha1.RecoveryRunning && er.Status.Plan != nil && er.DeletionTimestamp.IsZero() {
			return er
		}
	}
	return nil
}

// takeUp records that the cluster is now being recovered. Nothing else
// changes in this pass: the members' finalizers release without etcd only
// once they can read status.recovery, so it must be written first.
func (r *Reconciler) takeUp(ctx context.Context, s *scope, er *v1alpha1.EtcdRecovery) (ctrl.Result, bool, error) {
	plan := er.Status.Plan
	rec := &v1alpha1.ClusterRecovery{Name: er.Name, UID: er.UID, Source: plan.Source, StartedAt: metav1.NewTime(s.now)}
	s.cluster.Status.Recovery = rec
	switch {
	case !s.cluster.ClusterFormed():
		rec.Failed = "the cluster has not formed; nothing was changed"
	case s.etcd.usable():
		// The plan was made without a quorum; one answers now.
		rec.Failed = "a quorum of voters answered again before the recovery began; nothing was changed"
	case plan.Source == v1alpha1.RecoveryFromSnapshot:
		rec.Snapshot, rec.PreviousClusterID = plan.Snapshot, s.cluster.Status.ClusterID
		if src := er.Spec.Source.Snapshot; src != nil {
			// The restore's check Job and seed mount it, as they mount
			// spec.bootstrap.restore.encryption (RestoreSpec).
			rec.Encryption = src.Encryption.DeepCopy()
		}
	case s.member(plan.Survivor) == nil:
		rec.Failed = fmt.Sprintf("survivor %s no longer exists; nothing was changed", plan.Survivor)
	default:
		rec.Survivor, rec.SurvivorID = plan.Survivor, plan.SurvivorID
	}
	if rec.Failed != "" {
		ctrl.LoggerFrom(ctx).Info("Not starting a recovery", "recovery", er.Name, "why", rec.Failed)
		r.event(s.cluster, corev1.EventTypeWarning, "RecoveryNotStarted", "Recover", "EtcdRecovery %s: %s", er.Name, rec.Failed)
		return ctrl.Result{RequeueAfter: requeueSoon}, true, nil
	}
	ctrl.LoggerFrom(ctx).Info("Starting a disaster recovery", "recovery", er.Name, "source", recoverySource(rec))
	r.event(s.cluster, corev1.EventTypeWarning, "RecoveryStarted", "Recover",
		"EtcdRecovery %s: rebuilding the cluster from %s; %s", er.Name, recoverySource(rec), plan.Loses)
	s.setProgress(v1alpha1.RecoveringReason, "EtcdRecovery %s: recovering from %s", er.Name, recoverySource(rec))
	return ctrl.Result{RequeueAfter: requeueSoon}, true, nil
}

// carryOut takes the next step of the recovery being carried out.
func (r *Reconciler) carryOut(ctx context.Context, s *scope, rec *v1alpha1.ClusterRecovery) (ctrl.Result, bool, error) {
	if rec.Source == v1alpha1.RecoveryFromSnapshot {
		return r.carryOutSnapshot(ctx, s, rec)
	}
	return r.carryOutSurvivor(ctx, s, rec)
}

// stopOthers deletes, one per pass, every member but keep (none for ""),
// and reports the Pods of members that are still there. Their finalizers
// release them without an etcd-side removal while the recovery is active.
func (r *Reconciler) stopOthers(ctx context.Context, s *scope, rec *v1alpha1.ClusterRecovery, keep string) (ctrl.Result, bool, error) {
	for _, m := range s.members {
		if m.Name == keep {
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Stopping a member for the recovery", "recovery", rec.Name, "member", m.Name)
		r.event(s.cluster, corev1.EventTypeWarning, "MemberStopped", "Recover",
			"EtcdRecovery %s: deleting member %s and its volume; the cluster is rebuilt from %s", rec.Name, m.Name, recoverySource(rec))
		s.setProgress(v1alpha1.RecoveringReason, "EtcdRecovery %s: stopping member %s", rec.Name, m.Name)
		if err := r.Delete(ctx, m); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, true, fmt.Errorf("failed to delete EtcdMember %s for the recovery: %w", m.Name, err)
		}
		return ctrl.Result{RequeueAfter: requeueSoon}, true, nil
	}
	if running := s.othersRunning(keep); len(running) > 0 {
		s.setProgress(v1alpha1.RecoveringReason, "EtcdRecovery %s: waiting for %s to stop", rec.Name, strings.Join(running, ", "))
		return ctrl.Result{RequeueAfter: requeueQuorumWait}, true, nil
	}
	return ctrl.Result{}, false, nil
}

// carryOutSnapshot rebuilds the cluster from a snapshot: every member goes,
// then the cluster's ID and token are dropped in one status write, and the
// ordinary bootstrap forms a new cluster from a seed that restores the
// snapshot (restore.go), bumping revisions and marking history compacted.
// While the cluster is not formed the bootstrap is the step; once it has
// formed, the recovery is done and the cluster grows as in a scale-up.
func (r *Reconciler) carryOutSnapshot(ctx context.Context, s *scope, rec *v1alpha1.ClusterRecovery) (ctrl.Result, bool, error) {
	if rec.ResetAt != nil {
		if !s.cluster.ClusterFormed() {
			// The bootstrap's to take: reconcileMembership runs it.
			return ctrl.Result{}, false, nil
		}
		rec.RestoredAt = timePtr(s.now)
		ctrl.LoggerFrom(ctx).Info("Recovered: the cluster formed anew from the snapshot", "recovery", rec.Name, "clusterID", s.cluster.Status.ClusterID)
		r.event(s.cluster, corev1.EventTypeNormal, "ClusterRecovered", "Recover",
			"EtcdRecovery %s: the cluster formed from EtcdSnapshot %s with cluster ID %s (it was %s); growing back to %d members",
			rec.Name, rec.Snapshot, s.cluster.Status.ClusterID, rec.PreviousClusterID, s.desiredReplicas())
		s.setProgress(v1alpha1.RecoveringReason, "EtcdRecovery %s: formed from EtcdSnapshot %s; growing back", rec.Name, rec.Snapshot)
		return ctrl.Result{RequeueAfter: requeueSoon}, true, nil
	}
	if res, acted, err := r.stopOthers(ctx, s, rec, ""); acted || err != nil {
		return res, true, err
	}
	if len(s.deleting) > 0 {
		s.setProgress(v1alpha1.RecoveringReason, "EtcdRecovery %s: waiting for %d member(s) to finish deleting", rec.Name, len(s.deleting))
		return ctrl.Result{RequeueAfter: requeueQuorumWait}, true, nil
	}
	// A check Job left from an earlier restore would report on another
	// source; the gate must check this one.
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: s.cluster.Namespace, Name: backupjob.RestoreCheckJobName(s.cluster.Name)}}
	if err := r.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, true, fmt.Errorf("failed to delete Job %s: %w", job.Name, err)
	}
	r.memos.get(s.cluster).rememberRefusal(nil)
	c := s.cluster
	c.Status.ClusterID, c.Status.RestoredFrom, c.Status.RestoreChoice = "", nil, nil
	c.Status.ClusterToken = v1alpha1.RecoveredClusterToken(c, rec)
	rec.ResetAt = timePtr(s.now)
	ctrl.LoggerFrom(ctx).Info("Every old member is gone; forming the cluster anew from the snapshot", "recovery", rec.Name, "snapshot", rec.Snapshot)
	r.event(s.cluster, corev1.EventTypeWarning, "ClusterReset", "Recover",
		"EtcdRecovery %s: every member of cluster %s is gone; forming a new cluster from EtcdSnapshot %s", rec.Name, rec.PreviousClusterID, rec.Snapshot)
	s.setProgress(v1alpha1.RecoveringReason, "EtcdRecovery %s: forming the cluster anew from EtcdSnapshot %s", rec.Name, rec.Snapshot)
	return ctrl.Result{RequeueAfter: requeueSoon}, true, nil
}

// carryOutSurvivor takes the next step of a recovery from a survivor, found
// from what is observed: stop the others, restart the survivor with
// --force-new-cluster, clear the flag once it answers alone with a leader.
// The cluster then grows back through the ordinary scale-up.
func (r *Reconciler) carryOutSurvivor(ctx context.Context, s *scope, rec *v1alpha1.ClusterRecovery) (ctrl.Result, bool, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("recovery", rec.Name, "survivor", rec.Survivor)
	surv := s.member(rec.Survivor)
	if surv == nil {
		return r.failRecovery(s, rec, fmt.Sprintf("survivor %s was deleted during the recovery; recover from a snapshot", rec.Survivor))
	}
	if res, acted, err := r.stopOthers(ctx, s, rec, surv.Name); acted || err != nil {
		return res, true, err
	}
	if s.aloneWithLeader(surv) {
		switch {
		case surv.Spec.ForceNewCluster:
			// First the flag goes, then the cluster may grow: a restart that
			// forced again after a member joined would drop that member.
			s.setProgress(v1alpha1.RecoveringReason, "EtcdRecovery %s: %s answers alone; clearing --force-new-cluster", rec.Name, surv.Name)
			return ctrl.Result{RequeueAfter: requeueSoon}, true, r.setForceNewCluster(ctx, surv, false)
		case surv.Status.ForceNewCluster:
			s.setProgress(v1alpha1.RecoveringReason, "EtcdRecovery %s: waiting for the startup config of %s to drop --force-new-cluster", rec.Name, surv.Name)
			return ctrl.Result{RequeueAfter: requeueSoon}, true, nil
		}
		rec.RestoredAt = timePtr(s.now)
		log.Info("Recovered: the survivor answers as a one-member cluster")
		r.event(s.cluster, corev1.EventTypeNormal, "ClusterRecovered", "Recover",
			"EtcdRecovery %s: member %s answers as a one-member cluster with cluster ID %s; growing back to %d members",
			rec.Name, surv.Name, s.cluster.Status.ClusterID, s.desiredReplicas())
		s.setProgress(v1alpha1.RecoveringReason, "EtcdRecovery %s: %s answers alone; growing back", rec.Name, surv.Name)
		return ctrl.Result{RequeueAfter: requeueSoon}, true, nil
	}
	if why, failed := s.survivorFailed(surv); failed {
		return r.failRecovery(s, rec, why)
	}
	if !surv.Spec.ForceNewCluster {
		log.Info("Restarting the survivor with --force-new-cluster")
		r.event(s.cluster, corev1.EventTypeWarning, "ForcingNewCluster", "Recover",
			"EtcdRecovery %s: restarting member %s on its data with --force-new-cluster", rec.Name, surv.Name)
		s.setProgress(v1alpha1.RecoveringReason, "EtcdRecovery %s: restarting %s with --force-new-cluster", rec.Name, surv.Name)
		return ctrl.Result{RequeueAfter: requeueSoon}, true, r.setForceNewCluster(ctx, surv, true)
	}
	s.setProgress(v1alpha1.RecoveringReason, "EtcdRecovery %s: waiting for %s to answer alone after restarting with --force-new-cluster", rec.Name, surv.Name)
	return ctrl.Result{RequeueAfter: requeueUnreachable}, true, nil
}

func (r *Reconciler) failRecovery(s *scope, rec *v1alpha1.ClusterRecovery, why string) (ctrl.Result, bool, error) {
	rec.Failed = why
	r.event(s.cluster, corev1.EventTypeWarning, "RecoveryFailed", "Recover", "EtcdRecovery %s: %s", rec.Name, why)
	s.setProgress(v1alpha1.RecoveringReason, "EtcdRecovery %s failed: %s", rec.Name, why)
	return ctrl.Result{RequeueAfter: requeueSoon}, true, nil
}

// othersRunning names the Pods of members other than keep that still
// exist. One on a node that is gone or unreachable is not waited for: its
// kubelet cannot run it, and kills it on coming back, by which time the
// survivor knows it as removed (or the new cluster has another ID).
func (s *scope) othersRunning(keep string) []string {
	var out []string
	for name, p := range s.pods {
		if name == keep {
			continue
		}
		node := p.Spec.NodeName
		if node != "" && remediation.Node(node, s.nodes[node], false, time.Time{}, s.heard[node]).Unavailable {
			continue
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// aloneWithLeader: etcd answers linearizably that the survivor is its only
// member, and the survivor leads. That is what --force-new-cluster makes of
// it, and nothing else can: its old membership had other voters.
func (s *scope) aloneWithLeader(surv *v1alpha1.EtcdMember) bool {
	if !s.etcd.usable() || len(s.etcd.list.Members) != 1 {
		return false
	}
	em, ok := s.inEtcd(surv)
	return ok && s.etcd.health[em.ID].ok() && s.etcd.health[em.ID].status.LeaderID == em.ID
}

// survivorFailed: the survivor, restarted to force a new cluster, died of a
// cause that a restart does not cure: its own data is bad after all.
func (s *scope) survivorFailed(surv *v1alpha1.EtcdMember) (string, bool) {
	p := s.pods[surv.Name]
	if p == nil || !pod.StartedToForce(p.Annotations) {
		return "", false
	}
	v, ok := s.offlineVerdict(surv)
	if !ok || !recovery.Gone(v.Reason) {
		return "", false
	}
	return fmt.Sprintf("survivor %s cannot start on its data with --force-new-cluster (%s: %s); recover from a snapshot", surv.Name, v.Reason, v.Detail), true
}

func (r *Reconciler) setForceNewCluster(ctx context.Context, m *v1alpha1.EtcdMember, force bool) error {
	patch := client.MergeFrom(m.DeepCopy())
	m.Spec.ForceNewCluster = force
	if err := r.Patch(ctx, m, patch); err != nil {
		return fmt.Errorf("failed to set forceNewCluster=%t on EtcdMember %s: %w", force, m.Name, err)
	}
	return nil
}

// recoverAutomatically creates the EtcdRecovery that spec.disasterRecovery
// asks for, once the quorum has been lost for good for long enough. It is
// named after the moment the loss was first seen, so each loss gets one
// try: one that is refused is not tried again until the quorum comes back
// and is lost anew. A recovery already under way, a person's included,
// holds it back.
func (r *Reconciler) recoverAutomatically(ctx context.Context, s *scope, recoveries []v1alpha1.EtcdRecovery) (ctrl.Result, bool, error) {
	dr := s.cluster.Spec.DisasterRecovery
	was := s.cluster.Status.QuorumLoss
	if dr.Automatic == "" || !s.loss.ForGood() || was == nil || was.LostAt == nil || s.cluster.Status.Recovery != nil {
		return ctrl.Result{}, false, nil
	}
	if due := was.LostAt.Add(dr.After()); s.now.Before(due) {
		return ctrl.Result{RequeueAfter: due.Sub(s.now)}, false, nil
	}
	for _, er := range recoveries {
		if !er.Status.Phase.Terminal() {
			return ctrl.Result{}, false, nil
		}
	}
	er := &v1alpha1.EtcdRecovery{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s-auto-%d", s.cluster.Name, was.LostAt.Unix()),
			Namespace: s.cluster.Namespace,
			Labels:    v1alpha1.ClusterLabels(s.cluster.Name),
		},
		Spec: v1alpha1.EtcdRecoverySpec{ClusterName: s.cluster.Name},
	}
	if dr.Automatic == v1alpha1.AutomaticFromSnapshot {
		er.Spec.Source.Snapshot = &v1alpha1.SnapshotSource{}
	} else {
		er.Spec.Source.Survivor = &v1alpha1.SurvivorSource{}
	}
	err := r.Create(ctx, er)
	switch {
	case apierrors.IsAlreadyExists(err):
		return ctrl.Result{}, false, nil
	case err != nil:
		s.phaseErrs = append(s.phaseErrs, fmt.Errorf("failed to create EtcdRecovery %s: %w", er.Name, err))
		return ctrl.Result{}, false, nil
	}
	ctrl.LoggerFrom(ctx).Info("Starting an automatic recovery", "recovery", er.Name, "policy", dr.Automatic)
	r.event(s.cluster, corev1.EventTypeWarning, "AutomaticRecovery", "Recover",
		"The quorum has been lost since %s; created EtcdRecovery %s (%s), as spec.disasterRecovery asks",
		was.LostAt.UTC().Format(time.RFC3339), er.Name, dr.Automatic)
	s.setProgress(v1alpha1.RecoveringReason, "created EtcdRecovery %s (%s)", er.Name, dr.Automatic)
	return ctrl.Result{RequeueAfter: requeueSoon}, true, nil
}

// recoverySource says what a recovery rebuilds the cluster from.
func recoverySource(rec *v1alpha1.ClusterRecovery) string {
	if rec.Source == v1alpha1.RecoveryFromSnapshot {
		return "EtcdSnapshot " + rec.Snapshot
	}
	return "member " + rec.Survivor
}

// recoveryToCluster maps an EtcdRecovery to the cluster it recovers.
func recoveryToCluster(_ context.Context, obj client.Object) []reconcile.Request {
	er, ok := obj.(*v1alpha1.EtcdRecovery)
	if !ok || er.Spec.ClusterName == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: er.Namespace, Name: er.Spec.ClusterName}}}
}
