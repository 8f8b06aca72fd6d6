package netpol

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/owner"
)

// NotPermittedError reports that the operator may not manage the
// cluster's NetworkPolicy: its role lacks the permission, or an admission
// policy refused the request.
type NotPermittedError struct {
	// Verb is what was refused, such as "create"; "list and watch" when
	// the operator found at its start that it may not watch
	// NetworkPolicies and so keeps none.
	Verb      string
	Namespace string
	Name      string
	// Err is the API server's refusal; nil for the check at start.
	Err error
}

func (e *NotPermittedError) Error() string {
	what := fmt.Sprintf("the operator may not %s NetworkPolicy %s/%s", e.Verb, e.Namespace, e.Name)
	if e.Err == nil {
		what = fmt.Sprintf("the operator may not %s NetworkPolicies (checked when it started), so it keeps none", e.Verb)
	} else {
		what += ": " + e.Err.Error()
	}
	return what + "; grant it get, list, watch, create, patch and delete on networkpolicies in networking.k8s.io" +
		" and restart it, or set spec.networkPolicy.enabled to false"
}

func (e *NotPermittedError) Unwrap() error { return e.Err }

// refused wraps a failed request: a Forbidden one as a *NotPermittedError.
func refused(verb string, key client.ObjectKey, err error) error {
	if apierrors.IsForbidden(err) {
		return &NotPermittedError{Verb: verb, Namespace: key.Namespace, Name: key.Name, Err: err}
	}
	return fmt.Errorf("failed to %s NetworkPolicy %s: %w", verb, key, err)
}

// Sync creates the policy or brings its spec back to desired, writing
// nothing when it already matches: an idle operator makes no API writes. A
// live policy of the name that the cluster does not control yields a
// *owner.NotOwnedError and is left alone.
func Sync(ctx context.Context, c client.Client, desired *networkingv1.NetworkPolicy) error {
	key := client.ObjectKeyFromObject(desired)
	ownerUID := desired.OwnerReferences[0].UID
	live := &networkingv1.NetworkPolicy{}
	err := c.Get(ctx, key, live)
	switch {
	case apierrors.IsNotFound(err):
		if err := c.Create(ctx, desired.DeepCopy(), client.FieldOwner(v1alpha1.FieldOwner)); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("failed to create NetworkPolicy %s: %w", key, owner.CreateConflict("NetworkPolicy", desired, ownerUID, err))
			}
			return refused("create", key, err)
		}
		return nil
	case err != nil:
		return refused("get", key, err)
	}
	if err := owner.Check("NetworkPolicy", live, ownerUID); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(live.Spec, desired.Spec) {
		return nil
	}
	// A merge patch replaces the ingress list whole: whatever was added to
	// the live policy by hand goes, which is what keeping it means.
	patch := client.MergeFrom(live.DeepCopy())
	live.Spec = *desired.Spec.DeepCopy()
	if err := c.Patch(ctx, live, patch, client.FieldOwner(v1alpha1.FieldOwner)); err != nil {
		return refused("patch", key, err)
	}
	return nil
}

// Delete removes the cluster's policy if it exists and is the cluster's.
func Delete(ctx context.Context, c client.Client, cluster *v1alpha1.EtcdCluster) error {
	key := client.ObjectKey{Namespace: cluster.Namespace, Name: v1alpha1.NetworkPolicyName(cluster.Name)}
	live := &networkingv1.NetworkPolicy{}
	err := c.Get(ctx, key, live)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return refused("get", key, err)
	}
	if owner.Check("NetworkPolicy", live, cluster.UID) != nil {
		return nil
	}
	if err := c.Delete(ctx, live); client.IgnoreNotFound(err) != nil {
		return refused("delete", key, err)
	}
	return nil
}
