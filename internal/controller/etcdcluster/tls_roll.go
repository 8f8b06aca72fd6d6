package etcdcluster

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// applyMemberTLS sets the member's TLS and URLs to their target, as part of
// the rollout's restart of the member. A peer URL that moves to TLS is
// moved in etcd's membership first (MemberUpdate): the member listens on it
// already, and its peers dial it there from the moment etcd applies it.
func (r *Reconciler) applyMemberTLS(ctx context.Context, s *scope, m *v1alpha1.EtcdMember) error {
	t, peer, clientURL := s.memberTLS(m)
	if peer != m.Spec.PeerURL {
		em, ok := s.inEtcd(m)
		if !ok {
			return fmt.Errorf("failed to move the peer URL of %s: etcd does not list it", m.Name)
		}
		_, _, err := r.withClient(ctx, s, func(c etcd.Client) (etcd.Member, etcd.MemberList, error) {
			l, err := c.MemberUpdate(ctx, em.ID, []string{peer})
			return etcd.Member{}, l, err
		})
		if err != nil && !etcd.IsPeerURLExists(err) {
			return fmt.Errorf("failed to move the peer URL of %s to %s: %w", m.Name, peer, err)
		}
		ctrl.LoggerFrom(ctx).Info("Moved the member's peer URL", "member", m.Name, "peerURL", peer)
		r.event(s.cluster, corev1.EventTypeNormal, "PeerURLMoved", "UpdateMember",
			"Moved member %s's peer URL to %s; its peers reach it over TLS from now on", m.Name, peer)
		s.peerURLs[m.Name] = peer
	}
	m.Spec.TLS, m.Spec.PeerURL, m.Spec.ClientURL = t.DeepCopy(), peer, clientURL
	return nil
}

// securityFailure is the Ready reason and message of a TLS or auth failure
// that needs a person, or of certificates still being issued.
func securityFailure(err error) (string, string, bool) {
	var input *inputError
	if errors.As(err, &input) {
		return input.reason, input.message, true
	}
	var pending *tlsPendingError
	if errors.As(err, &pending) {
		return v1alpha1.TLSSourcePendingReason, pending.message, true
	}
	return "", "", false
}
