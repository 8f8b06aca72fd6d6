package etcdcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/scheduling"
)

// The cluster controller reads a member's claim to decide how its volume
// changes; the member controller is the claim's one writer (growVolume).
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get;list;watch

// volumeExpansionTimeout is how long a volume may take to grow online before
// the member is replaced instead. A StorageClass may claim expansion that its
// provisioner does not do, and Kubernetes then waits for it forever.
const volumeExpansionTimeout = 10 * time.Minute

// volumeChange is how an outdated member reaches the target's storage.
type volumeChange struct {
	// replace: only a new member on a new volume gets there (a Memory
	// member, a new class, a volume that cannot grow or did not).
	replace bool
	// expand: the volume grows online first; resizing: it has been asked to.
	expand, resizing bool
	// why says, for the Events, why a member is replaced rather than grown.
	why string
}

// volumeChangeOf decides, for one member, between a restart on its own
// volume (the same storage, or a volume that has grown to the target size),
// growing the volume online (the size grows, the class is the same, and the
// class allows expansion), and a replacement: a new member with a new volume
// joins and the old one leaves. A replacement works on any StorageClass; an
// expansion keeps the member, its ID and its data where they are.
func (r *Reconciler) volumeChangeOf(ctx context.Context, s *scope, m *v1alpha1.EtcdMember) (volumeChange, error) {
	have, want := m.Spec.Storage, s.cluster.Status.Observed.Storage
	if have.Medium == v1alpha1.StorageMediumMemory {
		return volumeChange{replace: true, why: "its data lives in memory"}, nil
	}
	if why, stuck, err := r.volumeExcluded(ctx, s, m); err != nil || stuck {
		return volumeChange{replace: stuck, why: why}, err
	}
	switch {
	case equality.Semantic.DeepEqual(have, want):
		return volumeChange{}, nil
	case !equality.Semantic.DeepEqual(have.StorageClassName, want.StorageClassName):
		return volumeChange{replace: true, why: "its volume moves to another StorageClass"}, nil
	}
	size := want.EffectiveSize()
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: v1alpha1.DataVolumeClaimName(m.Name)}, pvc)
	switch {
	case apierrors.IsNotFound(err):
		return volumeChange{replace: true, why: "it has no volume to grow"}, nil
	case err != nil:
		return volumeChange{}, fmt.Errorf("failed to get the volume of EtcdMember %s: %w", m.Name, err)
	}
	capacity := pvc.Status.Capacity[corev1.ResourceStorage]
	if capacity.Cmp(size) >= 0 {
		return volumeChange{}, nil
	}
	if why, failed := expansionFailed(s, m, pvc); failed {
		return volumeChange{replace: true, why: why}, nil
	}
	// Asked, in the member's spec (the member controller has yet to grow
	// the claim), or on the claim itself (by an operator that wrote claims).
	requested := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if asked := m.Spec.VolumeSize; asked != nil && asked.Cmp(size) >= 0 || requested.Cmp(size) >= 0 {
		return volumeChange{resizing: true}, nil
	}
	if ok, why, err := r.expandable(ctx, pvc); err != nil || !ok {
		return volumeChange{replace: true, why: why}, err
	}
	return volumeChange{expand: true}, nil
}

// volumeExcluded: the target's scheduling rules exclude the node the
// member's volume is bound to, so a restart in place could never be
// scheduled; a new member on a new volume, placed where the rules allow,
// takes its place instead. A volume that is not bound to a node moves with
// its Pod, and a member on a node that is gone is self-heal's.
func (r *Reconciler) volumeExcluded(ctx context.Context, s *scope, m *v1alpha1.EtcdMember) (string, bool, error) {
	target := s.cluster.Status.Observed.MemberTemplate
	node := s.nodes[s.nodeOf(m)]
	if node == nil || !scheduling.Changed(m.Spec.MemberTemplate, target) {
		return "", false, nil
	}
	ok, why := scheduling.Admits(node, target)
	if ok {
		return "", false, nil
	}
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: v1alpha1.DataVolumeClaimName(m.Name)}, pvc)
	switch {
	case apierrors.IsNotFound(err) || err == nil && pvc.Spec.VolumeName == "":
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("failed to get the volume of EtcdMember %s: %w", m.Name, err)
	}
	pv := &corev1.PersistentVolume{}
	err = r.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv)
	switch {
	case apierrors.IsNotFound(err):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("failed to get PersistentVolume %s of EtcdMember %s: %w", pvc.Spec.VolumeName, m.Name, err)
	}
	if a := pv.Spec.NodeAffinity; a == nil || a.Required == nil {
		return "", false, nil
	}
	return fmt.Sprintf("its volume is bound to node %s, and %s", node.Name, why), true, nil
}

// expandable: the claim's StorageClass allows volume expansion.
func (r *Reconciler) expandable(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, string, error) {
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return false, "its volume has no StorageClass to grow it", nil
	}
	name := *pvc.Spec.StorageClassName
	sc := &storagev1.StorageClass{}
	err := r.Get(ctx, client.ObjectKey{Name: name}, sc)
	switch {
	case apierrors.IsNotFound(err):
		return false, fmt.Sprintf("its StorageClass %s does not exist", name), nil
	case err != nil:
		return false, "", fmt.Errorf("failed to get StorageClass %s: %w", name, err)
	case sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion:
		return false, fmt.Sprintf("its StorageClass %s does not allow volume expansion", name), nil
	}
	return true, "", nil
}

// expansionFailed: the volume was asked to grow and Kubernetes says it
// cannot, or it has not within volumeExpansionTimeout.
func expansionFailed(s *scope, m *v1alpha1.EtcdMember, pvc *corev1.PersistentVolumeClaim) (string, bool) {
	switch pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] {
	case corev1.PersistentVolumeClaimControllerResizeInfeasible, corev1.PersistentVolumeClaimNodeResizeInfeasible:
		return fmt.Sprintf("its volume cannot grow (%s)", pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage]), true
	}
	if rec := m.Status.Maintenance; rec != nil && rec.Kind == v1alpha1.MemberMaintenanceExpandVolume &&
		s.now.Sub(rec.Since.Time) >= volumeExpansionTimeout {
		return fmt.Sprintf("its volume did not grow within %s", volumeExpansionTimeout), true
	}
	return "", false
}

// expandVolume asks for a member's volume to grow to the target size: it
// sets the member's spec.volumeSize, and the member controller, the claim's
// one writer, grows the claim. The member keeps running; the kubelet grows
// its file system online, and the rollout restarts the member on it once it
// has, with the quota that the larger size gives.
func (r *Reconciler) expandVolume(ctx context.Context, s *scope, m *v1alpha1.EtcdMember) error {
	size := s.cluster.Status.Observed.Storage.EffectiveSize()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: v1alpha1.DataVolumeClaimName(m.Name)}, pvc); err != nil {
		return fmt.Errorf("failed to get the volume of EtcdMember %s: %w", m.Name, err)
	}
	if m.Status.Maintenance == nil {
		rec := &v1alpha1.MemberMaintenance{Kind: v1alpha1.MemberMaintenanceExpandVolume, Since: metav1.NewTime(s.now)}
		if err := r.setMaintenanceRecord(ctx, m, rec, m.Status.LastDefragTime); err != nil {
			return err
		}
	}
	from := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	patch := client.MergeFrom(m.DeepCopy())
	m.Spec.VolumeSize = &size
	if err := r.Patch(ctx, m, patch); err != nil {
		return fmt.Errorf("failed to ask for the volume of EtcdMember %s to grow: %w", m.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Growing a member's volume online", "member", m.Name, "from", from.String(), "to", size.String())
	r.event(s.cluster, corev1.EventTypeNormal, "VolumeExpanding", "ExpandVolume",
		"Growing the volume of member %s from %s to %s online; the member restarts on it once it has grown", m.Name, from.String(), size.String())
	s.setProgress(v1alpha1.RollingUpdateReason, "growing the volume of %s to %s", m.Name, size.String())
	return nil
}

// noteReplacedVolume says why a member whose volume changes is replaced
// rather than grown in place, when it had been asked to grow.
func (r *Reconciler) noteReplacedVolume(s *scope, m *v1alpha1.EtcdMember, why string) {
	if rec := m.Status.Maintenance; rec != nil && rec.Kind == v1alpha1.MemberMaintenanceExpandVolume {
		r.event(s.cluster, corev1.EventTypeWarning, "VolumeExpansionFailed", "ExpandVolume",
			"Replacing member %s instead of growing its volume: %s", m.Name, why)
	}
}
