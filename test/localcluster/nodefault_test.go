package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestNodesAreDistinct(t *testing.T) {
	seen := map[string]string{}
	for i := 0; i < MaxNodes; i++ {
		n := NodeAt(i)
		for _, v := range []string{n.Name, n.Bridge, n.Subnet, n.IP, n.Zone} {
			if other, dup := seen[v]; dup {
				t.Fatalf("%s and %s share %q", other, n.Name, v)
			}
			seen[v] = n.Name
		}
		_, subnet, err := net.ParseCIDR(n.Subnet)
		if err != nil || !subnet.Contains(net.ParseIP(n.IP)) {
			t.Fatalf("%s: node IP %s outside its subnet %s (%v)", n.Name, n.IP, n.Subnet, err)
		}
		first, last, _ := strings.Cut(n.podIPRange(), "-")
		for _, ip := range []string{first, last} {
			if !subnet.Contains(net.ParseIP(ip)) {
				t.Fatalf("%s: Pod range %s leaves the subnet", n.Name, n.podIPRange())
			}
		}
		if first == n.IP || last == n.IP || !strings.HasSuffix(first, ".2") {
			t.Fatalf("%s: Pod range %s must start after the node IP %s, which the API server may use", n.Name, n.podIPRange(), n.IP)
		}
	}
	if NodeAt(0).IP != ControlPlaneIP() {
		t.Fatalf("the control plane serves on node0's bridge, got %s", ControlPlaneIP())
	}
}

func TestStoragePathMapHasOneDirPerNodeAndNoDefault(t *testing.T) {
	l := Layout{StateDir: "/state"}
	nodes := []Node{NodeAt(0), NodeAt(1), NodeAt(2)}
	raw, err := l.storagePathMap(nodes)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		NodePathMap []struct {
			Node  string   `json:"node"`
			Paths []string `json:"paths"`
		} `json:"nodePathMap"`
	}
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.NodePathMap) != len(nodes) {
		t.Fatalf("want %d entries, got %s", len(nodes), raw)
	}
	for i, e := range cfg.NodePathMap {
		if e.Node != nodes[i].Name || len(e.Paths) != 1 || e.Paths[0] != l.NodeStorageDir(nodes[i]) {
			t.Fatalf("entry %d is %+v, want %s on %s", i, e, nodes[i].Name, l.NodeStorageDir(nodes[i]))
		}
	}
}

// TestHeldProcessIsNotRestarted: a node fault's hold keeps keepRunning from
// restarting the killed process, and releasing it starts it again.
func TestHeldProcessIsNotRestarted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &supervisor{layout: Layout{StateDir: t.TempDir()}}
	sp := &supervisedProcess{
		spec: Process{Name: "sleeper", Path: "/bin/sleep", Args: []string{"600"}},
		log:  filepath.Join(t.TempDir(), "sleeper.log"),
	}
	s.procs = []*supervisedProcess{sp}
	// keepRunning writes the supervisor's status into StateDir, once more
	// after waitRunning has seen the process start again. The test waits
	// for it to return before TempDir's cleanup removes the directory: CI
	// saw the cleanup fail on a file written meanwhile.
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.keepRunning(ctx, sp)
	}()
	defer func() {
		cancel()
		sp.stop(5 * time.Second)
		<-done
	}()
	first := waitRunning(t, sp, 0)

	pgid, exited := sp.hold()
	if pgid != first || exited == nil {
		t.Fatalf("hold returned pgid %d (want %d) and exit channel %v", pgid, first, exited)
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	// start is the only way keepRunning launches a process; it must refuse
	// while the hold lasts.
	if _, err := sp.start(); !errors.Is(err, errHeld) {
		t.Fatalf("start during a hold: %v, want errHeld", err)
	}
	sp.mu.Lock()
	st := sp.state
	sp.mu.Unlock()
	if st.Running || !st.Held || st.Restarts != 0 {
		t.Fatalf("held process state %+v: want not running, held, no restart counted", st)
	}

	sp.unhold()
	second := waitRunning(t, sp, first)
	sp.stop(5 * time.Second)
	if second == first {
		t.Fatalf("the process was not started again")
	}
}

// waitRunning waits until the process runs under a PID other than not.
func waitRunning(t *testing.T, sp *supervisedProcess, not int) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		sp.mu.Lock()
		running, pid := sp.state.Running, sp.state.PID
		sp.mu.Unlock()
		if running && pid != not {
			return pid
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("process %s did not run (again)", sp.spec.Name)
	return 0
}
