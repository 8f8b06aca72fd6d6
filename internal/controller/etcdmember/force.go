package etcdmember

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
)

// restartToForce applies spec.forceNewCluster, which the cluster controller
// sets on a disaster recovery's survivor. The startup ConfigMap already
// holds the flag (it is synced first), but etcd reads it only when its
// container starts, so a Pod whose container started before the flag was
// there is deleted and re-created on the same volume. The new Pod carries
// pod.ForceNewClusterAnnotation, which tells it apart on the next pass. Once
// the flag is cleared, the annotation goes too, so that a later recovery
// from the same member restarts it again.
func (r *Reconciler) restartToForce(ctx context.Context, m *v1alpha1.EtcdMember, p *corev1.Pod) (bool, error) {
	if !p.DeletionTimestamp.IsZero() {
		return false, nil
	}
	forced := pod.StartedToForce(p.Annotations)
	switch {
	case m.Spec.ForceNewCluster && !forced:
		ctrl.LoggerFrom(ctx).Info("Restarting the member with --force-new-cluster", "pod", p.Name)
		if r.Recorder != nil {
			r.Recorder.Eventf(m, p, corev1.EventTypeWarning, "ForcingNewCluster", "RestartMember",
				"Deleting Pod %s to restart member %s on its data with --force-new-cluster, as a one-member cluster", p.Name, m.Name)
		}
		if err := r.Delete(ctx, p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("failed to delete Pod %s to force a new cluster: %w", p.Name, err)
		}
		return true, nil
	case !m.Spec.ForceNewCluster && forced:
		patch := client.MergeFrom(p.DeepCopy())
		delete(p.Annotations, pod.ForceNewClusterAnnotation)
		if err := r.Patch(ctx, p, patch, client.FieldOwner(v1alpha1.FieldOwner)); err != nil {
			return false, fmt.Errorf("failed to remove the force-new-cluster annotation from Pod %s: %w", p.Name, err)
		}
	}
	return false, nil
}
