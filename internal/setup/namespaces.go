package setup

import (
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/cache"
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
	if len(namespaces) == 0 {
		return cache.Options{}
	}
	defaults := make(map[string]cache.Config, len(namespaces))
	for _, ns := range namespaces {
		defaults[ns] = cache.Config{}
	}
	return cache.Options{DefaultNamespaces: defaults}
}
