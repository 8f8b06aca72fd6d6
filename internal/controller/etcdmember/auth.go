package etcdmember

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
)

// tokenEndpoints are the endpoints a dial to m alone adds when it
// authenticates with a password: clientv3 exchanges the password for a
// token when it dials, and a learner refuses that exchange, so a dial to
// a learner alone would fail. With other running members among the
// endpoints, clientv3 moves on to one that answers; the calls that name
// m's endpoint still go to m alone. Best effort: none when they cannot be
// listed, and the dial fails as it would have.
func (r *Reconciler) tokenEndpoints(ctx context.Context, m *v1alpha1.EtcdMember, access etcdaccess.Access) []string {
	if access.Identity != etcdaccess.IdentityPassword {
		return nil
	}
	var siblings v1alpha1.EtcdMemberList
	if err := r.List(ctx, &siblings, client.InNamespace(m.Namespace),
		client.MatchingLabels{v1alpha1.ClusterLabel: m.Spec.ClusterName}); err != nil {
		return nil
	}
	var out []string
	for _, s := range siblings.Items {
		if s.Name == m.Name || s.Status.PodName == "" || s.Pending() || !s.DeletionTimestamp.IsZero() {
			continue
		}
		out = append(out, access.URL(s.ClientURLIn(r.ClusterDomain)))
	}
	return out
}
