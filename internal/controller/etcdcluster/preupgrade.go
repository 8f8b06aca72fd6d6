package etcdcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/preupgrade"
)

// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdsnapshots,verbs=get;list;watch;create

// preUpgradeSnapshot applies spec.rollout.snapshotBeforeUpgrade (see package
// preupgrade): before a version upgrade restarts its first member, the
// cluster's EtcdSnapshot must have succeeded. hold is true while the
// rollout must not act: the snapshot is being created, pending, running or
// failed. It changes no member; the snapshot controller takes the snapshot
// and keeps snapshots of a cluster one at a time, this one included.
func (r *Reconciler) preUpgradeSnapshot(ctx context.Context, s *scope) (hold bool, err error) {
	c := s.cluster
	in := preupgrade.Input{
		Cluster: c.Name, Enabled: c.Spec.Rollout.SnapshotBeforeUpgrade != nil,
		Target: c.Status.Observed.Version, Generation: c.Generation, Record: c.Status.PreUpgradeSnapshot,
	}
	for _, m := range s.counted() {
		in.Configured = append(in.Configured, m.Spec.Version)
	}
	if name := preupgrade.Want(in); name != "" {
		snap := &v1alpha1.EtcdSnapshot{}
		err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, snap)
		switch {
		case err == nil:
			in.Found = foundSnapshot(c, snap)
		case !apierrors.IsNotFound(err):
			return true, fmt.Errorf("failed to get EtcdSnapshot %s: %w", name, err)
		}
	}
	d := preupgrade.Decide(in)
	c.Status.PreUpgradeSnapshot = d.Record
	switch d.Step {
	case preupgrade.Proceed:
		return false, nil
	case preupgrade.Failed:
		s.preUpgradeFailed = d.Message
		return true, nil
	case preupgrade.Create:
		if err := r.createPreUpgradeSnapshot(ctx, s, d.Record.Name); err != nil {
			return true, err
		}
	}
	s.setProgress(v1alpha1.PreUpgradeSnapshotPendingReason, "%s", d.Message)
	return true, nil
}

// foundSnapshot is what the decision needs of an EtcdSnapshot.
func foundSnapshot(c *v1alpha1.EtcdCluster, snap *v1alpha1.EtcdSnapshot) *preupgrade.Snapshot {
	f := &preupgrade.Snapshot{Owned: metav1.IsControlledBy(snap, c), Phase: snap.Status.Phase}
	if cond := meta.FindStatusCondition(snap.Status.Conditions, v1alpha1.SnapshotSucceededCondition); cond != nil {
		f.Reason, f.Message = cond.Reason, cond.Message
	}
	if !snap.DeletionTimestamp.IsZero() && !f.Phase.Terminal() {
		// Going away before it ended: as good as gone, and made again
		// once it is.
		f.Phase, f.Message = v1alpha1.SnapshotPending, "it is being deleted"
	}
	return f
}

// createPreUpgradeSnapshot creates the upgrade's EtcdSnapshot, owned by the
// cluster. Its name is fixed by the upgrade and the generation, so a pass
// that repeats the create (its status write lost, a cache behind it) finds
// it made rather than making a second.
func (r *Reconciler) createPreUpgradeSnapshot(ctx context.Context, s *scope, name string) error {
	c := s.cluster
	snap := &v1alpha1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: c.Namespace,
			Labels: map[string]string{v1alpha1.ClusterLabel: c.Name, v1alpha1.PreUpgradeLabel: c.Status.Observed.Version},
		},
		Spec: v1alpha1.EtcdSnapshotSpec{ClusterName: c.Name, Destination: *c.Spec.Rollout.SnapshotBeforeUpgrade.Destination.DeepCopy()},
	}
	if err := controllerutil.SetControllerReference(c, snap, r.Scheme()); err != nil {
		return err
	}
	err := r.Create(ctx, snap, client.FieldOwner(v1alpha1.FieldOwner))
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to create EtcdSnapshot %s before the upgrade to etcd %s: %w", name, c.Status.Observed.Version, err)
	}
	ctrl.LoggerFrom(ctx).Info("Taking a snapshot before the version upgrade", "snapshot", name, "version", c.Status.Observed.Version)
	r.event(c, corev1.EventTypeNormal, "PreUpgradeSnapshot", "Snapshot",
		"Taking EtcdSnapshot %s before the upgrade to etcd %s; no member restarts until it has succeeded", name, c.Status.Observed.Version)
	return nil
}
