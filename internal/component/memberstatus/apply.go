package memberstatus

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// Option changes one apply.
type Option func(*options)

type options struct {
	ifUnchanged bool
}

// IfUnchanged sends the resourceVersion m was read at, so that the API
// server refuses the apply (a Conflict) if the member changed since: for an
// apply that restates a field of its concern from the read rather than
// deciding it.
func IfUnchanged() Option { return func(o *options) { o.ifUnchanged = true } }

// Apply writes the concern's fields of m.Status, and only those, under the
// concern's field manager; m becomes what the API server then holds, so a
// change to another concern's field of m is lost unless applied first. A
// field of the concern that m leaves empty is removed.
//
// The first write to a member written before field managers were split
// hands the old writer's status fields to their concerns (upgrade), so that
// a field that writer set can still be cleared by the concern that owns it.
func Apply(ctx context.Context, c client.Client, m *v1alpha1.EtcdMember, concern Concern, opts ...Option) error {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if err := upgrade(ctx, c, m); err != nil {
		return err
	}
	part := concern.Project(&m.Status)
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&part)
	if err != nil {
		return fmt.Errorf("failed to encode the status of EtcdMember %s: %w", m.Name, err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("EtcdMember"))
	u.SetNamespace(m.Namespace)
	u.SetName(m.Name)
	if o.ifUnchanged {
		u.SetResourceVersion(m.ResourceVersion)
	}
	// Forced: the concern is this manager's alone, so a conflict can only
	// be with a writer from before the split, which the upgrade missed.
	if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(concern.Manager), client.ForceOwnership); err != nil {
		return err
	}
	got := &v1alpha1.EtcdMember{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, got); err != nil {
		return fmt.Errorf("failed to decode EtcdMember %s: %w", m.Name, err)
	}
	*m = *got
	return nil
}
