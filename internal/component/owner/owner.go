// Package owner decides whether an existing object belongs to the operator
// object that wants it. Children are never adopted: a Pod, claim, ConfigMap
// or Service with the right name but another controller may be left over from
// an earlier object of the same name, and would carry its flags or its data.
package owner

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// NotOwnedError reports an object with the wanted name that is not
// controlled by the expected owner.
type NotOwnedError struct {
	Kind      string
	Namespace string
	Name      string
	// OwnerUID is the UID the object should have been controlled by.
	OwnerUID types.UID
	// Controller is the object's actual controller, nil if it has none.
	Controller *metav1.OwnerReference
	// Unlabelled: the object is not even in the operator's cache, which
	// holds only what carries the cluster label; its create was refused as
	// already existing.
	Unlabelled bool
}

func (e *NotOwnedError) Error() string {
	if e.Unlabelled {
		return fmt.Sprintf("%s %s/%s already exists and is not the operator's (it lacks the %s label); refusing to adopt it for owner UID %s",
			e.Kind, e.Namespace, e.Name, v1alpha1.ClusterLabel, e.OwnerUID)
	}
	if e.Controller == nil {
		return fmt.Sprintf("%s %s/%s exists without a controller; refusing to adopt it for owner UID %s",
			e.Kind, e.Namespace, e.Name, e.OwnerUID)
	}
	return fmt.Sprintf("%s %s/%s is controlled by %s %s (UID %s), not by owner UID %s",
		e.Kind, e.Namespace, e.Name, e.Controller.Kind, e.Controller.Name, e.Controller.UID, e.OwnerUID)
}

// CreateConflict turns a create refused with AlreadyExists into a
// *NotOwnedError: the operator's cache holds only objects with the cluster
// label, so a name it could not find but the API server has belongs to
// someone else. Any other error is returned as it is.
func CreateConflict(kind string, obj client.Object, ownerUID types.UID, err error) error {
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	return &NotOwnedError{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), OwnerUID: ownerUID, Unlabelled: true}
}

// Check returns a *NotOwnedError unless obj is controlled by ownerUID.
func Check(kind string, obj client.Object, ownerUID types.UID) error {
	ref := metav1.GetControllerOf(obj)
	if ref != nil && ref.UID == ownerUID {
		return nil
	}
	return &NotOwnedError{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), OwnerUID: ownerUID, Controller: ref}
}
