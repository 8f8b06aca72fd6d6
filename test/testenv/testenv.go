// Package testenv runs the envtest tests' API server: a real
// kube-apiserver and etcd (the local cluster's own binaries, from
// KUBEBUILDER_ASSETS) with the chart's CRDs installed.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Main starts the API server, hands its config to ready, runs the tests
// and exits with their code. root is the module's root, relative to the
// test's package.
func Main(m *testing.M, root string, ready func(*rest.Config) error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set; run through make test-envtest")
		os.Exit(1)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "charts", "etcd-operator", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "failed to start envtest: %v\n", err)
		os.Exit(1)
	}
	if err := ready(cfg); err != nil {
		_ = env.Stop()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}
