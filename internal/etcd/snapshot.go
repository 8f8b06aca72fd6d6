package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// Snapshot opens etcd's Maintenance.Snapshot stream on exactly one member,
// over a connection of its own that lives as long as the stream. clientv3's
// own Snapshot goes through the balancer and may pick any endpoint; a
// snapshot must come from the member the caller chose.
func (c *client) Snapshot(ctx context.Context, endpoint string) (*SnapshotStream, error) {
	if endpoint == "" {
		return nil, &CallError{Op: OpSnapshot, Err: errors.New("no endpoint given")}
	}
	if err := c.dial.CheckEndpoints(endpoint); err != nil {
		return nil, &CallError{Op: OpSnapshot, Endpoint: endpoint, Err: err}
	}
	// etcd checks the caller's identity before it sends anything, so a
	// token the member does not know yet (it has not applied the exchange
	// of the password for it, or clientv3 renewed it elsewhere a moment
	// ago; see IsTokenNotKnown, and etcd-io/etcd#18437 for why its wait for
	// the exchange can miss) is refused in place of the first message.
	// Nothing has been read then, so the stream is opened again as the
	// member catches up, within the call's own time, as single does for
	// unary calls.
	deadline := time.Now().Add(c.opts.callTimeout)
	for wait := tokenRetryWait; ; wait *= 2 {
		r, raw := c.openSnapshot(ctx, endpoint)
		if raw == nil {
			return &SnapshotStream{ReadCloser: r, StorageVersion: r.storageVersion}, nil
		}
		_ = r.Close()
		if !IsTokenNotKnown(raw) || time.Now().Add(wait).After(deadline) {
			return nil, r.err
		}
		select {
		case <-ctx.Done():
			return nil, r.err
		case <-time.After(wait):
		}
	}
}

// openSnapshot opens the stream on endpoint and takes its first message.
// On failure it returns the reader holding the classified error, and the
// error as gRPC gave it.
func (c *client) openSnapshot(ctx context.Context, endpoint string) (*snapshotReader, error) {
	ctx, cancel := context.WithCancel(ctx)
	r := &snapshotReader{ctx: ctx, cancel: cancel, endpoint: endpoint}
	conn, err := c.cli.Dial(endpoint)
	if err != nil {
		r.err = &CallError{Op: OpSnapshot, Endpoint: endpoint, Err: fmt.Errorf("failed to dial endpoint: %w", err)}
		return r, err
	}
	r.conn = conn
	r.stream, err = pb.NewMaintenanceClient(conn).Snapshot(ctx, &pb.SnapshotRequest{}, failFast)
	if err != nil {
		err = clientv3.ContextError(ctx, err)
		r.err = &CallError{Op: OpSnapshot, Endpoint: endpoint, Err: err}
		return r, err
	}
	if raw := r.next(); raw != nil {
		return r, raw
	}
	return r, nil
}

type snapshotReader struct {
	ctx      context.Context
	cancel   context.CancelFunc
	conn     *grpc.ClientConn
	stream   pb.Maintenance_SnapshotClient
	endpoint string

	buf []byte
	err error

	mu      sync.Mutex
	version string
}

func (r *snapshotReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		_ = r.next() // recorded in r.err as well
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// next receives one message into buf, or records why the stream ended in
// err; it returns the error as gRPC gave it, nil at the end of the stream.
func (r *snapshotReader) next() error {
	resp, err := r.stream.Recv()
	switch {
	case errors.Is(err, io.EOF):
		// The server ends the stream after sending the digest.
		r.err = io.EOF
		return nil
	case err != nil:
		err = clientv3.ContextError(r.ctx, err)
		r.err = &CallError{Op: OpSnapshot, Endpoint: r.endpoint, Err: classifyReply(OpSnapshot, err)}
		return err
	}
	if v := resp.GetVersion(); v != "" {
		r.mu.Lock()
		r.version = v
		r.mu.Unlock()
	}
	r.buf = resp.GetBlob()
	return nil
}

func (r *snapshotReader) Close() error {
	r.cancel()
	if r.conn == nil {
		return nil
	}
	return r.conn.Close()
}

func (r *snapshotReader) storageVersion() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.version
}
