//go:build envtest

package rbac_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// apiserver is a real kube-apiserver (the local cluster's own binary, from
// KUBEBUILDER_ASSETS) with RBAC and admission policies on, and the chart's
// CRDs installed: the rendered chart's grants and policy are checked by the
// code that enforces them in production, without running an operator.
var apiserver *rest.Config

func TestMain(m *testing.M) {
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
	apiserver = cfg
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}
