package etcdrecovery

import (
	"context"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/recovery"
)

// snapshotsOf lists the snapshots a recovery may restore. Until the operator
// can take snapshots there are none, and plan refuses a snapshot source
// before it gets here.
func (r *Reconciler) snapshotsOf(_ context.Context, _ *v1alpha1.EtcdRecovery) ([]recovery.Snapshot, error) {
	return nil, nil
}
