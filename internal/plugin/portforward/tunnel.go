package portforward

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"

	"github.com/gorilla/websocket"
)

// Tunnel listens on a random port of 127.0.0.1 and carries every connection
// it accepts to the Pod's port.
type Tunnel struct {
	namespace, pod string
	port           int
	listener       net.Listener
	dial           func(context.Context) (*websocket.Conn, error)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	conns   map[io.Closer]struct{}
	lastErr error
}

// Forward checks that the API server lets us forward to the Pod's port and
// starts listening. The check opens and closes one WebSocket, so a missing
// permission or a vanished Pod is reported here, with an API error that
// apierrors classifies, rather than later as an opaque connection reset.
// ctx bounds only that check; the Tunnel runs until Close.
func (f *Forwarder) Forward(ctx context.Context, namespace, pod string, port int) (*Tunnel, error) {
	u, err := f.url(namespace, pod, port)
	if err != nil {
		return nil, err
	}
	return open(ctx, namespace, pod, port, func(ctx context.Context) (*websocket.Conn, error) { return f.dial(ctx, u) })
}

func open(ctx context.Context, namespace, pod string, port int, dial func(context.Context) (*websocket.Conn, error)) (*Tunnel, error) {
	probe, err := dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to port-forward to Pod %s/%s port %d: %w", namespace, pod, port, err)
	}
	_ = probe.Close()

	// Loopback only: the tunnel carries unauthenticated etcd traffic.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("failed to listen on a local port for Pod %s/%s: %w", namespace, pod, err)
	}
	tctx, cancel := context.WithCancel(context.Background())
	t := &Tunnel{
		namespace: namespace, pod: pod, port: port,
		listener: ln, dial: dial,
		ctx: tctx, cancel: cancel,
		conns: map[io.Closer]struct{}{},
	}
	t.wg.Go(t.accept)
	return t, nil
}

// Addr is the local host:port that reaches the Pod's port.
func (t *Tunnel) Addr() string { return t.listener.Addr().String() }

// Endpoint is Addr as an etcd client URL.
func (t *Tunnel) Endpoint() string {
	return (&url.URL{Scheme: "http", Host: t.Addr()}).String()
}

// LastError is the most recent failure to carry a connection, if any. The
// caller of the tunnel sees only a closed connection; this says why.
func (t *Tunnel) LastError() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastErr
}

// Close stops listening and cuts every connection in flight.
func (t *Tunnel) Close() error {
	t.cancel()
	err := t.listener.Close()
	t.mu.Lock()
	for c := range t.conns {
		_ = c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func (t *Tunnel) accept() {
	for {
		local, err := t.listener.Accept()
		if err != nil {
			// Close is the only way out; anything else on a loopback
			// listener (such as running out of file descriptors) would
			// spin, so stop and remember why.
			if !errors.Is(err, net.ErrClosed) {
				t.fail(fmt.Errorf("failed to accept a local connection: %w", err))
			}
			return
		}
		if !t.track(local) {
			_ = local.Close()
			return
		}
		t.wg.Go(func() {
			defer t.untrack(local)
			if err := t.carry(local); err != nil {
				t.fail(err)
			}
		})
	}
}

// track registers c for Close; it reports false once the tunnel is closing.
func (t *Tunnel) track(c io.Closer) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx.Err() != nil {
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *Tunnel) untrack(c io.Closer) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
	_ = c.Close()
}

func (t *Tunnel) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastErr = err
}

// carry connects one local connection to the Pod until either side ends.
func (t *Tunnel) carry(local net.Conn) error {
	ws, err := t.dial(t.ctx)
	if err != nil {
		return fmt.Errorf("failed to port-forward to Pod %s/%s port %d: %w", t.namespace, t.pod, t.port, err)
	}
	if !t.track(ws.NetConn()) {
		_ = ws.Close()
		return nil
	}
	defer t.untrack(ws.NetConn())

	errs := make(chan error, 2)
	go func() { errs <- upstream(ws, local) }()
	go func() { errs <- downstream(local, ws, t.port) }()
	first := <-errs
	// Either side ending ends the connection: the v4 protocol has no
	// half-close, so the other direction would only hang.
	_ = local.Close()
	_ = ws.Close()
	if second := <-errs; first == nil {
		first = second
	}
	if first != nil && t.ctx.Err() == nil {
		return fmt.Errorf("port-forward to Pod %s/%s port %d: %w", t.namespace, t.pod, t.port, first)
	}
	return nil
}

// upstream copies local bytes into data-channel messages.
func upstream(ws *websocket.Conn, local net.Conn) error {
	buf := make([]byte, bufferSize+1)
	buf[0] = dataChannel
	for {
		n, err := local.Read(buf[1:])
		if n > 0 {
			if werr := ws.WriteMessage(websocket.BinaryMessage, buf[:1+n]); werr != nil {
				return ignoreClosed(werr)
			}
		}
		if err != nil {
			return ignoreClosed(err)
		}
	}
}

// downstream copies data-channel messages to the local connection and turns
// a message on the error channel into an error.
func downstream(local net.Conn, ws *websocket.Conn, port int) error {
	data := &preambleWriter{w: local, port: port}
	var reason bytes.Buffer
	failure := &preambleWriter{w: &reason, port: port}
	for {
		_, r, err := ws.NextReader()
		if err != nil {
			// The kubelet closes the connection right after explaining
			// itself, so the explanation is the better error.
			if reason.Len() > 0 {
				return errors.New(reason.String())
			}
			return ignoreClosed(err)
		}
		var ch [1]byte
		if _, err := io.ReadFull(r, ch[:]); err != nil {
			continue // an empty message carries nothing
		}
		switch ch[0] {
		case dataChannel:
			if _, err := io.Copy(data, r); err != nil {
				return ignoreClosed(err)
			}
		case errorChannel:
			if _, err := io.Copy(failure, r); err != nil {
				return err
			}
		}
	}
}

// preambleWriter drops the two port bytes that open each channel and checks
// that they name the port we asked for.
type preambleWriter struct {
	w        io.Writer
	port     int
	preamble []byte
}

func (p *preambleWriter) Write(b []byte) (int, error) {
	n := 0
	if missing := 2 - len(p.preamble); missing > 0 {
		take := min(missing, len(b))
		p.preamble = append(p.preamble, b[:take]...)
		b, n = b[take:], take
		if len(p.preamble) == 2 {
			if got := int(binary.LittleEndian.Uint16(p.preamble)); got != p.port {
				return n, fmt.Errorf("the server opened port %d, want %d", got, p.port)
			}
		}
	}
	if len(b) == 0 {
		return n, nil
	}
	m, err := p.w.Write(b)
	return n + m, err
}

// ignoreClosed treats the ordinary ends of a connection as success: EOF,
// a normal WebSocket close, or our own Close racing a read.
func ignoreClosed(err error) error {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) ||
		websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
		return nil
	}
	return err
}
