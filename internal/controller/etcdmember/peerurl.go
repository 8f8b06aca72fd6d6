package etcdmember

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/tlstransition"
)

// peerURLTimeout bounds the look at etcd's membership before a Pod is
// created: the Pod is created whatever it finds.
const peerURLTimeout = 5 * time.Second

// movePeerURL tells etcd the member's https peer URL before its Pod is
// created again, while TLS is being turned on (docs/design/0023): the
// rollout has stopped the member for the second pass, and its new Pod
// listens on https alone, which its peers reach only once etcd knows the
// URL; moved earlier, they would have dialled its http listener with TLS.
// Done here, between the old Pod's end and the new one's start, it costs no
// restart of its own, and it is asked again each time the Pod is missing,
// so an operator restarted in between does it on its next look.
//
// Best effort: a member that cannot be moved now (no quorum to agree) is
// started all the same, since holding its Pod back could hold the quorum
// back too; the cluster controller moves the URL of a member that came up
// on https before its URL moved (tlstransition.UpdatePeerURL).
func (r *Reconciler) movePeerURL(ctx context.Context, cluster *v1alpha1.EtcdCluster, m *v1alpha1.EtcdMember) {
	if cluster.Status.TLS == nil || cluster.Status.TLS.Transition == nil ||
		tlstransition.SpecPass(m) != tlstransition.TLS || m.Status.MemberID == "" {
		return
	}
	id, err := etcd.ParseMemberID(m.Status.MemberID)
	if err != nil {
		return
	}
	log := ctrl.LoggerFrom(ctx)
	_, access, endpoints, err := r.reachOthers(ctx, cluster, m)
	if err != nil {
		log.Info("Could not work out how to reach etcd to move the member's peer URL; its Pod starts all the same", "error", err.Error())
		return
	}
	if len(endpoints) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, peerURLTimeout)
	defer cancel()
	c, err := r.Dialer.Dial(ctx, endpoints, access.Options...)
	if err != nil {
		log.Info("Could not reach etcd to move the member's peer URL; its Pod starts all the same", "error", err.Error())
		return
	}
	defer c.Close()
	list, err := c.MemberList(ctx)
	if err != nil {
		log.Info("Could not list etcd's members to move the member's peer URL; its Pod starts all the same", "error", err.Error())
		return
	}
	i := slices.IndexFunc(list.Members, func(em etcd.Member) bool { return em.ID == id })
	if i < 0 || slices.Contains(list.Members[i].PeerURLs, m.Spec.PeerURL) {
		return
	}
	if _, err := c.MemberUpdate(ctx, id, []string{m.Spec.PeerURL}); err != nil {
		log.Info("etcd did not take the member's https peer URL; its Pod starts all the same, and the cluster controller moves the URL", "error", err.Error())
		return
	}
	log.Info("Moved the member's peer URL to https before starting it", "peerURL", m.Spec.PeerURL)
	if r.Recorder != nil {
		r.Recorder.Eventf(m, nil, corev1.EventTypeNormal, "PeerURLUpdated", "TurnOnTLS",
			"Told etcd the https peer URL of member %s, %s, before starting it", m.Name, m.Spec.PeerURL)
	}
}
