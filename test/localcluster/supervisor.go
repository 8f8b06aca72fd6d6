package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
	// Held is set while a node fault keeps the process stopped.
	Held bool `json:"held,omitempty"`
}

// SupervisorStatus is the supervisor's report: every process, and the nodes
// that node stop took down.
type SupervisorStatus struct {
	Components   []ComponentState `json:"components"`
	StoppedNodes []string         `json:"stoppedNodes,omitempty"`
}

func (l Layout) supervisorStatusFile() string {
	return filepath.Join(l.StateDir, "supervisor-status.json")
}

// errHeld is returned by start while a node fault holds the process.
var errHeld = errors.New("held by a node fault")

type supervisedProcess struct {
	spec Process
	log  string

	mu       sync.Mutex
	cmd      *exec.Cmd
	state    ComponentState
	stopping bool
	// released is closed when a hold ends; nil while not held.
	released chan struct{}
	exited   chan struct{}
}

type supervisor struct {
	layout Layout
	plan   Plan
	procs  []*supervisedProcess
	mu     sync.Mutex
	// started is closed once every process was started, so node commands
	// never race the start sequence.
	started chan struct{}
	// nodeMu serialises node faults; stopped names the nodes they took down.
	nodeMu  sync.Mutex
	stopped map[string]bool
}

// Supervise runs the plan's processes stage by stage, restarts any that exit,
// serves node faults on its control socket, and on SIGTERM stops everything
// in reverse order, tearing Pods down through CRI before a node's container
// runtime goes away. It is the body of the detached process that cluster-up
// starts.
func (l Layout) Supervise(ctx context.Context) error {
	plan, err := l.readPlan()
	if err != nil {
		return fmt.Errorf("failed to read the plan: %w", err)
	}
	ctx, stopSignals := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()

	s := &supervisor{layout: l, plan: plan, started: make(chan struct{}), stopped: map[string]bool{}}
	for _, p := range plan.Processes {
		sp := &supervisedProcess{spec: p, log: l.LogFile(p.Name), state: ComponentState{Name: p.Name}}
		s.procs = append(s.procs, sp)
	}
	control, err := s.serveControl(ctx)
	if err != nil {
		return err
	}
	defer control.Close()
	if err := os.WriteFile(l.supervisorPIDFile(), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	s.startAll(ctx)
	close(s.started)
	<-ctx.Done()
	logf("supervisor: stopping")
	control.Close()
	s.stopAll()
	_ = os.Remove(l.supervisorPIDFile())
	logf("supervisor: stopped")
	return nil
}

// startAll starts each stage's processes together and waits until all of
// them are ready (or time out) before the next stage.
func (s *supervisor) startAll(ctx context.Context) {
	for i := 0; i < len(s.procs) && ctx.Err() == nil; {
		j := i
		for j < len(s.procs) && s.procs[j].spec.Stage == s.procs[i].spec.Stage {
			j++
		}
		var wg sync.WaitGroup
		for _, sp := range s.procs[i:j] {
			go s.keepRunning(ctx, sp)
			wg.Add(1)
			go func() {
				defer wg.Done()
				waitReady(ctx, sp.spec, 90*time.Second)
			}()
		}
		wg.Wait()
		i = j
	}
}

func (s *supervisor) keepRunning(ctx context.Context, sp *supervisedProcess) {
	backoff := time.Second
	for ctx.Err() == nil {
		began := time.Now()
		released, err := sp.start()
		if errors.Is(err, errHeld) {
			select {
			case <-ctx.Done():
				return
			case <-released:
			}
			backoff = time.Second
			continue
		}
		if err != nil {
			logf("supervisor: failed to start %s: %v", sp.spec.Name, err)
		} else {
			s.writeStatus()
			<-sp.exited
		}
		sp.mu.Lock()
		stopping, held := sp.stopping, sp.released != nil
		sp.mu.Unlock()
		if stopping || ctx.Err() != nil {
			return
		}
		if held {
			// Killed by a node fault: wait for the hold to end, above.
			s.writeStatus()
			continue
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

// start launches the process unless a node fault holds it, in which case it
// returns errHeld and the channel closed when the hold ends. The hold check
// and the launch happen under one lock, so a held process is never started
// behind the fault's back.
func (sp *supervisedProcess) start() (chan struct{}, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.released != nil {
		return sp.released, errHeld
	}
	logFile, err := os.OpenFile(sp.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logFile, "=== %s starting %s\n", time.Now().UTC().Format(time.RFC3339), sp.spec.String())
	cmd := exec.Command(sp.spec.Path, sp.spec.Args...)
	cmd.Env = append(os.Environ(), sp.spec.Env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	sp.cmd = cmd
	sp.exited = make(chan struct{})
	sp.state.PID = cmd.Process.Pid
	sp.state.Running = true
	sp.state.Started = time.Now()
	exited := sp.exited
	go func() {
		err := cmd.Wait()
		logFile.Close()
		sp.mu.Lock()
		sp.state.Running = false
		if !sp.stopping && sp.released == nil {
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
	return nil, nil
}

// hold keeps the process from being (re)started and returns its running
// process group and exit channel, if it runs; the caller kills it.
func (sp *supervisedProcess) hold() (pgid int, exited chan struct{}) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.released == nil {
		sp.released = make(chan struct{})
		sp.state.Held = true
	}
	if sp.cmd == nil || !sp.state.Running {
		return 0, nil
	}
	return sp.cmd.Process.Pid, sp.exited
}

// unhold lets keepRunning start the process again.
func (sp *supervisedProcess) unhold() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.released != nil {
		close(sp.released)
		sp.released = nil
		sp.state.Held = false
	}
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

func (s *supervisor) stopAll() {
	s.nodeMu.Lock()
	defer s.nodeMu.Unlock()
	for i := len(s.procs) - 1; i >= 0; i-- {
		sp := s.procs[i]
		// A stopped node's runtime is gone; what its Pods left behind is
		// swept after the supervisor exits.
		if n, err := s.plan.Node(sp.spec.Node); err == nil && sp.spec.Runtime && !s.stopped[n.Name] {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			if err := removeAllPods(ctx, n); err != nil {
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
	status := SupervisorStatus{Components: make([]ComponentState, 0, len(s.procs))}
	for _, sp := range s.procs {
		sp.mu.Lock()
		status.Components = append(status.Components, sp.state)
		if sp.state.Held && sp.spec.Runtime {
			status.StoppedNodes = append(status.StoppedNodes, sp.spec.Node)
		}
		sp.mu.Unlock()
	}
	data, _ := json.MarshalIndent(status, "", "  ")
	tmp := s.layout.supervisorStatusFile() + ".tmp"
	if os.WriteFile(tmp, data, 0o644) == nil {
		_ = os.Rename(tmp, s.layout.supervisorStatusFile())
	}
}

// ReadSupervisorStatus returns the supervisor's last report.
func (l Layout) ReadSupervisorStatus() (SupervisorStatus, error) {
	var status SupervisorStatus
	data, err := os.ReadFile(l.supervisorStatusFile())
	if err != nil {
		return status, err
	}
	return status, json.Unmarshal(data, &status)
}

// waitReady waits until the process's socket, port or URL answers, or the timeout.
func waitReady(ctx context.Context, p Process, timeout time.Duration) bool {
	if p.ReadyUnix == "" && p.ReadyTCP == "" && p.ReadyURL == "" {
		return true
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if ready(ctx, p) {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

func ready(ctx context.Context, p Process) bool {
	if p.ReadyURL != "" {
		return urlReady(ctx, p.ReadyURL, p.ReadyCA)
	}
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

// urlReady reports whether url answers 200 over TLS verified by the CA file.
func urlReady(ctx context.Context, url, caFile string) bool {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return false
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return false
	}
	c := &http.Client{
		Timeout:   time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
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
