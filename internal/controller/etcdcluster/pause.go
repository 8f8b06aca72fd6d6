package etcdcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// dormantMember is the parked member of a paused cluster, if any.
func (s *scope) dormantMember() *v1alpha1.EtcdMember {
	for _, m := range s.members {
		if m.Spec.Dormant {
			return m
		}
	}
	return nil
}

// pausedReached: replicas 0 and nothing runs, either because the cluster was
// never started or because its last member is dormant with its Pod gone.
// The Pods of the members removed on the way down count too: a removed
// member's etcd may still be shutting down after its EtcdMember is gone,
// and "paused" tells the user that no etcd of the cluster runs.
func (s *scope) pausedReached() bool {
	if len(s.leftoverPods) > 0 {
		return false
	}
	switch len(s.members) {
	case 0:
		return true
	case 1:
		m := s.members[0]
		return m.Spec.Dormant && s.pods[m.Name] == nil
	}
	return false
}

// pause parks the last member: it leaves etcd's membership untouched, so the
// same member, with the same ID and data, comes back on resume. Removing it
// instead would destroy the cluster.
func (r *Reconciler) pause(ctx context.Context, s *scope, m *v1alpha1.EtcdMember) (ctrl.Result, error) {
	ctrl.LoggerFrom(ctx).Info("Pausing: parking the last member", "member", m.Name)
	if err := r.setDormant(ctx, m, true); err != nil {
		return ctrl.Result{}, err
	}
	r.event(s.cluster, corev1.EventTypeNormal, "Paused", "Pause",
		"Paused: member %s is dormant; its data stays on PersistentVolumeClaim %s", m.Name, v1alpha1.DataVolumeClaimName(m.Name))
	return ctrl.Result{}, nil
}

// wake brings the dormant member back before anything else happens: it is
// the cluster, and new members can only join through it.
func (r *Reconciler) wake(ctx context.Context, s *scope, m *v1alpha1.EtcdMember) (ctrl.Result, error) {
	ctrl.LoggerFrom(ctx).Info("Resuming: waking the dormant member", "member", m.Name)
	if err := r.setDormant(ctx, m, false); err != nil {
		return ctrl.Result{}, err
	}
	r.event(s.cluster, corev1.EventTypeNormal, "Resumed", "Resume", "Resuming from member %s", m.Name)
	s.setProgress(v1alpha1.ScalingUpReason, "waking dormant member %s", m.Name)
	return ctrl.Result{}, nil
}

func (r *Reconciler) setDormant(ctx context.Context, m *v1alpha1.EtcdMember, dormant bool) error {
	patch := client.MergeFrom(m.DeepCopy())
	m.Spec.Dormant = dormant
	if err := r.Patch(ctx, m, patch); err != nil {
		return fmt.Errorf("failed to set dormant=%t on EtcdMember %s: %w", dormant, m.Name, err)
	}
	return nil
}
