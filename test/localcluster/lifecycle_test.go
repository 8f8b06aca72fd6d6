//go:build lifecycle

package localcluster_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumctl/etcd-operator/test/localcluster"
)

// TestUpDownUpDown proves cluster-down leaves nothing behind, twice over: no
// process, mount, interface, route, iptables chain or cgroup of the cluster
// survives, and a second cycle starts cleanly after the first.
func TestUpDownUpDown(t *testing.T) {
	wd, _ := os.Getwd()
	root, err := localcluster.FindRepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(root, "bin", "localcluster")
	if _, err := os.Stat(tool); err != nil {
		t.Fatalf("build the tool first (make bin/localcluster): %v", err)
	}
	layout, err := localcluster.NewLayout(root)
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(tool, args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		t.Logf("localcluster %s:\n%s", strings.Join(args, " "), out)
		if err != nil {
			t.Fatalf("localcluster %s failed: %v", strings.Join(args, " "), err)
		}
	}
	for cycle := 1; cycle <= 2; cycle++ {
		run("up")
		run("status")
		if len(layout.LeftoverProcesses()) == 0 {
			t.Fatalf("cycle %d: no cluster process found while the cluster is up; the leftover check would prove nothing", cycle)
		}
		run("down")
		if left := layout.Leftovers(context.Background()); len(left) > 0 {
			t.Fatalf("cycle %d: cluster-down left:\n  %s", cycle, strings.Join(left, "\n  "))
		}
	}
}
