package etcdmember

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
)

const requeueTLSMaterial = 2 * time.Second

// missingTLSMaterial names the first Secret or ConfigMap the member's Pod
// would mount that does not exist yet, or "".
func (r *Reconciler) missingTLSMaterial(ctx context.Context, m *v1alpha1.EtcdMember) (string, error) {
	secret, configMaps := pod.TLSMaterialNames(m)
	if secret == "" {
		return "", nil
	}
	objs := []client.Object{&corev1.Secret{}}
	names := []string{secret}
	for _, cm := range configMaps {
		objs = append(objs, &corev1.ConfigMap{})
		names = append(names, cm)
	}
	for i, obj := range objs {
		err := r.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: names[i]}, obj)
		switch {
		case apierrors.IsNotFound(err):
			return names[i], nil
		case err != nil:
			return "", fmt.Errorf("failed to get %s: %w", names[i], err)
		}
	}
	return "", nil
}
