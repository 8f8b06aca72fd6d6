package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// UpOptions tune cluster-up.
type UpOptions struct {
	// Nodes is the number of kubelet nodes; one is enough for now.
	Nodes int
	// Executable is the binary to run as the supervisor (this tool).
	Executable string
}

// Up brings the cluster up, or checks that the running one is healthy. It is
// idempotent: a second call only waits for health.
func (l Layout) Up(ctx context.Context, p *Progress, opts UpOptions) error {
	if opts.Nodes < 1 {
		opts.Nodes = 1
	}
	if opts.Nodes > 1 {
		// Node setup is per node already (bridge, subnet, containerd state,
		// kubelet root, cgroup root), but nodes share the host's network
		// namespace, where two kube-proxies would fight over one set of
		// iptables chains; that needs its own design.
		return fmt.Errorf("--nodes %d: only one node is supported so far", opts.Nodes)
	}
	nodes := make([]Node, opts.Nodes)
	for i := range nodes {
		nodes[i] = NodeAt(i)
	}
	if pid := l.SupervisorPID(); pid != 0 {
		p.Printf("local cluster already running (supervisor pid %d); checking health", pid)
		return l.waitHealthy(ctx, p, nodes)
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
	for _, dir := range []string{l.LogDir(), l.BinDir(), l.storageDir(), runDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		for _, dir := range []string{l.kubeletRoot(n), l.podLogsDir(n), l.cniIPAMDir(n), containerdState(n)} {
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
	for _, n := range nodes {
		if !waitReady(ctx, Process{ReadyUnix: ContainerdSocket(n)}, 60*time.Second) {
			return l.componentFailure("containerd did not start", componentName("containerd", n), "supervisor")
		}
		p.Printf("importing images into %s", n.Name)
		if err := l.importImages(ctx, n, images); err != nil {
			return err
		}
	}
	return l.waitHealthy(ctx, p, nodes)
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
// route, iptables chain and cgroup the cluster made. Images stay in
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
