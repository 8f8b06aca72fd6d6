package etcdcluster

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/internal/component/service"
)

// reconcileServices keeps the peer Service (per-member DNS, including members
// not ready yet) and the client Service (ready voters only) as built.
func (r *Reconciler) reconcileServices(ctx context.Context, s *scope) (ctrl.Result, error) {
	for _, svc := range [...]func() error{
		func() error { return service.Sync(ctx, r.Client, service.BuildPeer(s.cluster)) },
		func() error { return service.Sync(ctx, r.Client, service.BuildClient(s.cluster)) },
	} {
		if err := svc(); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}
