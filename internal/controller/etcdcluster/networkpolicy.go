package etcdcluster

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/internal/component/netpol"
)

// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete

// NetworkPolicyOptions are the operator-wide settings of the clusters'
// NetworkPolicies.
type NetworkPolicyOptions struct {
	// Permitted: the operator may list and watch NetworkPolicies, as found
	// when it started. Without that it neither watches nor keeps any (a
	// watch it may not open would stop the whole controller from
	// starting), and every cluster that wants a policy says so in its
	// status instead.
	Permitted bool
	netpol.Sources
}

// reconcileNetworkPolicy keeps the cluster's NetworkPolicy as built, or
// deletes it when the spec turns it off. The policy stays while the cluster
// is paused: it selects no Pod then, and the member that wakes is guarded
// from its first moment; pausing must never open the cluster.
func (r *Reconciler) reconcileNetworkPolicy(ctx context.Context, s *scope) (ctrl.Result, error) {
	desired := netpol.Build(s.cluster, r.NetworkPolicy.Sources)
	switch {
	case !r.NetworkPolicy.Permitted && desired == nil:
		// Nothing was ever made that needs deleting: without the
		// permission the operator never created a policy.
		return ctrl.Result{}, nil
	case !r.NetworkPolicy.Permitted:
		return ctrl.Result{}, &netpol.NotPermittedError{Verb: "list and watch"}
	case desired == nil:
		return ctrl.Result{}, netpol.Delete(ctx, r.Client, s.cluster)
	}
	return ctrl.Result{}, netpol.Sync(ctx, r.Client, desired)
}
