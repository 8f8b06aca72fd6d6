// Package pdb builds and applies a cluster's PodDisruptionBudget. It covers
// voters only and keeps a quorum of the larger of the live voters and the
// target size, so a drain can never take the cluster below quorum, during a
// scale as much as at rest.
package pdb

import (
	"context"
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/owner"
	"github.com/quorumctl/etcd-operator/internal/quorum"
)

// MinAvailable is the quorum of the larger of the live voters and the target.
func MinAvailable(liveVoters, target int) int32 {
	return int32(quorum.Size(max(liveVoters, target)))
}

// Build is the cluster's PodDisruptionBudget.
func Build(c *v1alpha1.EtcdCluster, minAvailable int32) *policyv1.PodDisruptionBudget {
	labels := v1alpha1.ClusterLabels(c.Name)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Name:      c.Name,
			Namespace: c.Namespace,
			Labels:    labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "EtcdCluster", Name: c.Name, UID: c.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(minAvailable)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{
				v1alpha1.ClusterLabel: c.Name,
				v1alpha1.RoleLabel:    v1alpha1.RoleLabelVoter,
			}},
		},
	}
}

// Sync creates the budget or brings its spec up to date, writing nothing
// when it already matches.
func Sync(ctx context.Context, c client.Client, desired *policyv1.PodDisruptionBudget) error {
	key := client.ObjectKeyFromObject(desired)
	live := &policyv1.PodDisruptionBudget{}
	err := c.Get(ctx, key, live)
	switch {
	case apierrors.IsNotFound(err):
		if err := c.Create(ctx, desired, client.FieldOwner(v1alpha1.FieldOwner)); err != nil {
			return fmt.Errorf("failed to create PodDisruptionBudget %s: %w", key,
				owner.CreateConflict("PodDisruptionBudget", desired, desired.OwnerReferences[0].UID, err))
		}
		return nil
	case err != nil:
		return fmt.Errorf("failed to get PodDisruptionBudget %s: %w", key, err)
	}
	if err := owner.Check("PodDisruptionBudget", live, desired.OwnerReferences[0].UID); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(live.Spec.MinAvailable, desired.Spec.MinAvailable) &&
		equality.Semantic.DeepEqual(live.Spec.Selector, desired.Spec.Selector) {
		return nil
	}
	patch := client.MergeFrom(live.DeepCopy())
	live.Spec.MinAvailable = desired.Spec.MinAvailable
	live.Spec.Selector = desired.Spec.Selector
	if err := c.Patch(ctx, live, patch, client.FieldOwner(v1alpha1.FieldOwner)); err != nil {
		return fmt.Errorf("failed to patch PodDisruptionBudget %s: %w", key, err)
	}
	return nil
}

// Delete removes the cluster's budget if it exists and is ours.
func Delete(ctx context.Context, c client.Client, cluster *v1alpha1.EtcdCluster) error {
	live := &policyv1.PodDisruptionBudget{}
	err := c.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: cluster.Name}, live)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to get PodDisruptionBudget %s: %w", cluster.Name, err)
	}
	if owner.Check("PodDisruptionBudget", live, cluster.UID) != nil {
		return nil
	}
	if err := c.Delete(ctx, live); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to delete PodDisruptionBudget %s: %w", cluster.Name, err)
	}
	return nil
}
