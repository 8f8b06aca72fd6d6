// Package owner decides whether an existing object belongs to the operator
// object that wants it. Children are never adopted: a Pod, claim, ConfigMap
// or Service with the right name but another controller may be left over from
// an earlier object of the same name, and would carry its flags or its data.
package owner

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
}

func (e *NotOwnedError) Error() string {
	if e.Controller == nil {
		return fmt.Sprintf("%s %s/%s exists without a controller; refusing to adopt it for owner UID %s",
			e.Kind, e.Namespace, e.Name, e.OwnerUID)
	}
	return fmt.Sprintf("%s %s/%s is controlled by %s %s (UID %s), not by owner UID %s",
		e.Kind, e.Namespace, e.Name, e.Controller.Kind, e.Controller.Name, e.Controller.UID, e.OwnerUID)
}

// Check returns a *NotOwnedError unless obj is controlled by ownerUID.
func Check(kind string, obj client.Object, ownerUID types.UID) error {
	ref := metav1.GetControllerOf(obj)
	if ref != nil && ref.UID == ownerUID {
		return nil
	}
	return &NotOwnedError{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), OwnerUID: ownerUID, Controller: ref}
}
