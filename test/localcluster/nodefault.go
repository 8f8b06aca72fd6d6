package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Node faults model a machine that vanishes: nothing of the node shuts down
// gracefully and nothing answers for it afterwards. The node's bridge and its
// address stay, because every node shares the host's network namespace and
// node0's bridge address is the API server's.

// lostNodeChain drops the traffic of a stopped node's Pods. Its name starts
// with the tool's prefix, so cluster-down removes it like every other chain.
func lostNodeChain(n Node) string { return chainPrefix + "LOST-" + n.Name }

// lostNodeHooks are where the chain is jumped to in the mangle table:
// PREROUTING sees packets from the node's Pods (and to them before any DNAT),
// POSTROUTING sees every packet to them after routing and after a Service's
// DNAT, forwarded or sent by the host, bridged or routed.
var lostNodeHooks = []string{"PREROUTING", "POSTROUTING"}

// isolateNode drops, rather than rejects, every packet to or from the node's
// Pod addresses: a peer of a lost machine sees timeouts, never resets.
func isolateNode(ctx context.Context, n Node) error {
	ipt := func(args ...string) error {
		return run(ctx, "iptables", append([]string{"-w", "-t", "mangle"}, args...)...)
	}
	chain := lostNodeChain(n)
	_ = ipt("-N", chain)
	if err := ipt("-F", chain); err != nil {
		return err
	}
	comment := "localcluster: " + n.Name + " is stopped"
	for _, dir := range []string{"--src-range", "--dst-range"} {
		if err := ipt("-A", chain, "-m", "iprange", dir, n.podIPRange(), "-m", "comment", "--comment", comment, "-j", "DROP"); err != nil {
			return err
		}
	}
	for _, hook := range lostNodeHooks {
		if ipt("-C", hook, "-j", chain) != nil {
			if err := ipt("-I", hook, "1", "-j", chain); err != nil {
				return err
			}
		}
	}
	return nil
}

// rejoinNode removes what isolateNode installed; absent rules are fine.
func rejoinNode(ctx context.Context, n Node) error {
	ipt := func(args ...string) error {
		return run(ctx, "iptables", append([]string{"-w", "-t", "mangle"}, args...)...)
	}
	chain := lostNodeChain(n)
	for _, hook := range lostNodeHooks {
		for ipt("-C", hook, "-j", chain) == nil {
			if err := ipt("-D", hook, "-j", chain); err != nil {
				return err
			}
		}
	}
	if ipt("-L", chain, "-n") != nil {
		return nil
	}
	if err := ipt("-F", chain); err != nil {
		return err
	}
	return ipt("-X", chain)
}

// NodeProcesses lists every process of one node: its containerd and kubelet
// (found by their config files), the shims serving its containerd (found by
// their -address argument) and whatever runs in its cgroup subtree, which
// includes container processes whose shim is gone.
func (l Layout) NodeProcesses(n Node) []int {
	containerdConfig := filepath.Join(l.configDir(), componentName("containerd", n)+".toml")
	kubeletConfig := filepath.Join(l.configDir(), componentName("kubelet", n)+".yaml")
	seen := map[int]bool{os.Getpid(): true}
	var pids []int
	add := func(pid int) {
		if !seen[pid] {
			seen[pid] = true
			pids = append(pids, pid)
		}
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
		for i, a := range args {
			next := ""
			if i+1 < len(args) {
				next = args[i+1]
			}
			if (a == "-address" && next == ContainerdSocket(n)) || (a == "--config" && next == containerdConfig) ||
				a == "--config="+kubeletConfig {
				add(pid)
				break
			}
		}
	}
	for _, pid := range cgroupProcessesUnder(cgroupRoot(n)) {
		add(pid)
	}
	return pids
}

// cgroupProcessesUnder lists the processes in a cgroup subtree, in every
// hierarchy.
func cgroupProcessesUnder(root string) []int {
	var pids []int
	for _, h := range cgroupHierarchies() {
		top := filepath.Join(h, strings.TrimPrefix(root, "/"))
		_ = filepath.WalkDir(top, func(path string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			data, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// killNode SIGKILLs the node's process groups and every process of the node
// in one sweep, then again until none is left: a container process can still
// be forking while its shim dies.
func (l Layout) killNode(n Node, groups []int) error {
	victims := l.NodeProcesses(n)
	for _, g := range groups {
		_ = syscall.Kill(-g, syscall.SIGKILL)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(victims) > 0 {
		for _, pid := range victims {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of %s survive SIGKILL: %v", n.Name, victims)
		}
		time.Sleep(50 * time.Millisecond)
		victims = l.NodeProcesses(n)
	}
	return nil
}

// nodeProcs are the supervised processes of a node, runtime first.
func (s *supervisor) nodeProcs(n Node) []*supervisedProcess {
	var out []*supervisedProcess
	for _, sp := range s.procs {
		if sp.spec.Node == n.Name && sp.spec.Runtime {
			out = append([]*supervisedProcess{sp}, out...)
		} else if sp.spec.Node == n.Name {
			out = append(out, sp)
		}
	}
	return out
}

func (s *supervisor) stopNode(ctx context.Context, n Node) error {
	s.nodeMu.Lock()
	defer s.nodeMu.Unlock()
	if s.stopped[n.Name] {
		return nil
	}
	// Drop first: killing processes closes their sockets, and the resets the
	// kernel sends for them must not reach anyone.
	if err := isolateNode(ctx, n); err != nil {
		return fmt.Errorf("failed to isolate %s: %w", n.Name, err)
	}
	s.stopped[n.Name] = true
	var groups []int
	var exits []chan struct{}
	for _, sp := range s.nodeProcs(n) {
		if pgid, exited := sp.hold(); exited != nil {
			groups = append(groups, pgid)
			exits = append(exits, exited)
		}
	}
	err := s.layout.killNode(n, groups)
	for _, exited := range exits {
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			err = errors.Join(err, fmt.Errorf("a process of %s did not exit after SIGKILL", n.Name))
		}
	}
	s.writeStatus()
	logf("supervisor: node %s stopped", n.Name)
	return err
}

func (s *supervisor) startNode(ctx context.Context, n Node) error {
	s.nodeMu.Lock()
	defer s.nodeMu.Unlock()
	if !s.stopped[n.Name] {
		return nil
	}
	if err := rejoinNode(ctx, n); err != nil {
		return fmt.Errorf("failed to remove the isolation of %s: %w", n.Name, err)
	}
	delete(s.stopped, n.Name)
	// The runtime first: the kubelet needs it to find its Pods again.
	for _, sp := range s.nodeProcs(n) {
		sp.unhold()
		if !waitReady(ctx, sp.spec, 60*time.Second) {
			s.writeStatus()
			return fmt.Errorf("%s did not become ready; see %s", sp.spec.Name, sp.log)
		}
	}
	s.writeStatus()
	logf("supervisor: node %s started", n.Name)
	return nil
}

func (s *supervisor) wipeNode(n Node) error {
	s.nodeMu.Lock()
	defer s.nodeMu.Unlock()
	if !s.stopped[n.Name] {
		return fmt.Errorf("node %s runs: %w", n.Name, ErrNodeNotStopped)
	}
	dir := s.layout.NodeStorageDir(n)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("failed to list the volumes of %s: %w", n.Name, err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("failed to wipe %s: %w", n.Name, err)
		}
	}
	logf("supervisor: node %s wiped (%d volumes)", n.Name, len(entries))
	return nil
}
