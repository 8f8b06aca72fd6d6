package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// UpOptions tune cluster-up.
type UpOptions struct {
	// Nodes is the number of kubelet nodes, 1 to MaxNodes; 0 means one for a
	// new cluster and any number for a running one.
	Nodes int
	// Executable is the binary to run as the supervisor (this tool).
	Executable string
}

// Up brings the cluster up, or checks that the running one is healthy. It is
// idempotent: a second call only waits for health.
func (l Layout) Up(ctx context.Context, p *Progress, opts UpOptions) error {
	if opts.Nodes < 0 || opts.Nodes > MaxNodes {
		return fmt.Errorf("--nodes %d: the local cluster has 1 to %d nodes", opts.Nodes, MaxNodes)
	}
	if pid := l.SupervisorPID(); pid != 0 {
		p.Printf("local cluster already running (supervisor pid %d); checking health", pid)
		nodes, err := l.checkRunning(opts.Nodes)
		if err != nil {
			return err
		}
		return l.waitHealthy(ctx, p, nodes)
	}
	nodes := make([]Node, max(opts.Nodes, 1))
	for i := range nodes {
		nodes[i] = NodeAt(i)
	}
	if err := EnsurePrerequisites(ctx, p); err != nil {
		return err
	}
	v, err := LoadVersions(l.RepoRoot)
	if err != nil {
		return err
	}
	bins, err := l.EnsureBinaries(ctx, p, v)
	if err != nil {
		return err
	}
	images, err := l.EnsureImageTarballs(ctx, p, v, bins)
	if err != nil {
		return err
	}
	// Whatever a previous, interrupted run left is swept first, so up always
	// starts from a known state.
	if left := l.Leftovers(ctx); len(left) > 0 {
		p.Printf("sweeping %d leftovers of an earlier run", len(left))
		if err := l.sweep(ctx); err != nil {
			return err
		}
	}
	_ = os.RemoveAll(l.LogDir())
	for _, dir := range []string{l.LogDir(), l.BinDir(), runDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		for _, dir := range []string{l.kubeletRoot(n), l.podLogsDir(n), l.cniIPAMDir(n), containerdState(n), l.NodeStorageDir(n)} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
		if err := ensureCgroupRoot(n); err != nil {
			return err
		}
	}
	if err := l.ensurePKI(nodes); err != nil {
		return fmt.Errorf("failed to create certificates: %w", err)
	}
	plan, err := l.buildPlan(v, bins, nodes)
	if err != nil {
		return err
	}
	if err := l.writePlan(plan); err != nil {
		return err
	}
	if err := l.linkBinaries(v, bins); err != nil {
		return err
	}
	p.Printf("configuring the node network")
	if err := l.setupNetwork(ctx, nodes); err != nil {
		return fmt.Errorf("failed to set up the network: %w", err)
	}
	p.Printf("starting the supervisor")
	if err := l.startSupervisor(opts.Executable); err != nil {
		return err
	}
	// The supervisor starts the control plane meanwhile; the images only
	// need each node's runtime.
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !waitReady(ctx, Process{ReadyUnix: ContainerdSocket(n)}, 60*time.Second) {
				errs[i] = l.componentFailure("containerd did not start", componentName("containerd", n), "supervisor")
				return
			}
			errs[i] = l.importImages(ctx, n, images)
		}()
	}
	p.Printf("importing images into %d node(s)", len(nodes))
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return l.waitHealthy(ctx, p, nodes)
}

// checkRunning returns the running cluster's nodes, refusing a different
// node count than asked for (0 accepts any) and a node that node stop took
// down: health would never come.
func (l Layout) checkRunning(want int) ([]Node, error) {
	nodes, err := l.RunningNodes()
	if err != nil {
		return nil, err
	}
	if want != 0 && want != len(nodes) {
		return nil, fmt.Errorf("a %d-node local cluster is running, not %d; bring it down first (localcluster down)", len(nodes), want)
	}
	status, err := l.ReadSupervisorStatus()
	if err == nil && len(status.StoppedNodes) > 0 {
		return nil, fmt.Errorf("node(s) %s stopped by node stop; start them with localcluster node start", strings.Join(status.StoppedNodes, ", "))
	}
	return nodes, nil
}

// Prepare installs the prerequisites and builds (or finds cached) every
// binary and image, without starting anything.
func (l Layout) Prepare(ctx context.Context, p *Progress) error {
	if err := EnsurePrerequisites(ctx, p); err != nil {
		return err
	}
	v, err := LoadVersions(l.RepoRoot)
	if err != nil {
		return err
	}
	bins, err := l.EnsureBinaries(ctx, p, v)
	if err != nil {
		return err
	}
	_, err = l.EnsureImageTarballs(ctx, p, v, bins)
	return err
}

// Executable is this tool's binary, for use as the supervisor.
func (l Layout) startSupervisor(executable string) error {
	if executable == "" {
		var err error
		if executable, err = os.Executable(); err != nil {
			return err
		}
	}
	logFile, err := os.OpenFile(l.LogFile("supervisor"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devNull.Close()
	cmd := exec.Command(executable, "supervise", "--repo-root", l.RepoRoot)
	cmd.Stdin = devNull
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Dir = l.RepoRoot
	// Every process of the cluster inherits the mark, so a sweep can tell
	// them from other users of the cached binaries (a test's own etcd).
	cmd.Env = append(os.Environ(), ownerEnv+"="+l.StateDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("failed to start the supervisor: %w", err)
	}
	// The supervisor outlives this process; release it so it is not reaped here.
	_ = cmd.Process.Release()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if l.SupervisorPID() != 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return l.componentFailure("the supervisor did not start", "supervisor")
}

func (l Layout) linkBinaries(v Versions, bins Binaries) error {
	links := map[string]string{
		"kubectl": bins.KubernetesBinary("kubectl"),
		"etcdctl": filepath.Join(bins.etcdDefault(v), "etcdctl"),
		"etcdutl": filepath.Join(bins.etcdDefault(v), "etcdutl"),
	}
	for name, target := range links {
		link := filepath.Join(l.BinDir(), name)
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return err
		}
	}
	return nil
}

func ensureCgroupRoot(n Node) error {
	for _, h := range cgroupHierarchies() {
		if filepath.Base(h) == "unified" {
			continue
		}
		if err := os.MkdirAll(filepath.Join(h, strings.TrimPrefix(cgroupRoot(n), "/")), 0o755); err != nil {
			return fmt.Errorf("failed to create cgroup %s in %s: %w", cgroupRoot(n), h, err)
		}
	}
	return nil
}

// componentFailure builds an error that carries the named components' log tails.
func (l Layout) componentFailure(what string, components ...string) error {
	var b strings.Builder
	b.WriteString(what)
	for _, c := range components {
		data, err := os.ReadFile(l.LogFile(c))
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "\n--- last lines of %s ---\n%s", l.LogFile(c), tail(string(data), 30))
	}
	return errors.New(b.String())
}

// Down stops every component and removes every process, mount, interface,
// route, iptables chain, nftables table and cgroup the cluster made. Images stay in
// containerd's store for a fast next start unless purge is set.
func (l Layout) Down(ctx context.Context, p *Progress, purge bool) error {
	if pid := l.SupervisorPID(); pid != 0 {
		p.Printf("stopping the supervisor (pid %d)", pid)
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(4 * time.Minute)
		for processAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
		if processAlive(pid) {
			p.Printf("supervisor did not stop in time; killing it")
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if err := l.sweep(ctx); err != nil {
		return err
	}
	if err := l.removeState(purge); err != nil {
		return err
	}
	if left := l.Leftovers(ctx); len(left) > 0 {
		return fmt.Errorf("cluster-down left things behind:\n  %s", strings.Join(left, "\n  "))
	}
	p.Printf("local cluster is down")
	return nil
}

// sweep removes what is left of a cluster whose supervisor is gone.
func (l Layout) sweep(ctx context.Context) error {
	if plan, err := l.readPlan(); err == nil {
		for _, proc := range plan.Processes {
			if strings.HasPrefix(proc.Name, "kube-proxy") {
				// kube-proxy knows its own rules best; the generic chain
				// removal below catches whatever it misses.
				_ = exec.CommandContext(ctx, proc.Path, "--cleanup").Run()
				break
			}
		}
	}
	l.killLeftovers()
	var errs []error
	if err := l.unmountLeftovers(); err != nil {
		errs = append(errs, err)
	}
	removeNetnsFiles()
	if err := removeCgroups(); err != nil {
		errs = append(errs, err)
	}
	if err := teardownNetwork(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := removeNFTables(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := l.restoreSysctls(); err != nil {
		errs = append(errs, err)
	}
	_ = os.RemoveAll(runDir)
	return errors.Join(errs...)
}

func (l Layout) removeState(purge bool) error {
	if purge {
		return os.RemoveAll(l.StateDir)
	}
	entries, err := os.ReadDir(l.StateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		path := filepath.Join(l.StateDir, e.Name())
		// Logs stay for a post-mortem; the next fresh up clears them.
		if e.Name() == "logs" {
			continue
		}
		if e.Name() != "nodes" {
			if err := os.RemoveAll(path); err != nil {
				return err
			}
			continue
		}
		nodes, _ := os.ReadDir(path)
		for _, n := range nodes {
			inner, _ := os.ReadDir(filepath.Join(path, n.Name()))
			for _, f := range inner {
				if f.Name() == "containerd" {
					continue
				}
				if err := os.RemoveAll(filepath.Join(path, n.Name(), f.Name())); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
