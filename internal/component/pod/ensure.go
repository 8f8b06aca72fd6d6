package pod

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/owner"
)

// ErrMemberPending is returned by Ensure for a member whose etcd-side add is
// not finished. Starting it anyway would run etcd with an empty
// --initial-cluster, which etcd replaces with a localhost default that can
// never be this member's cluster.
var ErrMemberPending = errors.New("member is pending: spec.initialCluster is empty")

// Ensure returns the member's Pod, creating it from Build if it does not exist.
//
// An existing Pod is returned as it is and never updated. Almost all of a
// Pod's spec is immutable, and what etcd does with its bootstrap flags is
// decided on first start: re-templating a running member could not change
// anything that matters and would hide that the Pod no longer matches its
// member. A Pod that must change is deleted and re-created by the caller.
//
// A Pod of that name not controlled by this member's UID yields a
// *owner.NotOwnedError. A Pod that is being deleted is returned too; callers must
// check DeletionTimestamp before treating it as running.
func Ensure(ctx context.Context, c client.Client, p Params) (*corev1.Pod, error) {
	m := p.Member
	key := types.NamespacedName{Namespace: p.namespace(), Name: m.Name}

	existing := &corev1.Pod{}
	err := c.Get(ctx, key, existing)
	switch {
	case err == nil:
		if err := owner.Check("Pod", existing, m.UID); err != nil {
			return nil, err
		}
		return existing, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("failed to get Pod %s: %w", key, err)
	}

	if m.Pending() {
		return nil, fmt.Errorf("failed to create Pod %s: %w", key, ErrMemberPending)
	}
	desired := Build(p)
	// An AlreadyExists here means the cache is behind a Pod created moments
	// ago; the error requeues and the next Get sees it.
	if err := c.Create(ctx, desired, client.FieldOwner(v1alpha1.FieldOwner)); err != nil {
		return nil, &CreateError{Key: key, Err: err}
	}
	return desired, nil
}

// CreateError is a create of the member's Pod that failed, told apart from
// a failed read so that only the API server's answer to the create is
// reported as the Pod's refusal.
type CreateError struct {
	Key types.NamespacedName
	Err error
}

func (e *CreateError) Error() string { return fmt.Sprintf("failed to create Pod %s: %v", e.Key, e.Err) }
func (e *CreateError) Unwrap() error { return e.Err }

// SetRoleLabel makes the Pod carry the voter role label exactly when voter is
// true. It patches only that label, and writes nothing when the label is
// already right so an idle operator makes no API calls. The Pod is updated in
// place from the server's response.
func SetRoleLabel(ctx context.Context, c client.Client, pod *corev1.Pod, voter bool) error {
	value, has := pod.Labels[v1alpha1.RoleLabel]
	if voter && value == v1alpha1.RoleLabelVoter || !voter && !has {
		return nil
	}
	// A merge patch of labels alone, without a resourceVersion, cannot
	// conflict with or clobber anything else written to the Pod.
	before := pod.DeepCopy()
	if voter {
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[v1alpha1.RoleLabel] = v1alpha1.RoleLabelVoter
	} else {
		delete(pod.Labels, v1alpha1.RoleLabel)
	}
	if err := c.Patch(ctx, pod, client.MergeFrom(before), client.FieldOwner(v1alpha1.FieldOwner)); err != nil {
		return fmt.Errorf("failed to patch Pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
