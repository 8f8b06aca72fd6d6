package etcdcluster

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pdb"
)

// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete

// reconcilePDB keeps the PodDisruptionBudget at the quorum of the larger of
// the live voters and the target, on every pass: during a scale-up the live
// voters grow one by one, and the budget must grow with them.
func (r *Reconciler) reconcilePDB(ctx context.Context, s *scope) (ctrl.Result, error) {
	desired := s.desiredReplicas()
	if desired == 0 {
		// Paused: no voter runs, and a budget over nothing would only
		// confuse drains.
		return ctrl.Result{}, pdb.Delete(ctx, r.Client, s.cluster)
	}
	if !s.cluster.ClusterFormed() {
		return ctrl.Result{}, nil
	}
	voters := 0
	if s.etcd.usable() {
		voters = len(s.etcd.voters())
	} else {
		for _, m := range s.members {
			if m.Status.Role == v1alpha1.MemberRoleVoter {
				voters++
			}
		}
	}
	return ctrl.Result{}, pdb.Sync(ctx, r.Client, pdb.Build(s.cluster, pdb.MinAvailable(voters, desired)))
}
