package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The supervisor is a detached process that owns every component, so node
// faults go through it: it alone can keep a killed kubelet from being
// restarted. It takes them over HTTP on a unix socket that only root can
// open, next to the runtimes' sockets.

// ErrNodeNotStopped is returned by WipeNode for a node that runs: deleting
// volumes under a live kubelet would be a different fault from the one wipe
// models (a node that comes back with a blank disk).
var ErrNodeNotStopped = errors.New("the node is not stopped")

// ErrNotRunning is returned by node commands when no cluster runs.
var ErrNotRunning = errors.New("the local cluster is not running")

func controlSocket() string { return filepath.Join(runDir, "supervisor.sock") }

// serveControl listens on the control socket; closing the result stops it.
func (s *supervisor) serveControl(ctx context.Context) (io.Closer, error) {
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, err
	}
	_ = os.Remove(controlSocket())
	ln, err := net.Listen("unix", controlSocket())
	if err != nil {
		return nil, fmt.Errorf("failed to listen on %s: %w", controlSocket(), err)
	}
	if err := os.Chmod(controlSocket(), 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /nodes/{name}/{action}", func(w http.ResponseWriter, r *http.Request) {
		s.handleNode(ctx, w, r)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}

// handleNode runs one node command. The work uses the supervisor's context,
// not the request's: a client that goes away halfway through a start must
// not leave a node with its runtime up and its kubelet held.
func (s *supervisor) handleNode(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	select {
	case <-s.started:
	case <-r.Context().Done():
		return
	}
	n, err := s.plan.Node(r.PathValue("name"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	switch action := r.PathValue("action"); action {
	case "stop":
		err = s.stopNode(ctx, n)
	case "start":
		err = s.startNode(ctx, n)
	case "wipe":
		err = s.wipeNode(n)
	default:
		http.Error(w, fmt.Sprintf("unknown node action %q (stop, start, wipe)", action), http.StatusNotFound)
		return
	}
	switch {
	case errors.Is(err, ErrNodeNotStopped):
		http.Error(w, err.Error(), http.StatusConflict)
	case err != nil:
		logf("supervisor: node %s %s: %v", n.Name, r.PathValue("action"), err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
	default:
		fmt.Fprintln(w, "ok")
	}
}

// StopNode is a hard loss of the node: its kubelet, containerd, container
// shims and every container process are SIGKILLed at once and stay down, and
// its Pod addresses stop answering (packets to and from them are dropped).
// The API server keeps the Node until the node lifecycle controller marks it
// NotReady. Stopping a stopped node does nothing.
func (l Layout) StopNode(ctx context.Context, name string) error {
	return l.nodeCommand(ctx, name, "stop")
}

// StartNode brings a stopped node back with its disk as it was: its Pod
// addresses answer again and its containerd and kubelet start. It returns
// once both serve; the Node turns Ready a few seconds later. Starting a
// running node does nothing.
func (l Layout) StartNode(ctx context.Context, name string) error {
	return l.nodeCommand(ctx, name, "start")
}

// WipeNode deletes every local volume of a stopped node, as a node that
// comes back with a blank disk. It refuses (ErrNodeNotStopped) a running node.
func (l Layout) WipeNode(ctx context.Context, name string) error {
	return l.nodeCommand(ctx, name, "wipe")
}

func (l Layout) nodeCommand(ctx context.Context, name, action string) error {
	if l.SupervisorPID() == 0 {
		return fmt.Errorf("failed to %s node %s: %w", action, name, ErrNotRunning)
	}
	transport := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", controlSocket())
	}}
	defer transport.CloseIdleConnections()
	u := "http://supervisor/nodes/" + url.PathEscape(name) + "/" + action
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return fmt.Errorf("failed to reach the supervisor on %s: %w", controlSocket(), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg := strings.TrimSpace(string(body))
	switch resp.StatusCode {
	case http.StatusOK:
		return nil
	case http.StatusConflict:
		return fmt.Errorf("failed to %s node %s: %w (stop it first)", action, name, ErrNodeNotStopped)
	default:
		return fmt.Errorf("failed to %s node %s: %s", action, name, msg)
	}
}
