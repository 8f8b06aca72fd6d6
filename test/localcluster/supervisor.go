package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// ComponentState is what the supervisor reports about one process.
type ComponentState struct {
	Name     string    `json:"name"`
	PID      int       `json:"pid"`
	Running  bool      `json:"running"`
	Restarts int       `json:"restarts"`
	Started  time.Time `json:"started"`
	LastExit string    `json:"lastExit,omitempty"`
}

func (l Layout) supervisorStatusFile() string {
	return filepath.Join(l.StateDir, "supervisor-status.json")
}

type supervisedProcess struct {
	spec Process
	log  string

	mu       sync.Mutex
	cmd      *exec.Cmd
	state    ComponentState
	stopping bool
	exited   chan struct{}
}

type supervisor struct {
	layout Layout
	procs  []*supervisedProcess
	mu     sync.Mutex
}

// Supervise runs the plan's processes in order, restarts any that exit, and on
// SIGTERM stops them in reverse order, tearing Pods down through CRI before a
// node's container runtime goes away. It is the body of the detached process
// that cluster-up starts.
func (l Layout) Supervise(ctx context.Context) error {
	plan, err := l.readPlan()
	if err != nil {
		return fmt.Errorf("failed to read the plan: %w", err)
	}
	if err := os.WriteFile(l.supervisorPIDFile(), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	ctx, stopSignals := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()

	s := &supervisor{layout: l}
	for _, p := range plan.Processes {
		sp := &supervisedProcess{spec: p, log: l.LogFile(p.Name), state: ComponentState{Name: p.Name}}
		s.procs = append(s.procs, sp)
	}
	for _, sp := range s.procs {
		if ctx.Err() != nil {
			break
		}
		go s.keepRunning(ctx, sp)
		waitReady(ctx, sp.spec, 90*time.Second)
	}
	<-ctx.Done()
	logf("supervisor: stopping")
	s.stopAll(plan)
	_ = os.Remove(l.supervisorPIDFile())
	logf("supervisor: stopped")
	return nil
}

func (s *supervisor) keepRunning(ctx context.Context, sp *supervisedProcess) {
	backoff := time.Second
	for ctx.Err() == nil {
		began := time.Now()
		if err := sp.start(); err != nil {
			logf("supervisor: failed to start %s: %v", sp.spec.Name, err)
		} else {
			s.writeStatus()
			<-sp.exited
		}
		sp.mu.Lock()
		stopping := sp.stopping
		sp.mu.Unlock()
		if stopping || ctx.Err() != nil {
			return
		}
		if time.Since(began) > 30*time.Second {
			backoff = time.Second
		}
		logf("supervisor: %s exited (%s); restarting in %s", sp.spec.Name, sp.state.LastExit, backoff)
		s.writeStatus()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

func (sp *supervisedProcess) start() error {
	logFile, err := os.OpenFile(sp.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logFile, "=== %s starting %s\n", time.Now().UTC().Format(time.RFC3339), sp.spec.String())
	cmd := exec.Command(sp.spec.Path, sp.spec.Args...)
	cmd.Env = append(os.Environ(), sp.spec.Env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return err
	}
	sp.mu.Lock()
	sp.cmd = cmd
	sp.exited = make(chan struct{})
	sp.state.PID = cmd.Process.Pid
	sp.state.Running = true
	sp.state.Started = time.Now()
	exited := sp.exited
	sp.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logFile.Close()
		sp.mu.Lock()
		sp.state.Running = false
		if !sp.stopping {
			sp.state.Restarts++
		}
		if err != nil {
			sp.state.LastExit = err.Error()
		} else {
			sp.state.LastExit = "exit status 0"
		}
		sp.mu.Unlock()
		close(exited)
	}()
	return nil
}

func (sp *supervisedProcess) stop(grace time.Duration) {
	sp.mu.Lock()
	sp.stopping = true
	cmd, exited, running := sp.cmd, sp.exited, sp.state.Running
	sp.mu.Unlock()
	if cmd == nil || !running {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

func (s *supervisor) stopAll(plan Plan) {
	for i := len(s.procs) - 1; i >= 0; i-- {
		sp := s.procs[i]
		if sp.spec.Runtime {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			if err := removeAllPods(ctx, sp.spec.Node); err != nil {
				logf("supervisor: failed to remove the pods of %s: %v", sp.spec.Node, err)
			}
			cancel()
		}
		logf("supervisor: stopping %s", sp.spec.Name)
		sp.stop(5 * time.Second)
		s.writeStatus()
	}
}

func (s *supervisor) writeStatus() {
	s.mu.Lock()
	defer s.mu.Unlock()
	states := make([]ComponentState, 0, len(s.procs))
	for _, sp := range s.procs {
		sp.mu.Lock()
		states = append(states, sp.state)
		sp.mu.Unlock()
	}
	data, _ := json.MarshalIndent(states, "", "  ")
	tmp := s.layout.supervisorStatusFile() + ".tmp"
	if os.WriteFile(tmp, data, 0o644) == nil {
		_ = os.Rename(tmp, s.layout.supervisorStatusFile())
	}
}

// ReadComponentStates returns the supervisor's last report.
func (l Layout) ReadComponentStates() ([]ComponentState, error) {
	data, err := os.ReadFile(l.supervisorStatusFile())
	if err != nil {
		return nil, err
	}
	var states []ComponentState
	return states, json.Unmarshal(data, &states)
}

// waitReady waits until the process's socket or port answers, or the timeout.
func waitReady(ctx context.Context, p Process, timeout time.Duration) bool {
	if p.ReadyUnix == "" && p.ReadyTCP == "" {
		return true
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if dialable(p) {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

func dialable(p Process) bool {
	network, addr := "tcp", p.ReadyTCP
	if p.ReadyUnix != "" {
		network, addr = "unix", p.ReadyUnix
	}
	conn, err := net.DialTimeout(network, addr, time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// SupervisorPID returns the running supervisor's PID, or 0.
func (l Layout) SupervisorPID() int {
	data, err := os.ReadFile(l.supervisorPIDFile())
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(string(data))
	if err != nil || !processAlive(pid) {
		return 0
	}
	return pid
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	// A zombie is not alive for our purposes.
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	for i := len(data) - 1; i >= 0; i-- {
		if data[i] == ')' {
			return i+2 < len(data) && data[i+2] != 'Z'
		}
	}
	return true
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().UTC().Format(time.RFC3339), fmt.Sprintf(format, args...))
}
