package service

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/owner"
)

// Sync makes the live Service match desired in the fields the operator owns:
// selector, ports, publishNotReadyAddresses, and the labels and annotations
// desired carries. It creates the Service if it is absent and writes nothing
// if nothing drifted, so an idle operator makes no API writes.
//
// Everything else is left to the API server and other writers: the cluster IP
// and IP families it allocates, and any labels or annotations added by
// others. Labels dropped from additional metadata are therefore not removed
// from a live Service, since nothing records that the operator once set them.
//
// When desired has a controller reference, a live Service controlled by
// anything else yields a *owner.NotOwnedError and is left alone.
func Sync(ctx context.Context, c client.Client, desired *corev1.Service) error {
	key := client.ObjectKeyFromObject(desired)

	live := &corev1.Service{}
	if err := c.Get(ctx, key, live); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to get Service %s: %w", key, err)
		}
		// Create a copy: Create fills in server fields, and desired is the
		// caller's.
		if err := c.Create(ctx, desired.DeepCopy(), client.FieldOwner(v1alpha1.FieldOwner)); err != nil {
			if ref := metav1.GetControllerOf(desired); ref != nil {
				err = owner.CreateConflict("Service", desired, ref.UID, err)
			}
			return fmt.Errorf("failed to create Service %s: %w", key, err)
		}
		return nil
	}

	if want := metav1.GetControllerOf(desired); want != nil {
		if err := owner.Check("Service", live, want.UID); err != nil {
			return err
		}
	}

	merged := withOwnedFields(live, desired)
	if equality.Semantic.DeepEqual(live, merged) {
		return nil
	}
	// A JSON merge patch from the live object carries only what changed, and
	// replaces lists such as ports whole, which is what owning them means.
	if err := c.Patch(ctx, merged, client.MergeFrom(live), client.FieldOwner(v1alpha1.FieldOwner)); err != nil {
		return fmt.Errorf("failed to patch Service %s: %w", key, err)
	}
	return nil
}

// withOwnedFields returns a copy of live with every field Sync owns taken from
// desired. Comparing it with live is the drift check, so there is one
// definition of what Sync owns.
func withOwnedFields(live, desired *corev1.Service) *corev1.Service {
	out := live.DeepCopy()
	out.Spec.Selector = maps.Clone(desired.Spec.Selector)
	out.Spec.PublishNotReadyAddresses = desired.Spec.PublishNotReadyAddresses
	out.Spec.Ports = ownedPorts(live.Spec.Ports, desired.Spec.Ports)
	out.Labels = overlay(out.Labels, desired.Labels)
	out.Annotations = overlay(out.Annotations, desired.Annotations)
	return out
}

// ownedPorts is desired's ports, keeping node ports the API server allocated
// to ports of the same name. Dropping them would make the server allocate new
// ones, which would look like drift again on the next pass and loop forever if
// someone turned the Service into a NodePort one.
func ownedPorts(live, desired []corev1.ServicePort) []corev1.ServicePort {
	nodePorts := map[string]int32{}
	for _, p := range live {
		if p.NodePort != 0 {
			nodePorts[p.Name] = p.NodePort
		}
	}
	out := make([]corev1.ServicePort, len(desired))
	for i, p := range desired {
		out[i] = *p.DeepCopy()
		if out[i].NodePort == 0 {
			out[i].NodePort = nodePorts[p.Name]
		}
	}
	return out
}

// overlay sets every key of add on base, allocating only when there is
// something to add so that a nil map stays nil.
func overlay(base, add map[string]string) map[string]string {
	if len(add) == 0 {
		return base
	}
	if base == nil {
		base = make(map[string]string, len(add))
	}
	maps.Copy(base, add)
	return base
}
