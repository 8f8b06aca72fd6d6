package pod

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/owner"
)

// env passes etcd the two flags that must be right at every start, not only
// at Pod creation, through the member's startup ConfigMap. A Pod spec cannot
// change, but the kubelet resolves a configMapKeyRef again each time it
// starts a container, so an in-place restart after a wipe reads the values
// the operator holds now. GOTRACEBACK=none keeps a panic's goroutine dump out
// of the container's termination message, so etcd's own fatal line stays in
// it for self-heal to classify; etcd's log entry still carries the stack.
func env(p Params) []corev1.EnvVar {
	name := v1alpha1.StartupConfigName(p.Member.Name)
	ref := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key,
		}}
	}
	// --force-new-cluster is in the ConfigMap only while the member is a
	// disaster recovery's survivor; optional, so that every other start
	// finds no such variable and etcd its default, false.
	force := ref(v1alpha1.StartupForceNewClusterKey)
	force.ConfigMapKeyRef.Optional = ptr.To(true)
	return []corev1.EnvVar{
		{Name: "GOTRACEBACK", Value: "none"},
		{Name: v1alpha1.StartupInitialClusterKey, ValueFrom: ref(v1alpha1.StartupInitialClusterKey)},
		{Name: v1alpha1.StartupInitialClusterStateKey, ValueFrom: ref(v1alpha1.StartupInitialClusterStateKey)},
		{Name: v1alpha1.StartupForceNewClusterKey, ValueFrom: force},
	}
}

// BuildStartupConfig is the member's startup ConfigMap: the
// --initial-cluster and --initial-cluster-state its next start must use,
// and --force-new-cluster while the member's spec asks for it.
func BuildStartupConfig(p Params) *corev1.ConfigMap {
	m := p.Member
	self := m.PeerURLIn(p.clusterDomain())
	labels := v1alpha1.MemberLabels(m.Spec.ClusterName, m.Name)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            v1alpha1.StartupConfigName(m.Name),
			Namespace:       p.namespace(),
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{ownerReference(m)},
		},
		Data: map[string]string{
			v1alpha1.StartupInitialClusterKey:      v1alpha1.InitialCluster(m, self),
			v1alpha1.StartupInitialClusterStateKey: v1alpha1.InitialClusterState(m, p.ClusterFormed),
		},
	}
	if m.Spec.ForceNewCluster {
		cm.Data[v1alpha1.StartupForceNewClusterKey] = "true"
	}
	return cm
}

// selfOnly is the --initial-cluster of a member that has booted.
func selfOnly(p Params) string {
	m := p.Member
	return m.Name + "=" + m.PeerURLIn(p.clusterDomain())
}

// keepForward makes the startup values only ever move forward: from "new"
// to "existing", and from etcd's member list to the self-only list a booted
// member gets. Going back can only come from a stale read of the member or
// its cluster, and either way back lets an empty data dir start as something
// it is not: a cluster of its own under "new", or a member rejoining under
// its old ID, without its raft state, under the full list.
func keepForward(existing, desired map[string]string, self string) {
	if existing[v1alpha1.StartupInitialClusterStateKey] != v1alpha1.InitialClusterStateExisting {
		return
	}
	desired[v1alpha1.StartupInitialClusterStateKey] = v1alpha1.InitialClusterStateExisting
	if existing[v1alpha1.StartupInitialClusterKey] == self {
		desired[v1alpha1.StartupInitialClusterKey] = self
	}
}

// SyncStartupConfig creates the startup ConfigMap or brings its data up to
// date, writing nothing when it already holds the desired values.
func SyncStartupConfig(ctx context.Context, c client.Client, p Params) error {
	desired := BuildStartupConfig(p)
	key := types.NamespacedName{Namespace: desired.Namespace, Name: desired.Name}
	existing := &corev1.ConfigMap{}
	err := c.Get(ctx, key, existing)
	switch {
	case apierrors.IsNotFound(err):
		if err := c.Create(ctx, desired, client.FieldOwner(v1alpha1.FieldOwner)); err != nil {
			return fmt.Errorf("failed to create ConfigMap %s: %w", key, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("failed to get ConfigMap %s: %w", key, err)
	}
	if err := owner.Check("ConfigMap", existing, p.Member.UID); err != nil {
		return err
	}
	keepForward(existing.Data, desired.Data, selfOnly(p))
	if maps.Equal(existing.Data, desired.Data) {
		return nil
	}
	patch := client.MergeFrom(existing.DeepCopy())
	existing.Data = desired.Data
	if err := c.Patch(ctx, existing, patch, client.FieldOwner(v1alpha1.FieldOwner)); err != nil {
		return fmt.Errorf("failed to update ConfigMap %s: %w", key, err)
	}
	return nil
}
