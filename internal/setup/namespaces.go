package setup

import (
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// ParseNamespaces splits a comma separated namespace list, dropping blanks
// and duplicates. An empty result means every namespace.
func ParseNamespaces(list string) []string {
	var out []string
	for _, ns := range strings.Split(list, ",") {
		ns = strings.TrimSpace(ns)
		if ns == "" || slices.Contains(out, ns) {
			continue
		}
		out = append(out, ns)
	}
	return out
}

// CacheOptions scopes the manager's cache to namespaces; with none it
// watches the whole cluster.
func CacheOptions(namespaces []string) cache.Options {
	opts := cache.Options{ByObject: ownedObjectsOnly()}
	if len(namespaces) == 0 {
		return opts
	}
	defaults := make(map[string]cache.Config, len(namespaces))
	for _, ns := range namespaces {
		defaults[ns] = cache.Config{}
	}
	opts.DefaultNamespaces = defaults
	return opts
}

// ownedObjectsOnly limits the cache of core kinds to objects the operator
// labelled. Without it the manager would hold every Pod, ConfigMap, Service
// and claim of the cluster in memory to find the few it owns; a same-named
// object without the label is then invisible to reads and its create fails
// with AlreadyExists, which is the loud outcome wanted for a foreign object.
func ownedObjectsOnly() map[client.Object]cache.ByObject {
	owned := labels.SelectorFromSet(nil)
	if req, err := labels.NewRequirement(v1alpha1.ClusterLabel, selection.Exists, nil); err == nil {
		owned = owned.Add(*req)
	}
	byObject := map[client.Object]cache.ByObject{}
	for _, obj := range []client.Object{
		&corev1.Pod{}, &corev1.ConfigMap{}, &corev1.Service{}, &corev1.Secret{},
		&corev1.PersistentVolumeClaim{}, &policyv1.PodDisruptionBudget{},
		&batchv1.Job{}, &networkingv1.NetworkPolicy{},
	} {
		byObject[obj] = cache.ByObject{Label: owned}
	}
	return byObject
}
