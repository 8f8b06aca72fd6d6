package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Defaults chosen so that one unreachable member costs a reconcile loop
// seconds, not minutes.
const (
	DefaultCallTimeout       = 5 * time.Second
	DefaultDialTimeout       = 3 * time.Second
	DefaultDefragmentTimeout = 60 * time.Second
)

// MaxReplyBytes bounds one reply the operator reads from etcd. A member
// runs an image a user chose, and gRPC's own default would let each of
// them make the operator hold 4 MiB per call, or 2 GiB with clientv3's:
// enough to kill the operator, and with it self-heal for every cluster.
// The largest reply the operator asks for is a member list, about 2.3 kB
// for nine members; 2 MiB also covers a Status, whose errors list is the
// only part of it that grows, and one chunk of a snapshot stream (32 KiB).
// See docs/design/0016-bounded-replies.md.
const MaxReplyBytes = 2 << 20

type options struct {
	callTimeout   time.Duration
	dialTimeout   time.Duration
	defragTimeout time.Duration
	tls           *tls.Config
	username      string
	password      string
	logger        *zap.Logger
}

// Option configures NewDialer.
type Option func(*options)

// WithCallTimeout bounds every Client call except Defragment.
func WithCallTimeout(d time.Duration) Option {
	return func(o *options) { o.callTimeout = d }
}

// WithDialTimeout bounds Dial. Dial only talks to the cluster when
// credentials are set (to fetch a token), so this mostly matters with auth.
func WithDialTimeout(d time.Duration) Option {
	return func(o *options) { o.dialTimeout = d }
}

// WithDefragmentTimeout bounds Defragment, which rewrites the whole database,
// and Compact, which waits for the old revisions to be freed.
func WithDefragmentTimeout(d time.Duration) Option {
	return func(o *options) { o.defragTimeout = d }
}

// WithTLS sets the client TLS configuration for https endpoints.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) { o.tls = cfg }
}

// WithCredentials authenticates as user; membership changes need the root role.
func WithCredentials(user, password string) Option {
	return func(o *options) {
		o.username = user
		o.password = password
	}
}

// WithLogger hands clientv3 a logger. The default discards its output because
// clientv3 logs every retried call at warn level, which for an operator that
// routinely probes dead members is noise, and our errors already carry context.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) { o.logger = l }
}

type dialer struct {
	opts options
}

// NewDialer returns the production Dialer backed by clientv3.
func NewDialer(opts ...Option) Dialer {
	o := options{
		callTimeout:   DefaultCallTimeout,
		dialTimeout:   DefaultDialTimeout,
		defragTimeout: DefaultDefragmentTimeout,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = zap.NewNop()
	}
	return &dialer{opts: o}
}

// Dial creates a Client without probing the endpoints.
//
// clientv3 3.7 builds its connection with grpc.NewClient, which ignores
// grpc.WithBlock, so clientv3.New never waits for a connection: the only
// network round-trip at dial time is the token fetch when credentials are
// set, bounded by DialTimeout. We keep it that way on purpose: a client
// fronting several members is still useful while some of them are down, and
// each call has its own timeout and reports IsUnavailable, which is where a
// reconciler can act on it. Probing here would either demand every endpoint
// (wrong during a partial outage) or any endpoint (the first call does that).
func (d *dialer) Dial(ctx context.Context, endpoints []string, opts ...DialOption) (Client, error) {
	if len(endpoints) == 0 {
		return nil, &CallError{Op: OpDial, Err: errors.New("no endpoints given")}
	}
	if err := ctx.Err(); err != nil {
		return nil, &CallError{Op: OpDial, Err: err}
	}
	// clientv3.New takes no context, so fold the caller's deadline into its
	// DialTimeout instead.
	timeout := d.opts.dialTimeout
	if deadline, ok := ctx.Deadline(); ok {
		if left := time.Until(deadline); left < timeout {
			timeout = left
		}
	}
	if timeout <= 0 {
		return nil, &CallError{Op: OpDial, Err: context.DeadlineExceeded}
	}
	eps := slices.Clone(endpoints)
	dial := ResolveDial(DialSettings{TLS: d.opts.tls}, opts...)
	if err := dial.CheckEndpoints(eps...); err != nil {
		return nil, &CallError{Op: OpDial, Err: err}
	}
	// Config.MaxCallRecvMsgSize bounds the calls clientv3 makes itself; the
	// default call option bounds those the package makes on connections
	// from Client.Dial, which take the dial options but not the call ones.
	user, password := d.opts.username, d.opts.password
	if !dial.Credentials.IsZero() {
		user, password = dial.Credentials.User, dial.Credentials.Password
	}
	dialOpts := []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxReplyBytes))}
	if dial.Addresses != nil {
		dialOpts = append(dialOpts, grpc.WithContextDialer(dial.contextDialer()))
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   eps,
		DialTimeout: timeout,
		// Never let the client rewrite its endpoints from the member list:
		// the reconciler decides whom it talks to, and a half-added member
		// must not become a target behind its back.
		AutoSyncInterval:   0,
		TLS:                dial.TLS,
		Username:           user,
		Password:           password,
		Logger:             d.opts.logger,
		DialOptions:        dialOpts,
		MaxCallRecvMsgSize: MaxReplyBytes,
	})
	if err != nil {
		return nil, &CallError{Op: OpDial, Err: err}
	}
	return &client{cli: cli, opts: d.opts, dial: dial, endpoints: eps}, nil
}
