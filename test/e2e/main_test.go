//go:build e2e

// Package e2e proves the operator, and the local cluster it runs on, against a
// real API server, kubelet, etcd, DNS and storage.
package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	var err error
	env, err = framework.Setup()
	if err != nil {
		// Never a skip: without a cluster the e2e suite has failed.
		fmt.Fprintf(os.Stderr, "e2e setup failed: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	env.Close()
	os.Exit(code)
}
