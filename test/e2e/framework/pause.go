package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pause stops a member's etcd with SIGSTOP from the host and resumes it
// with SIGCONT: the process keeps its sockets, so peers and clients connect
// and then hear nothing, as from a member stuck on a slow disk or a starved
// CPU, and the kubelet sees nothing wrong with the container. SIGSTOP is one
// of the two signals an ancestor PID namespace can force on a namespace's
// init, which etcd is in its container.
//
// Nothing may stay stopped, even if the test dies during the pause: a
// detached shell of its own session resumes the process shortly after the
// planned end, whatever happens to the test.

// resumeMargin is how long after the planned end the detached shell resumes
// the process, if the test did not.
const resumeMargin = 2 * time.Second

// Pause is one pause of a process: when it was seen stopped and when it was
// resumed.
type Pause struct {
	PID     int
	Stopped time.Time
	Resumed time.Time
}

// PauseMember stops the etcd of a member's Pod for d and resumes it. It fails
// at once, stopping nothing, if the Pod's etcd container is not running. The
// process is resumed when d has passed, when ctx ends first, and on any error
// after the stop.
func (e *Env) PauseMember(ctx context.Context, ns, podName string, d time.Duration) (Pause, error) {
	pod, err := e.Clientset.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return Pause{}, err
	}
	pid, err := ContainerProcess(pod, "etcd")
	if err != nil {
		return Pause{}, err
	}
	args, err := ProcessArgs(pid)
	if err != nil {
		return Pause{}, fmt.Errorf("failed to read the command line of %d: %w", pid, err)
	}
	// The PID was read from the cgroup a moment ago: it must still be etcd
	// serving this member, not a reused PID.
	if !isEtcdOf(args, podName) {
		return Pause{}, fmt.Errorf("process %d of pod %s/%s is not etcd serving %s: %q", pid, ns, podName, podName, args)
	}
	p, err := pauseProcess(ctx, pid, d)
	if err != nil {
		return p, fmt.Errorf("pausing etcd (pid %d) of %s/%s: %w", pid, ns, podName, err)
	}
	return p, nil
}

// pauseProcess stops pid for d and resumes it, checking through /proc that
// the process really was stopped and then really runs again.
func pauseProcess(ctx context.Context, pid int, d time.Duration) (p Pause, err error) {
	p.PID = pid
	dropFallback, err := resumeLater(pid, d+resumeMargin)
	if err != nil {
		return p, err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		dropFallback()
		return p, fmt.Errorf("SIGSTOP: %w", err)
	}
	defer func() {
		at, rerr := resume(pid)
		dropFallback()
		p.Resumed = at
		if err == nil {
			err = rerr
		}
	}()
	// SIGSTOP is delivered asynchronously; the pause counts from when the
	// kernel shows the process stopped.
	if err := waitProcessState(ctx, pid, true); err != nil {
		return p, err
	}
	p.Stopped = time.Now()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return p, nil
	case <-ctx.Done():
		return p, ctx.Err()
	}
}

// resume sends SIGCONT and checks the process runs again. A process that is
// gone (its Pod was deleted during the pause) has nothing left to resume.
func resume(pid int) (time.Time, error) {
	err := syscall.Kill(pid, syscall.SIGCONT)
	at := time.Now()
	if errors.Is(err, syscall.ESRCH) {
		return at, nil
	}
	if err != nil {
		return at, fmt.Errorf("SIGCONT: %w", err)
	}
	// Its own bound: the caller's context may be what ended the pause.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return at, waitProcessState(ctx, pid, false)
}

// resumeLater starts a shell in a session of its own that sends SIGCONT
// after the given time, so that a test killed during a pause leaves no
// process stopped. A SIGCONT to a process already running changes nothing,
// but one to a process that a later fault is stopping does: a SIGCONT sent
// while a SIGSTOP is still pending discards it (signal(7)), and that fault
// finds the process running. So the caller drops the fallback (the returned
// func kills the shell and its sleep) as soon as it has resumed or killed
// the process itself; only a caller that died leaves it to fire.
func resumeLater(pid int, after time.Duration) (drop func(), err error) {
	secs := strconv.FormatFloat(after.Seconds(), 'f', 1, 64)
	cmd := exec.Command("/bin/sh", "-c", fmt.Sprintf("sleep %s; kill -CONT %d 2>/dev/null; exit 0", secs, pid))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start the fallback resume: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	// The shell leads its own session and process group, which holds its
	// sleep too.
	group := cmd.Process.Pid
	return func() { _ = syscall.Kill(-group, syscall.SIGKILL) }, nil
}

// waitProcessState polls /proc until the process is stopped (or is not), or
// is gone.
func waitProcessState(ctx context.Context, pid int, stopped bool) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		state, err := processState(pid)
		if errors.Is(err, os.ErrNotExist) {
			if stopped {
				return fmt.Errorf("process %d exited instead of stopping", pid)
			}
			return nil
		}
		if err != nil {
			return err
		}
		if (state == 'T') == stopped {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("process %d is in state %c, want stopped=%t: %w", pid, state, stopped, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// processState is the state letter of /proc/<pid>/stat: T for stopped by a
// signal.
func processState(pid int) (byte, error) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	return parseProcState(string(raw))
}

// parseProcState reads the state from a stat line. The command name, in
// parentheses, may itself hold spaces and parentheses, so the state is
// found after the last closing one.
func parseProcState(stat string) (byte, error) {
	i := strings.LastIndexByte(stat, ')')
	rest := ""
	if i >= 0 {
		rest = strings.TrimLeft(stat[i+1:], " ")
	}
	if rest == "" {
		return 0, fmt.Errorf("malformed stat line %q", stat)
	}
	return rest[0], nil
}
