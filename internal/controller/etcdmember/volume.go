package etcdmember

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/owner"
	"github.com/quorumctl/etcd-operator/internal/component/pvc"
	"github.com/quorumctl/etcd-operator/internal/component/refusal"
)

// growVolume asks for the member's claim to grow to spec.volumeSize, which
// the cluster controller sets when a rollout grows the volume online (it
// decides when, one member at a time; this controller is the claim's one
// writer). The member keeps running meanwhile; the rollout restarts it on
// the grown volume. A refusal (a storage quota, an admission policy) is put
// in a Warning Event on the member: the cluster controller sees only that
// the volume does not grow, and replaces the member once it has waited
// long enough.
func (r *Reconciler) growVolume(ctx context.Context, m *v1alpha1.EtcdMember) error {
	if m.Spec.VolumeSize == nil || m.Pending() {
		return nil
	}
	claim, err := pvc.Get(ctx, r.Client, m)
	var notOwned *owner.NotOwnedError
	switch {
	case errors.As(err, &notOwned):
		// Not the member's: reconcilePod reports it, and makes no Pod on it.
		return nil
	case err != nil || claim == nil:
		// None yet: reconcilePod makes it at spec.volumeSize.
		return err
	}
	from, grown, err := pvc.Grow(ctx, r.Client, m, claim)
	if msg, refused := refusal.Of(err); refused && r.Recorder != nil {
		r.Recorder.Eventf(m, claim, corev1.EventTypeWarning, "VolumeExpansionRefused", "ExpandVolume",
			"The API server refused to grow PersistentVolumeClaim %s to %s: %s", claim.Name, m.Spec.VolumeSize.String(), msg)
	}
	if err != nil || !grown {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Growing the member's volume", "claim", claim.Name, "from", from.String(), "to", m.Spec.VolumeSize.String())
	if r.Recorder != nil {
		r.Recorder.Eventf(m, claim, corev1.EventTypeNormal, "VolumeExpanding", "ExpandVolume",
			"Asked for PersistentVolumeClaim %s to grow from %s to %s online", claim.Name, from.String(), m.Spec.VolumeSize.String())
	}
	return nil
}
