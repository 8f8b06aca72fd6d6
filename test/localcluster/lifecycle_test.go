//go:build lifecycle

package localcluster_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/quorumctl/etcd-operator/test/localcluster"
)

// lifecycleNodes is what the e2e suite runs on, so every node's parts are
// proven to go.
const lifecycleNodes = 3

// TestUpDownUpDown proves cluster-down leaves nothing behind, twice over: no
// process, mount, interface, route, iptables chain or cgroup of any node
// survives, a node that node stop took down included, and a second cycle
// starts cleanly after the first. The add-ons' processes are among what must
// go: cert-manager's controller is checked to run while the cluster is up.
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
		run("up", "--nodes", fmt.Sprint(lifecycleNodes))
		run("status")
		nodes, err := layout.RunningNodes()
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes) != lifecycleNodes {
			t.Fatalf("cycle %d: the plan has %d nodes, want %d", cycle, len(nodes), lifecycleNodes)
		}
		for _, n := range nodes {
			if len(layout.NodeProcesses(n)) == 0 {
				t.Fatalf("cycle %d: no process of %s found while the cluster is up; the leftover check would prove nothing", cycle, n.Name)
			}
		}
		if len(processesRunning("/cert-manager-controller")) == 0 {
			t.Fatalf("cycle %d: cert-manager's controller is not running while the cluster is up", cycle)
		}
		if cycle == 1 {
			// A lost node leaves what a graceful stop would have cleaned
			// up: dead sandboxes' mounts and namespaces, its drop chain.
			lost := nodes[len(nodes)-1]
			run("node", "stop", lost.Name)
			if left := layout.NodeProcesses(lost); len(left) > 0 {
				t.Fatalf("node stop %s left processes %v", lost.Name, left)
			}
		}
		run("down")
		if left := layout.Leftovers(context.Background()); len(left) > 0 {
			t.Fatalf("cycle %d: cluster-down left:\n  %s", cycle, strings.Join(left, "\n  "))
		}
		if left := processesRunning("/cert-manager-controller"); len(left) > 0 {
			t.Fatalf("cycle %d: cert-manager's controller survived cluster-down: pids %v", cycle, left)
		}
	}
}

// processesRunning lists the processes whose command is argv0.
func processesRunning(argv0 string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if first, _, _ := strings.Cut(string(cmdline), "\x00"); first == argv0 {
			pids = append(pids, pid)
		}
	}
	return pids
}
