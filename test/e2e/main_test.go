//go:build e2e

// Package e2e proves the operator, and the local cluster it runs on, against a
// real API server, kubelet, etcd, DNS and storage.
//
// Each test works in namespaces of its own. A test that touches nothing
// else calls t.Parallel; a test that disturbs what every test shares (it
// stops the operator, stops or drains a node, or changes the operator's
// settings) calls framework.Serial instead, and the helpers that do those
// things call it too. Go runs the serial tests first, one at a time, and
// then all the parallel tests together, so a serial test never overlaps
// another; framework.Serial makes a serial test that is also marked
// parallel fail.
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
