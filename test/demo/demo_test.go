//go:build demo

// Package demo tests make demo itself: from a clean state dir it must end
// with a healthy cluster and the commands to use it, and a second run must
// succeed while changing nothing.
package demo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumctl/etcd-operator/test/localcluster"
)

// demoNodes is the local cluster the demo brings up here: the demo's three
// members get a node each, as the e2e suite's clusters do.
const demoNodes = "3"

func TestMakeDemo(t *testing.T) {
	wd, _ := os.Getwd()
	root, err := localcluster.FindRepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	layout, err := localcluster.NewLayout(root)
	if err != nil {
		t.Fatal(err)
	}
	if pid := layout.SupervisorPID(); pid != 0 {
		t.Fatalf("a local cluster is already running (pid %d); the demo test starts from a clean state", pid)
	}
	// No kubeconfig answers, as on a fresh machine: the demo must bring the
	// local cluster up itself.
	noCluster := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	run := func(label string) string {
		t.Helper()
		cmd := exec.Command("make", "--no-print-directory", "demo", "NODES="+demoNodes)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "KUBECONFIG="+noCluster)
		out, err := cmd.CombinedOutput()
		t.Logf("%s run of make demo:\n%s", label, out)
		if err != nil {
			t.Fatalf("%s run of make demo failed: %v", label, err)
		}
		return string(out)
	}

	first := run("first")
	for _, want := range []string{
		"bringing up the local cluster (" + demoNodes + " node(s))",
		"local cluster is ready",
		"installing the operator chart",
		"creating EtcdCluster etcd-demo/example",
		"EtcdCluster example is Available with 3 ready members",
		"etcdctl --endpoints=http://example-client:2379 member list",
		"make cluster-down",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("first run: output lacks %q", want)
		}
	}

	t.Log("the printed connect command works as printed")
	connect := printedConnectCommand(t, first)
	cmd := exec.Command("sh", "-c", connect)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the printed connect command failed: %v\n%s\n%s", err, connect, out)
	}
	if started := strings.Count(string(out), "started"); started != 3 {
		t.Errorf("the printed connect command lists %d started members, want 3:\n%s", started, out)
	}

	second := run("second")
	for _, want := range []string{
		"local cluster already running",
		"the operator chart is already installed",
		"EtcdCluster etcd-demo/example already exists",
		"EtcdCluster example is Available with 3 ready members",
	} {
		if !strings.Contains(second, want) {
			t.Errorf("second run: output lacks %q", want)
		}
	}
	for _, unwanted := range []string{"installing the operator chart", "creating EtcdCluster", "starting the supervisor"} {
		if strings.Contains(second, unwanted) {
			t.Errorf("second run redid work: output contains %q", unwanted)
		}
	}
}

// printedConnectCommand is the export line and the kubectl exec line under
// "Connect with etcdctl:", joined to run in one shell.
func printedConnectCommand(t *testing.T, output string) string {
	t.Helper()
	_, after, found := strings.Cut(output, "Connect with etcdctl:\n")
	if !found {
		t.Fatalf("no connect section in the output")
	}
	lines := strings.SplitN(after, "\n", 3)
	if len(lines) < 2 || !strings.HasPrefix(strings.TrimSpace(lines[0]), "export KUBECONFIG=") ||
		!strings.Contains(lines[1], " exec ") {
		t.Fatalf("unexpected connect section: %q", lines)
	}
	return strings.TrimSpace(lines[0]) + " && " + strings.TrimSpace(lines[1])
}
