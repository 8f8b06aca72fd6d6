package pvc

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/owner"
)

// Build returns the data volume claim of a member, or nil for a member on the
// Memory medium, which keeps its data in the Pod.
//
// The claim is owned by the member rather than by its Pod so that it outlives
// every Pod the member runs in.
func Build(m *v1alpha1.EtcdMember) *corev1.PersistentVolumeClaim {
	if m.Spec.Storage.Medium == v1alpha1.StorageMediumMemory {
		return nil
	}

	labels := map[string]string{}
	var annotations map[string]string
	if md := m.Spec.AdditionalMetadata; md != nil {
		maps.Copy(labels, md.Labels)
		if len(md.Annotations) > 0 {
			annotations = maps.Clone(md.Annotations)
		}
	}
	// The role label belongs on Pods only; a volume never receives traffic.
	delete(labels, v1alpha1.RoleLabel)
	maps.Copy(labels, v1alpha1.MemberLabels(m.Spec.ClusterName, m.Name))

	var storageClass *string
	if m.Spec.Storage.StorageClassName != nil {
		storageClass = ptr.To(*m.Spec.Storage.StorageClassName)
	}

	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        v1alpha1.DataVolumeClaimName(m.Name),
			Namespace:   m.Namespace,
			Labels:      labels,
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(),
				Kind:       "EtcdMember",
				Name:       m.Name,
				UID:        m.UID,
				Controller: ptr.To(true),
				// A foreground deletion of the member waits for its data.
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			// Exactly one Pod of a member ever runs at a time; the operator,
			// not the access mode, enforces that, since ReadWriteOncePod is
			// unsupported by non-CSI provisioners.
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: size(m)},
			},
			// Copied as-is: nil asks for the default class, "" for none.
			StorageClassName: storageClass,
		},
	}
}

// size is the request a new claim is made with: the template's size, or the
// size the member's volume was asked to grow to (spec.volumeSize) when that
// is larger, so that a claim made again is not made small and then grown.
func size(m *v1alpha1.EtcdMember) resource.Quantity {
	s := m.Spec.Storage.EffectiveSize()
	if v := m.Spec.VolumeSize; v != nil && v.Cmp(s) > 0 {
		return v.DeepCopy()
	}
	return s
}

// Ensure returns the member's claim, creating it if it does not exist, or nil
// for a Memory member.
//
// An existing claim is never updated here: its class and access modes are
// immutable, and growing it is a resize with its own failure modes, not a
// side effect of reconciling; Grow does that, when asked. A claim of that
// name not controlled by this member's UID yields a *owner.NotOwnedError.
func Ensure(ctx context.Context, c client.Client, m *v1alpha1.EtcdMember) (*corev1.PersistentVolumeClaim, error) {
	desired := Build(m)
	if desired == nil {
		return nil, nil
	}
	if existing, err := Get(ctx, c, m); existing != nil || err != nil {
		return existing, err
	}
	key := client.ObjectKeyFromObject(desired)
	if err := c.Create(ctx, desired, client.FieldOwner(v1alpha1.FieldOwner)); err != nil {
		return nil, fmt.Errorf("failed to create PersistentVolumeClaim %s: %w", key, err)
	}
	return desired, nil
}

// Get returns the member's claim, or nil when it has none (a Memory member
// never has). A claim of that name not controlled by this member's UID
// yields a *owner.NotOwnedError.
func Get(ctx context.Context, c client.Client, m *v1alpha1.EtcdMember) (*corev1.PersistentVolumeClaim, error) {
	if m.Spec.Storage.Medium == v1alpha1.StorageMediumMemory {
		return nil, nil
	}
	key := client.ObjectKey{Namespace: m.Namespace, Name: v1alpha1.DataVolumeClaimName(m.Name)}
	existing := &corev1.PersistentVolumeClaim{}
	err := c.Get(ctx, key, existing)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get PersistentVolumeClaim %s: %w", key, err)
	}
	if err := owner.Check("PersistentVolumeClaim", existing, m.UID); err != nil {
		return nil, err
	}
	return existing, nil
}

// Grow raises an existing claim's storage request to the member's
// spec.volumeSize, and returns the request it had, and whether it asked for
// more. The cluster controller decides when a volume grows (one member at a
// time, where its StorageClass allows it) and says so in the member's spec;
// this is the member's side of it, so that the claim has one writer. The
// template's storage.size alone never grows a claim: it reaches the member
// only once its volume has grown, or on a new member with a new claim.
//
// A claim that is not bound yet is left as it is: Kubernetes resizes only
// bound claims. Its binding is a change of the claim, which the member
// controller watches, so the member is reconciled again then.
func Grow(ctx context.Context, c client.Client, m *v1alpha1.EtcdMember, claim *corev1.PersistentVolumeClaim) (resource.Quantity, bool, error) {
	from := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	want := m.Spec.VolumeSize
	if want == nil || from.Cmp(*want) >= 0 || claim.Status.Phase != corev1.ClaimBound {
		return from, false, nil
	}
	patch := client.MergeFrom(claim.DeepCopy())
	if claim.Spec.Resources.Requests == nil {
		claim.Spec.Resources.Requests = corev1.ResourceList{}
	}
	claim.Spec.Resources.Requests[corev1.ResourceStorage] = want.DeepCopy()
	if err := c.Patch(ctx, claim, patch, client.FieldOwner(v1alpha1.FieldOwner)); err != nil {
		return from, false, fmt.Errorf("failed to grow PersistentVolumeClaim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return from, true, nil
}
