package framework

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Some faults cannot be injected from inside a Pod: a process cannot SIGKILL
// its own PID namespace's init (etcd is PID 1 of its container), and a
// restricted Pod may not change its network. The local cluster's nodes run
// as processes of this host, so the test, running as root next to them, finds
// a Pod's processes through the Pod's cgroup and acts on them from outside.

// cgroupRoot is where the kernel mounts the cgroup hierarchies.
const cgroupRoot = "/sys/fs/cgroup"

// ErrNoPodProcess says the Pod runs no process on this host: it is gone, not
// started yet, or on a node that is stopped.
var ErrNoPodProcess = errors.New("no process of the pod runs on this host")

// podCgroupDirName reports whether a cgroup directory is the Pod's: the
// kubelet names it pod<UID> with the cgroupfs driver, and
// kubepods-<class>-pod<UID with underscores>.slice with the systemd one.
func podCgroupDirName(name string, uid types.UID) bool {
	if name == "pod"+string(uid) {
		return true
	}
	systemd := "pod" + strings.ReplaceAll(string(uid), "-", "_") + ".slice"
	return strings.HasSuffix(name, systemd)
}

// containerCgroupDirName reports whether a cgroup directory is the
// container's: containerd names it by the container's ID (prefixed with the
// runtime's name and suffixed .scope under systemd).
func containerCgroupDirName(name, containerID string) bool {
	return name == containerID || strings.HasSuffix(name, "-"+containerID+".scope")
}

// findCgroupDir walks every hierarchy for the first directory match accepts.
func findCgroupDir(root string, maxDepth int, match func(name string) bool) string {
	hierarchies, err := os.ReadDir(root)
	if err != nil {
		return ""
	}
	for _, h := range hierarchies {
		if !h.IsDir() {
			continue
		}
		if found := findCgroupDirIn(filepath.Join(root, h.Name()), maxDepth, match); found != "" {
			return found
		}
	}
	return ""
}

// findCgroupDirIn walks one hierarchy for the first directory match
// accepts. Pods sit a few levels down (node root, kubepods, QoS class), so
// the walk stops at maxDepth rather than descending into every container's
// subtree.
func findCgroupDirIn(top string, maxDepth int, match func(name string) bool) string {
	var found string
	_ = filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if match(d.Name()) {
			found = path
			return fs.SkipAll
		}
		if depth := strings.Count(strings.TrimPrefix(path, top), "/"); depth >= maxDepth {
			return fs.SkipDir
		}
		return nil
	})
	return found
}

// cgroupProcesses lists the processes in a cgroup directory and below it.
func cgroupProcesses(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
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
	return pids
}

// PodProcesses lists the host PIDs of every process of the Pod, its sandbox
// included: all of them share the Pod's network namespace.
func PodProcesses(pod *corev1.Pod) ([]int, error) {
	dir := findCgroupDir(cgroupRoot, 6, func(name string) bool { return podCgroupDirName(name, pod.UID) })
	if dir == "" {
		return nil, fmt.Errorf("pod %s/%s (uid %s): %w", pod.Namespace, pod.Name, pod.UID, ErrNoPodProcess)
	}
	pids := cgroupProcesses(dir)
	if len(pids) == 0 {
		return nil, fmt.Errorf("pod %s/%s: its cgroup %s is empty: %w", pod.Namespace, pod.Name, dir, ErrNoPodProcess)
	}
	return pids, nil
}

// ContainerProcess is the host PID of a running container's first process,
// found by the container ID the kubelet reports.
func ContainerProcess(pod *corev1.Pod, container string) (int, error) {
	id := containerID(pod, container)
	if id == "" {
		return 0, fmt.Errorf("container %s of pod %s/%s is not running: %w", container, pod.Namespace, pod.Name, ErrNoPodProcess)
	}
	dir, err := containerCgroupDir(cgroupRoot, pod.UID, id)
	if err != nil {
		return 0, fmt.Errorf("container %s of pod %s/%s: %w", container, pod.Namespace, pod.Name, err)
	}
	pids := cgroupProcesses(dir)
	if len(pids) == 0 {
		return 0, fmt.Errorf("container %s of pod %s/%s has no process: %w", container, pod.Namespace, pod.Name, ErrNoPodProcess)
	}
	return pids[0], nil
}

// containerID is the ID of a running container of the Pod, without the
// runtime's prefix; empty if it is not running.
func containerID(pod *corev1.Pod, container string) string {
	var id string
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == container && s.State.Running != nil {
			id = s.ContainerID
		}
	}
	if _, after, ok := strings.Cut(id, "://"); ok {
		id = after
	}
	return id
}

// containerCgroupDir is the cgroup directory of the container with the given
// ID in the Pod: under root, every hierarchy if root is the cgroup mount,
// or one hierarchy if root is that hierarchy's directory.
func containerCgroupDir(root string, uid types.UID, id string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("the container is not running: %w", ErrNoPodProcess)
	}
	match := func(name string) bool { return podCgroupDirName(name, uid) }
	var podDir string
	if root == cgroupRoot {
		podDir = findCgroupDir(root, 6, match)
	} else {
		podDir = findCgroupDirIn(root, 6, match)
	}
	if podDir == "" {
		return "", fmt.Errorf("no cgroup of pod uid %s under %s: %w", uid, root, ErrNoPodProcess)
	}
	entries, _ := os.ReadDir(podDir)
	for _, en := range entries {
		if en.IsDir() && containerCgroupDirName(en.Name(), id) {
			return filepath.Join(podDir, en.Name()), nil
		}
	}
	return "", fmt.Errorf("container %s has no cgroup under %s: %w", id, podDir, ErrNoPodProcess)
}

// ProcessArgs is a host process's command line.
func ProcessArgs(pid int) ([]string, error) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00"), nil
}

// isEtcdOf reports whether a command line is etcd serving the named member.
func isEtcdOf(args []string, member string) bool {
	if len(args) == 0 || filepath.Base(args[0]) != "etcd" {
		return false
	}
	for _, a := range args[1:] {
		if a == "--name="+member {
			return true
		}
	}
	return false
}

// KillEtcd SIGKILLs a member's etcd from the host: no shutdown, no last
// fsync, the way a crash or the OOM killer ends it. RestartEtcd's SIGTERM is
// the polite variant; SIGKILL cannot be sent from inside the Pod, as etcd is
// its PID namespace's init. Before the signal the process is checked to be
// etcd serving this member, so a PID reused in between is never hit. It
// waits, like RestartEtcd, until the restart shows or the Pod is gone. A Pod
// that is not scheduled or not running, or whose etcd is not running, has
// nothing to kill: that fails the call at once, rather than passing for a
// fault that was injected.
func (e *Env) KillEtcd(ctx context.Context, ns, podName string) error {
	pod, before, pid, err := e.runningEtcd(ctx, ns, podName, "nothing to kill")
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("failed to SIGKILL etcd (pid %d) of %s/%s: %w", pid, ns, podName, err)
	}
	return e.waitEtcdRestarted(ctx, pod, before, false)
}

// runningEtcd is the member's Pod, its etcd container's restart count and
// the host PID of its etcd, checked to be etcd serving this member so that a
// PID reused in between is never hit. A Pod that cannot take a fault, or
// whose etcd is not running, fails the call with why (its reason when not
// running).
func (e *Env) runningEtcd(ctx context.Context, ns, podName, notRunning string) (*corev1.Pod, int32, int, error) {
	pod, err := e.Clientset.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return nil, 0, 0, err
	}
	if err := Injectable(pod); err != nil {
		return nil, 0, 0, err
	}
	before, running, err := etcdContainer(pod)
	if err != nil {
		return nil, 0, 0, err
	}
	if !running {
		return nil, 0, 0, fmt.Errorf("etcd of pod %s/%s is not running: %s", ns, podName, notRunning)
	}
	pid, err := ContainerProcess(pod, "etcd")
	if err != nil {
		return nil, 0, 0, err
	}
	args, err := ProcessArgs(pid)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("failed to read the command line of %d: %w", pid, err)
	}
	if !isEtcdOf(args, podName) {
		return nil, 0, 0, fmt.Errorf("process %d of pod %s/%s is not etcd serving %s: %q", pid, ns, podName, podName, args)
	}
	return pod, before, pid, nil
}

// LoseDataDir makes a member lose its data dir the way a lost volume does:
// while etcd is not running. etcd is frozen from the host, the data dir is
// emptied, and etcd is killed still frozen, so that none of its code runs
// between the wipe and the kill; it then waits, like RestartEtcd, until the
// restart shows. Emptying the directory under a running etcd is a different
// fault: etcd's periodic purge of snapshot files, or its next WAL segment,
// finds the directory gone and etcd exits on its own with a fatal error that
// the operator rightly reads as corrupt data (seen in CI: "failed to purge
// snap file" a moment after the wipe), so the reason the operator gives
// would depend on timing.
func (e *Env) LoseDataDir(ctx context.Context, ns, podName string) error {
	pod, before, err := e.loseDataDir(ctx, ns, podName)
	if err != nil {
		return err
	}
	return e.waitEtcdRestarted(ctx, pod, before, false)
}

// LoseDataDirAndPod is LoseDataDir with the Pod deleted at once after the
// kill, as a lost volume found by a re-created Pod.
func (e *Env) LoseDataDirAndPod(ctx context.Context, ns, podName string) error {
	if _, _, err := e.loseDataDir(ctx, ns, podName); err != nil {
		return err
	}
	return e.Clientset.CoreV1().Pods(ns).Delete(ctx, podName, metav1.DeleteOptions{})
}

// loseDataDir freezes, wipes and kills; it returns the Pod and the etcd
// container's restart count before the kill.
func (e *Env) loseDataDir(ctx context.Context, ns, podName string) (*corev1.Pod, int32, error) {
	pod, before, pid, err := e.runningEtcd(ctx, ns, podName, "its data dir cannot be lost under it")
	if err != nil {
		return nil, 0, err
	}
	// A test that dies between the freeze and the kill leaves no etcd
	// stopped for good.
	dropFallback, err := resumeLater(pid, 3*time.Minute)
	if err != nil {
		return nil, 0, err
	}
	// Every way out below resumes or kills the process first.
	defer dropFallback()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return nil, 0, fmt.Errorf("failed to SIGSTOP etcd (pid %d) of %s/%s: %w", pid, ns, podName, err)
	}
	if err := waitProcessState(ctx, pid, true); err != nil {
		_, _ = resume(pid)
		return nil, 0, fmt.Errorf("etcd (pid %d) of %s/%s did not stop: %w", pid, ns, podName, err)
	}
	if err := e.WipeDataDir(ctx, ns, podName); err != nil {
		_, _ = resume(pid)
		return nil, 0, err
	}
	// SIGKILL ends a stopped process without running it. A process that is
	// gone already was ended by someone else while frozen: the fault is not
	// the one asked for.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		_, _ = resume(pid)
		return nil, 0, fmt.Errorf("failed to SIGKILL the frozen etcd (pid %d) of %s/%s: %w", pid, ns, podName, err)
	}
	return pod, before, nil
}
