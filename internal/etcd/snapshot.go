package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

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
	if c.cli.Username != "" {
		// A stream's refusal of a token the member does not know yet (see
		// IsTokenNotKnown) comes with its first message, past where asking
		// again is simple; a Status first waits until the member knows it.
		err := c.single(ctx, OpSnapshot, endpoint, c.opts.callTimeout, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := statusOn(ctx, conn, endpoint)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	conn, err := c.cli.Dial(endpoint)
	if err != nil {
		return nil, &CallError{Op: OpSnapshot, Endpoint: endpoint, Err: fmt.Errorf("failed to dial endpoint: %w", err)}
	}
	ctx, cancel := context.WithCancel(ctx)
	stream, err := pb.NewMaintenanceClient(conn).Snapshot(ctx, &pb.SnapshotRequest{}, failFast)
	if err != nil {
		cancel()
		_ = conn.Close()
		return nil, &CallError{Op: OpSnapshot, Endpoint: endpoint, Err: clientv3.ContextError(ctx, err)}
	}
	r := &snapshotReader{ctx: ctx, cancel: cancel, conn: conn, stream: stream, endpoint: endpoint}
	return &SnapshotStream{ReadCloser: r, StorageVersion: r.storageVersion}, nil
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
		resp, err := r.stream.Recv()
		switch {
		case errors.Is(err, io.EOF):
			// The server ends the stream after sending the digest.
			r.err = io.EOF
			continue
		case err != nil:
			r.err = &CallError{Op: OpSnapshot, Endpoint: r.endpoint, Err: classifyReply(OpSnapshot, clientv3.ContextError(r.ctx, err))}
			continue
		}
		if v := resp.GetVersion(); v != "" {
			r.mu.Lock()
			r.version = v
			r.mu.Unlock()
		}
		r.buf = resp.GetBlob()
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *snapshotReader) Close() error {
	r.cancel()
	return r.conn.Close()
}

func (r *snapshotReader) storageVersion() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.version
}
