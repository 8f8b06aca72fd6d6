package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseProcState(t *testing.T) {
	for line, want := range map[string]byte{
		"1234 (etcd) S 1 1234 1234 0 -1":            'S',
		"1234 (etcd) T 1 1234 1234 0 -1":            'T',
		"77 (a) b) (c) R 1 77 77 0 -1":              'R',
		"9 (with space) T 0 0 0 0 -1 4194560 1 0 0": 'T',
	} {
		got, err := parseProcState(line)
		if err != nil || got != want {
			t.Errorf("parseProcState(%q) = %c, %v; want %c", line, got, err, want)
		}
	}
	for _, bad := range []string{"", "1234 (etcd)", "1234 etcd S"} {
		if _, err := parseProcState(bad); err == nil {
			t.Errorf("parseProcState(%q) did not fail", bad)
		}
	}
}

// TestPauseProcess pauses a child process and reads its state while paused
// and after: stopped during the pause, running after it.
func TestPauseProcess(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid

	// Watched from outside the helper: the state must read T at some point
	// before the pause returns.
	done := make(chan struct{})
	sawStopped := make(chan bool, 1)
	go func() {
		saw := false
		for {
			if s, err := processState(pid); err == nil && s == 'T' {
				saw = true
			}
			select {
			case <-done:
				sawStopped <- saw
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	p, err := pauseProcess(context.Background(), pid, time.Second)
	close(done)
	if err != nil {
		t.Fatal(err)
	}
	if !<-sawStopped {
		t.Error("the process was never seen stopped during the pause")
	}
	if p.Stopped.IsZero() || !p.Resumed.After(p.Stopped) {
		t.Errorf("pause %+v: resumed must follow stopped", p)
	}
	if s, err := processState(pid); err != nil || s == 'T' {
		t.Errorf("after the pause the state is %c (%v), want running or sleeping", s, err)
	}
}

// TestPauseProcessResumesWhenCancelled: a context that ends during the pause
// ends it, and the process still runs afterwards.
func TestPauseProcessResumesWhenCancelled(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := pauseProcess(ctx, cmd.Process.Pid, 10*time.Second); err == nil {
		t.Error("a pause cut short by its context reported success")
	}
	if s, err := processState(cmd.Process.Pid); err != nil || s == 'T' {
		t.Errorf("after the cancelled pause the state is %c (%v), want running or sleeping", s, err)
	}
}

// A pause that ended leaves no fallback behind: its SIGCONT, fired later,
// would cancel the SIGSTOP of the next fault on the same process (the long
// chaos run failed a wipe-member on a member paused a moment before).
func TestPauseProcessDropsItsFallback(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	if _, err := pauseProcess(context.Background(), pid, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// The fallback would fire resumeMargin after the pause's planned end;
	// it must be gone well before that. A killed shell is a zombie with an
	// empty command line until it is reaped.
	want := fmt.Sprintf("kill -CONT %d ", pid)
	deadline := time.Now().Add(resumeMargin / 2)
	for {
		left := fallbacksFor(t, want)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fallback resume of %d still runs after the pause ended: processes %v", pid, left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fallbacksFor lists the processes whose command line holds s.
func fallbacksFor(t *testing.T, s string) []string {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range dirs {
		raw, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(strings.ReplaceAll(string(raw), "\x00", " "), s) {
			out = append(out, d.Name())
		}
	}
	return out
}
