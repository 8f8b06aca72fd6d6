package localcluster

import (
	"context"
)

// prometheusBuild is upstream Prometheus and promtool with Kubernetes service
// discovery as the only optional discovery mechanism. Debian's package is
// built without Kubernetes discovery, and the e2e metrics test must discover
// Pods the way a Prometheus in a real cluster does. The build tags are
// Prometheus' own switches for leaving discovery plugins out; file and HTTP
// discovery are always in.
func prometheusBuild(v Versions) goBuild {
	return goBuild{
		name:    "prometheus-" + v.Prometheus + "-kubernetes-sd",
		require: []string{"github.com/prometheus/prometheus@" + v.Prometheus},
		binaries: map[string]string{
			"prometheus": "github.com/prometheus/prometheus/cmd/prometheus",
			"promtool":   "github.com/prometheus/prometheus/cmd/promtool",
		},
		tags:    []string{"remove_all_sd", "enable_kubernetes_sd"},
		ldflags: "-X github.com/prometheus/common/version.Version=" + v.Prometheus,
	}
}

// PrometheusBinaries returns the directory holding prometheus and promtool,
// building them on first use. They are test tools, not part of the cluster:
// nothing starts them here.
func (l Layout) PrometheusBinaries(ctx context.Context, p *Progress) (string, error) {
	v, err := LoadVersions(l.RepoRoot)
	if err != nil {
		return "", err
	}
	return l.ensureBuilt(ctx, p, prometheusBuild(v))
}

// CachedPrometheusBinaries returns where PrometheusBinaries puts them,
// without building; the directory may not exist.
func (l Layout) CachedPrometheusBinaries(v Versions) string {
	return l.binCacheDir(prometheusBuild(v).name)
}
