package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	"github.com/quorumctl/etcd-operator/internal/component/pod"
)

// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdsnapshots,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete

const (
	// requeueRestoreCheck follows a running restore check; its Job's
	// events also wake the cluster.
	requeueRestoreCheck = 2 * time.Second
	// restoreRecheckAfter is how long a failed check stands before it runs
	// again, so a fixed Secret or bucket is noticed without a spec change.
	restoreRecheckAfter = 30 * time.Second
)

// restoreGate runs before the seed of a restored cluster is created. It
// checks the source with a Job that uses the very Secret and mounts the
// seed's download will (the operator itself never holds the credentials),
// refuses a source that is missing, unreadable, or from a newer etcd minor,
// and, once the source is good, records it in status.restoredFrom and
// returns what the seed must restore. Until then it reports and waits, and
// no seed exists: a refused restore leaves nothing half-made.
func (r *Reconciler) restoreGate(ctx context.Context, s *scope) (*v1alpha1.MemberRestore, bool, ctrl.Result, error) {
	c := s.cluster
	spec := c.Restore()
	if rs := c.Status.Recovery.RestoreSpec(); rs != nil {
		// A disaster recovery from a snapshot forms the cluster anew.
		spec = rs
	}
	if spec == nil {
		return nil, true, ctrl.Result{}, nil
	}
	src, wait := r.restoreSource(ctx, s, spec)
	if wait != nil {
		return nil, false, *wait, nil
	}
	access := r.Credentials.Decide(src.dest)
	if access.Refused() {
		// Before the check Job: no Pod reads the source, no seed exists.
		r.refuseRestore(s, v1alpha1.RestoreAmbientCredentialsRefusedReason, access.Refusal)
		return nil, false, ctrl.Result{RequeueAfter: restoreRecheckAfter}, nil
	}
	if r.OperatorImage == "" {
		r.refuseRestore(s, v1alpha1.RestoreFailedReason, "the operator was started without --operator-image, which checks and downloads snapshots")
		return nil, false, ctrl.Result{}, nil
	}
	job := &batchv1.Job{}
	err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: backupjob.RestoreCheckJobName(c.Name)}, job)
	switch {
	case apierrors.IsNotFound(err):
		job = backupjob.RestoreCheck(c, src.dest, spec.Encryption, src.key, r.OperatorImage, access.Ambient)
		if err := r.Create(ctx, job, client.FieldOwner(v1alpha1.FieldOwner)); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, false, ctrl.Result{}, fmt.Errorf("failed to create Job %s: %w", job.Name, err)
		}
		r.reportChecking(s, "checking the snapshot at "+backup.Location(src.dest, src.key))
		return nil, false, ctrl.Result{RequeueAfter: requeueRestoreCheck}, nil
	case err != nil:
		return nil, false, ctrl.Result{}, fmt.Errorf("failed to get Job %s: %w", backupjob.RestoreCheckJobName(c.Name), err)
	case !metav1.IsControlledBy(job, c):
		r.refuseRestore(s, v1alpha1.RestoreFailedReason, fmt.Sprintf("Job %s exists but does not belong to this cluster; delete it", job.Name))
		return nil, false, ctrl.Result{RequeueAfter: restoreRecheckAfter}, nil
	}
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)}); err != nil {
		return nil, false, ctrl.Result{}, fmt.Errorf("failed to list the Pods of Job %s: %w", job.Name, err)
	}
	o := backupjob.Observe(job, pods.Items)
	switch {
	case o.Result.Code == backup.CodeOK && o.Result.Metadata != nil:
		return r.acceptSource(s, spec, src, o.Result.Metadata)
	case o.Result.Code != "":
		r.refuseRestore(s, backup.RestoreReason(o.Result.Code), o.Result.Message)
	case o.Stuck != "":
		r.refuseRestore(s, v1alpha1.RestoreFailedReason, "the restore check cannot start: "+o.Stuck)
	case o.Done:
		r.refuseRestore(s, v1alpha1.RestoreFailedReason, "the restore check ended without a result: "+o.NoResult)
	default:
		r.reportChecking(s, "checking the snapshot at "+backup.Location(src.dest, src.key))
		return nil, false, ctrl.Result{RequeueAfter: requeueRestoreCheck}, nil
	}
	// A refusal stands until a later check passes: its Job goes after a
	// while and the next pass checks again.
	if at := finishedAt(job); !at.IsZero() && s.now.Sub(at) > restoreRecheckAfter || o.Stuck != "" && s.now.Sub(job.CreationTimestamp.Time) > restoreRecheckAfter {
		if err := r.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return nil, false, ctrl.Result{}, fmt.Errorf("failed to delete Job %s: %w", job.Name, err)
		}
	}
	return nil, false, ctrl.Result{RequeueAfter: restoreRecheckAfter}, nil
}

// restoreSource is where the snapshot is.
type restoreSource struct {
	dest     v1alpha1.SnapshotDestination
	key      string
	snapshot *v1alpha1.EtcdSnapshot
}

// restoreSource resolves spec.bootstrap.restore; a non-nil result means
// wait (and the reason is reported).
func (r *Reconciler) restoreSource(ctx context.Context, s *scope, spec *v1alpha1.RestoreSpec) (restoreSource, *ctrl.Result) {
	if spec.Source != nil {
		return restoreSource{dest: spec.Source.Destination(), key: spec.Source.Key}, nil
	}
	name, chosen := spec.SnapshotName, ""
	if spec.FromSchedule != nil {
		var wait *ctrl.Result
		if name, wait = r.chooseFromSchedule(ctx, s, spec.FromSchedule); wait != nil {
			return restoreSource{}, wait
		}
		chosen = fmt.Sprintf(" (chosen from schedule %s as of %s)", spec.FromSchedule.Name, spec.FromSchedule.Before)
	}
	snap := &v1alpha1.EtcdSnapshot{}
	err := r.Get(ctx, types.NamespacedName{Namespace: s.cluster.Namespace, Name: name}, snap)
	switch {
	case apierrors.IsNotFound(err):
		r.refuseRestore(s, v1alpha1.RestoreSnapshotNotFoundReason, fmt.Sprintf("no EtcdSnapshot %s in namespace %s%s", name, s.cluster.Namespace, chosen))
		return restoreSource{}, &ctrl.Result{RequeueAfter: restoreRecheckAfter}
	case err != nil:
		s.phaseErrs = append(s.phaseErrs, fmt.Errorf("failed to get EtcdSnapshot %s: %w", name, err))
		return restoreSource{}, &ctrl.Result{RequeueAfter: requeueAfterError}
	case snap.Status.Phase == v1alpha1.SnapshotFailed:
		r.refuseRestore(s, v1alpha1.RestoreSnapshotFailedReason, fmt.Sprintf("EtcdSnapshot %s failed; restore from a snapshot that succeeded", snap.Name))
		return restoreSource{}, &ctrl.Result{RequeueAfter: restoreRecheckAfter}
	case snap.Status.Phase != v1alpha1.SnapshotSucceeded:
		s.setProgress(v1alpha1.RestoreSnapshotNotReadyReason, "waiting for EtcdSnapshot %s to succeed (it is %s)", snap.Name, snap.Status.Phase)
		return restoreSource{}, &ctrl.Result{RequeueAfter: requeueUnreachable}
	}
	dest := snap.Spec.Destination.DeepCopy()
	// The key a snapshot was written with is the writer's (it may be a
	// recipient only); a restore decrypts with the one its own spec names.
	dest.Encryption = nil
	return restoreSource{dest: *dest, key: backup.KeyOf(snap), snapshot: snap}, nil
}

// acceptSource applies the checks on the metadata the check Job found and
// records the source.
func (r *Reconciler) acceptSource(s *scope, spec *v1alpha1.RestoreSpec, src restoreSource, m *backup.Metadata) (*v1alpha1.MemberRestore, bool, ctrl.Result, error) {
	if src.snapshot != nil && src.snapshot.Status.SHA256 != m.SHA256 {
		r.refuseRestore(s, v1alpha1.RestoreMetadataInvalidReason, fmt.Sprintf("the metadata beside the snapshot records SHA-256 %s, EtcdSnapshot %s records %s",
			m.SHA256, src.snapshot.Name, src.snapshot.Status.SHA256))
		return nil, false, ctrl.Result{RequeueAfter: restoreRecheckAfter}, nil
	}
	var refusal *backup.VersionRefusal
	err := backup.CheckRestoreVersion(m.EtcdVersion, s.cluster.Status.Observed.Version)
	switch {
	case errors.As(err, &refusal):
		r.refuseRestore(s, v1alpha1.RestoreVersionTooNewReason, refusal.Message)
		return nil, false, ctrl.Result{RequeueAfter: restoreRecheckAfter}, nil
	case err != nil:
		r.refuseRestore(s, v1alpha1.RestoreMetadataInvalidReason, err.Error())
		return nil, false, ctrl.Result{RequeueAfter: restoreRecheckAfter}, nil
	}
	compression, err := m.CompressionOf()
	if err != nil {
		// The check Job validated the metadata with the same code; this is
		// only reached when the Job's agent and this controller disagree.
		r.refuseRestore(s, backup.RestoreReason(backup.CodeOf(err)), err.Error())
		return nil, false, ctrl.Result{RequeueAfter: restoreRecheckAfter}, nil
	}
	encryption, fingerprint, err := m.EncryptionOf()
	if err == nil && encryption != "" && spec.Encryption == nil {
		// The check Job refuses this already (and compares a named key's
		// fingerprint, which only it can read); this is the half that
		// needs no key, for a Job whose agent and this controller disagree.
		err = backup.CheckKey(fingerprint, "")
	}
	if err != nil {
		r.refuseRestore(s, backup.RestoreReason(backup.CodeOf(err)), err.Error())
		return nil, false, ctrl.Result{RequeueAfter: restoreRecheckAfter}, nil
	}
	source := src.dest.DeepCopy()
	// How the snapshot is encoded comes from its metadata; the
	// destination's compression and encryption are for new snapshots and
	// mean nothing to a reader.
	source.Compression, source.Encryption = "", nil
	restore := &v1alpha1.MemberRestore{
		Source: *source, Key: src.key, SHA256: m.SHA256, SizeBytes: m.SizeBytes, Compression: compression,
		BumpRevision: spec.BumpRevisionOrDefault(), MarkCompacted: spec.MarkCompactedOrDefault(),
	}
	if encryption != "" {
		restore.Encryption, restore.EncryptionKey, restore.KeyFingerprint = encryption, spec.Encryption.DeepCopy(), fingerprint
	}
	if s.cluster.Status.RestoredFrom == nil {
		name := spec.SnapshotName
		if src.snapshot != nil {
			// fromSchedule's choice, too.
			name = src.snapshot.Name
		}
		s.cluster.Status.RestoredFrom = &v1alpha1.RestoredFrom{
			SnapshotName: name, Location: backup.Location(src.dest, src.key), Key: src.key,
			Revision: m.Revision, SHA256: m.SHA256, SizeBytes: m.SizeBytes, Compression: compression, EtcdVersion: m.EtcdVersion,
			Encryption: encryption, KeyFingerprint: fingerprint,
			SourceClusterID: m.ClusterID, BumpRevision: restore.BumpRevision, MarkCompacted: restore.MarkCompacted,
		}
		r.event(s.cluster, corev1.EventTypeNormal, "RestoreSourceChecked", "Restore",
			"Restoring from %s: revision %d of cluster %s, etcd %s", s.cluster.Status.RestoredFrom.Location, m.Revision, m.ClusterID, m.EtcdVersion)
	}
	r.memos.get(s.cluster).rememberRefusal(nil)
	return restore, true, ctrl.Result{}, nil
}

// observeRestore reports a restored cluster's seed while it restores: a
// refusal its init containers reported (a checksum that does not match,
// say), or progress. It returns false when there is nothing to report.
func (r *Reconciler) observeRestore(s *scope, seed *v1alpha1.EtcdMember) bool {
	if seed.Spec.Restore == nil || s.cluster.ClusterFormed() {
		return false
	}
	p := s.pods[seed.Name]
	for _, c := range []string{pod.RestoreFetchContainer, pod.RestoreApplyContainer} {
		if res, failed := backupjob.InitFailure(p, c); failed {
			r.refuseRestore(s, backup.RestoreReason(res.Code), fmt.Sprintf("seed %s: %s", seed.Name, res.Message))
			return true
		}
	}
	if p != nil && !s.podReady(seed.Name) {
		s.setProgress(v1alpha1.RestoringReason, "seed %s is restoring the snapshot from %s", seed.Name,
			backup.Location(seed.Spec.Restore.Source, seed.Spec.Restore.Key))
		return true
	}
	return false
}

// restoreFormed records when a restored cluster formed and drops its check.
func (r *Reconciler) restoreFormed(ctx context.Context, s *scope) {
	rf := s.cluster.Status.RestoredFrom
	if rf == nil || rf.RestoredAt != nil {
		return
	}
	now := metav1.NewTime(s.now)
	rf.RestoredAt = &now
	r.event(s.cluster, corev1.EventTypeNormal, "Restored", "Restore",
		"Cluster %s formed from %s at revision %d, revisions bumped by %d", s.cluster.Status.ClusterID, rf.Location, rf.Revision, rf.BumpRevision)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: s.cluster.Namespace, Name: backupjob.RestoreCheckJobName(s.cluster.Name)}}
	if err := r.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to delete the restore check Job")
	}
}

func (r *Reconciler) reportChecking(s *scope, msg string) {
	if last := r.memos.get(s.cluster).lastRefusal(); last != nil {
		// Checking again after a refusal: the refusal stands until then.
		s.restoreRefusal = last
		s.setProgress(last.reason, "%s (checking again)", last.message)
		return
	}
	s.setProgress(v1alpha1.RestoreCheckingReason, "%s", msg)
}

// refuseRestore reports bad input: the scope carries it into Available,
// Ready and Stalled; the move to Stalled records the Warning Event, once
// per reason (announceStalled).
func (r *Reconciler) refuseRestore(s *scope, reason, message string) {
	p := &progress{reason: reason, message: message}
	s.restoreRefusal = p
	s.setProgress(reason, "%s", message)
	r.memos.get(s.cluster).rememberRefusal(p)
}

func finishedAt(j *batchv1.Job) time.Time {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
