//go:build envtest

package rbac_test

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/quorumctl/etcd-operator/test/testenv"
)

// apiserver is a real kube-apiserver (the local cluster's own binary, from
// KUBEBUILDER_ASSETS) with RBAC and admission policies on, and the chart's
// CRDs installed: the rendered chart's grants and policy are checked by the
// code that enforces them in production, without running an operator.
var apiserver *rest.Config

func TestMain(m *testing.M) {
	testenv.Main(m, root, func(cfg *rest.Config) error {
		apiserver = cfg
		return nil
	})
}
