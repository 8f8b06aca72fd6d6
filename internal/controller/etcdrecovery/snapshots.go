package etcdrecovery

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/recovery"
)

// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdsnapshots,verbs=get;list;watch

// snapshotsOf lists the EtcdSnapshots in the recovery's namespace, as the
// snapshot guard sees them. Only a recovery from a snapshot needs them.
func (r *Reconciler) snapshotsOf(ctx context.Context, er *v1alpha1.EtcdRecovery) ([]recovery.Snapshot, error) {
	if er.Spec.Source.Snapshot == nil {
		return nil, nil
	}
	var list v1alpha1.EtcdSnapshotList
	if err := r.List(ctx, &list, client.InNamespace(er.Namespace)); err != nil {
		return nil, fmt.Errorf("failed to list EtcdSnapshots: %w", err)
	}
	out := make([]recovery.Snapshot, 0, len(list.Items))
	for _, s := range list.Items {
		rs := recovery.Snapshot{
			Name:        s.Name,
			ClusterName: s.Spec.ClusterName,
			Succeeded:   s.Status.Phase == v1alpha1.SnapshotSucceeded && s.DeletionTimestamp.IsZero(),
			Revision:    s.Status.Revision,
			// A restore reads the snapshot with the same credentials
			// policy as the Jobs of the cluster controller.
			StorageRefused: r.Credentials.Decide(s.Spec.Destination).Refusal,
			Encrypted:      s.Status.Encryption != "",
		}
		if s.Status.CompletedAt != nil {
			rs.CompletedAt = s.Status.CompletedAt.Time
		}
		out = append(out, rs)
	}
	return out, nil
}
