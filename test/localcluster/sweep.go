package localcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The sweeps below find what a crashed or killed supervisor left behind. They
// identify our things by where they live (state dir, run dir, cache dir,
// cgroup subtree), never by guessing from names alone.

// ownerEnv marks, in their environment, the processes the supervisor starts
// and everything they start in turn.
const ownerEnv = "QUORUMCTL_LOCALCLUSTER"

// LeftoverProcesses lists processes that belong to the local cluster: those
// naming its state or run dir, those carrying its mark that run a cached
// binary, and those in its cgroups. A cached binary alone does not make a
// process ours: integration tests and benchmarks run the same etcd and S3
// server beside a cluster, and a cluster-down must neither kill nor report
// them.
func (l Layout) LeftoverProcesses() []int {
	markers := []string{l.StateDir + "/", runDir + "/"}
	cacheBin := filepath.Join(l.CacheDir, "bin") + "/"
	mark := ownerEnv + "=" + l.StateDir
	self := os.Getpid()
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid == os.Getppid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		text := strings.ReplaceAll(string(cmdline), "\x00", " ") + " " + exe
		// The supervisor is this tool itself; it names the state dir too.
		if strings.Contains(text, " supervise") {
			continue
		}
		if ownsProcess(text, markers, cacheBin, func() bool { return hasEnv(pid, mark) }) {
			pids = append(pids, pid)
		}
	}
	return append(pids, cgroupProcesses()...)
}

// ownsProcess decides from a process's command line and executable (text)
// whether it is the cluster's; marked is asked only for a cached binary.
func ownsProcess(text string, markers []string, cacheBin string, marked func() bool) bool {
	for _, m := range markers {
		if strings.Contains(text, m) {
			return true
		}
	}
	return strings.Contains(text, cacheBin) && marked()
}

// hasEnv reports whether the process's environment holds kv exactly.
func hasEnv(pid int, kv string) bool {
	env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return false
	}
	for _, v := range strings.Split(string(env), "\x00") {
		if v == kv {
			return true
		}
	}
	return false
}

// cgroupHierarchies lists the cgroup v1 hierarchies (or the v2 root).
func cgroupHierarchies() []string {
	var out []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.procs"); err == nil {
		out = append(out, "/sys/fs/cgroup")
	}
	return out
}

// ourCgroups lists the node cgroup subtrees, deepest first.
func ourCgroups() []string {
	var dirs []string
	for _, h := range cgroupHierarchies() {
		matches, _ := filepath.Glob(filepath.Join(h, "qlc-*"))
		for _, m := range matches {
			_ = filepath.WalkDir(m, func(path string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, path)
				}
				return nil
			})
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	return dirs
}

func cgroupProcesses() []int {
	seen := map[int]bool{}
	var pids []int
	for _, dir := range ourCgroups() {
		data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func (l Layout) killLeftovers() {
	for attempt := 0; attempt < 20; attempt++ {
		pids := l.LeftoverProcesses()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// LeftoverMounts lists mount points under the cluster's directories, deepest first.
func (l Layout) LeftoverMounts() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var mounts []string
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if strings.HasPrefix(mp, l.StateDir+"/") || mp == l.StateDir ||
			strings.HasPrefix(mp, runDir+"/") || mp == runDir ||
			strings.HasPrefix(mp, "/run/netns/cni-") || strings.HasPrefix(mp, "/var/run/netns/cni-") {
			mounts = append(mounts, mp)
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	return mounts
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

func (l Layout) unmountLeftovers() error {
	var errs []error
	for attempt := 0; attempt < 5; attempt++ {
		mounts := l.LeftoverMounts()
		if len(mounts) == 0 {
			return nil
		}
		errs = nil
		for _, mp := range mounts {
			if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
			}
		}
	}
	if left := l.LeftoverMounts(); len(left) > 0 {
		errs = append(errs, fmt.Errorf("mounts remain: %v", left))
	}
	return errors.Join(errs...)
}

func removeCgroups() error {
	var errs []error
	for _, dir := range ourCgroups() {
		if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("rmdir %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// removeNetnsFiles deletes the CNI network namespace files containerd made.
func removeNetnsFiles() {
	for _, dir := range []string{"/run/netns", "/var/run/netns"} {
		matches, _ := filepath.Glob(filepath.Join(dir, "cni-*"))
		for _, m := range matches {
			_ = os.Remove(m)
		}
	}
	// libcni caches each attachment's result outside the configured dirs.
	matches, _ := filepath.Glob("/var/lib/cni/results/localcluster-*")
	for _, m := range matches {
		_ = os.Remove(m)
	}
}

// Leftovers summarises everything of the cluster that is still on the machine.
func (l Layout) Leftovers(ctx context.Context) []string {
	var out []string
	for _, pid := range l.LeftoverProcesses() {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, fmt.Sprintf("process %d: %s", pid, strings.ReplaceAll(string(cmd), "\x00", " ")))
	}
	if pid := l.SupervisorPID(); pid != 0 {
		out = append(out, fmt.Sprintf("supervisor process %d", pid))
	}
	for _, m := range l.LeftoverMounts() {
		out = append(out, "mount "+m)
	}
	for _, link := range ourLinks(ctx) {
		out = append(out, "interface "+link)
	}
	for _, route := range []string{ServiceCIDR, PodCIDR} {
		if r := strings.TrimSpace(output(ctx, "ip", "route", "show", "exact", route)); r != "" {
			out = append(out, "route "+r)
		}
	}
	for _, fam := range []string{"iptables", "ip6tables"} {
		chains, err := LeftoverChains(ctx, fam)
		if err != nil {
			continue
		}
		for _, c := range chains {
			out = append(out, fam+" chain "+c)
		}
	}
	tables, _ := LeftoverNFTables(ctx)
	for _, t := range tables {
		out = append(out, "nftables table "+t)
	}
	for _, cg := range ourCgroups() {
		out = append(out, "cgroup "+cg)
	}
	return out
}
