package setup

import (
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The metrics endpoint reviews each scrape's bearer token and its access to
// the /metrics path with the API server.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// DefaultMetricsBindAddress is where the operator serves its metrics.
const DefaultMetricsBindAddress = ":8443"

// MetricsServerOptions serves the operator's metrics over HTTPS to callers
// the API server authenticates (a ServiceAccount's token, say) and
// authorizes for get on the non-resource URL /metrics (the chart's
// <release>-metrics-reader ClusterRole). The series name every EtcdCluster
// the operator manages, its members' health and its snapshots: not for
// anyone who can reach the Pod. Without a certificate in certDir the server
// makes a self-signed one at start, so scrapers skip its verification or
// are given the CA of a certificate mounted there.
func MetricsServerOptions(bindAddress, certDir string) metricsserver.Options {
	return metricsserver.Options{
		BindAddress:    bindAddress,
		SecureServing:  true,
		CertDir:        certDir,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
	}
}
