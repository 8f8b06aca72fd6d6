package linearizability

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// Defaults for the zero fields of Config.
const (
	DefaultKeys        = 8
	DefaultCallTimeout = 2 * time.Second
	DefaultInterval    = 20 * time.Millisecond
)

// Config describes a workload.
type Config struct {
	// Endpoints are client URLs (http or https). Each gets its own clients,
	// each dialed to that endpoint alone: a member's URL pins the clients to
	// that member, the client Service's URL lets Kubernetes pick.
	Endpoints []string
	// ClientsPerEndpoint defaults to 1.
	ClientsPerEndpoint int
	// TLS, if set, is used for every connection.
	TLS *tls.Config
	// Keys is the size of the key space; a small one makes clients collide
	// often, which is what exposes a lost or reordered write. Defaults to
	// DefaultKeys.
	Keys int
	// KeyPrefix is prepended to every key. It defaults to a prefix unique to
	// this workload, so the register model may assume every key starts out
	// absent.
	KeyPrefix string
	// CallTimeout bounds each call; a write that runs out of it has an
	// unknown outcome. Defaults to DefaultCallTimeout.
	CallTimeout time.Duration
	// Interval is the pause between one client's calls, which keeps the
	// history small enough to check. Defaults to DefaultInterval.
	Interval time.Duration
	// ErrorPause is the pause after a call that failed or whose outcome is
	// unknown, in place of Interval. A client of an endpoint that is gone
	// fails at once on every call; without a longer pause it would fill the
	// history with writes of unknown outcome, each of which porcupine must
	// try at every later point. Defaults to Interval.
	ErrorPause time.Duration
	// DialOptions are added to every client's gRPC dial options, after the
	// workload's own: a dialer, say, that maps an endpoint's host name to
	// where that member runs now.
	DialOptions []grpc.DialOption
	// Seed makes the choice of calls repeatable; zero picks one at random.
	Seed uint64
}

func (c Config) withDefaults() Config {
	if c.ClientsPerEndpoint <= 0 {
		c.ClientsPerEndpoint = 1
	}
	if c.Keys <= 0 {
		c.Keys = DefaultKeys
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = fmt.Sprintf("linearizability/%d/", time.Now().UnixNano())
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.ErrorPause <= 0 {
		c.ErrorPause = c.Interval
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	return c
}

// Workload is a running set of clients recording into one History.
type Workload struct {
	cfg     Config
	history *History
	stop    chan struct{}
	wg      sync.WaitGroup
	clients []*clientv3.Client
	// values numbers the writes, so each writes a value of its own.
	values atomic.Uint64
	once   sync.Once
}

// Start dials the clients and sets them calling. Dialing does not wait for
// the endpoints to answer, so an endpoint that is down at first only shows
// as failed calls.
func Start(cfg Config) (*Workload, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("a workload needs at least one endpoint")
	}
	cfg = cfg.withDefaults()
	w := &Workload{cfg: cfg, history: NewHistory(), stop: make(chan struct{})}
	for i, endpoint := range cfg.Endpoints {
		for j := range cfg.ClientsPerEndpoint {
			cli, err := clientv3.New(clientv3.Config{
				Endpoints:            []string{endpoint},
				DialTimeout:          cfg.CallTimeout,
				DialKeepAliveTime:    cfg.CallTimeout,
				DialKeepAliveTimeout: cfg.CallTimeout,
				TLS:                  cfg.TLS,
				Logger:               zap.NewNop(),
				// gRPC's default reconnect backoff grows to two minutes; a
				// member back from a restart should see its clients again
				// within a second, as real clients that retry would.
				DialOptions: append([]grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
					Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
					MinConnectTimeout: cfg.CallTimeout,
				})}, cfg.DialOptions...),
			})
			if err != nil {
				w.closeClients()
				return nil, fmt.Errorf("failed to create a client for %s: %w", endpoint, err)
			}
			w.clients = append(w.clients, cli)
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(i*cfg.ClientsPerEndpoint+j)))
			w.wg.Add(1)
			go w.run(cli, endpoint, rng)
		}
	}
	return w, nil
}

// Run runs a workload until ctx is done and returns its history.
func Run(ctx context.Context, cfg Config) (*History, error) {
	w, err := Start(cfg)
	if err != nil {
		return nil, err
	}
	<-ctx.Done()
	return w.Stop(), nil
}

// History is the workload's history so far; Check it only after Stop.
func (w *Workload) History() *History { return w.history }

// Stop lets the calls in flight finish (each within CallTimeout), closes the
// clients and returns the history. Calls are not cancelled: a cancelled write
// would only add an unknown outcome.
func (w *Workload) Stop() *History {
	w.once.Do(func() {
		close(w.stop)
		w.wg.Wait()
		w.history.Close()
		w.closeClients()
	})
	return w.history
}

func (w *Workload) closeClients() {
	for _, c := range w.clients {
		_ = c.Close()
	}
}

func (w *Workload) run(cli *clientv3.Client, endpoint string, rng *rand.Rand) {
	defer w.wg.Done()
	id := w.history.NewClientID()
	// seen is the value this client last read or wrote per key; a
	// compare-and-swap expects it, which makes it succeed often enough to
	// matter while other clients keep it honest.
	seen := map[string]string{}
	pause := time.NewTimer(0)
	defer pause.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-pause.C:
		}
		in := w.next(rng, seen)
		op := w.call(cli, in)
		op.ClientID, op.Endpoint = id, endpoint
		pauseFor := w.cfg.Interval
		switch {
		case op.Input.Kind == "":
			w.history.AddFailed(in.Kind)
			pauseFor = w.cfg.ErrorPause
		case op.Output.Unknown:
			w.history.Add(op)
			// The call never ends as far as the checker knows, so this
			// client's later calls overlap it: they need a lane of their own.
			id = w.history.NewClientID()
			delete(seen, in.Key)
			pauseFor = w.cfg.ErrorPause
		default:
			w.history.Add(op)
			switch {
			case in.Kind == KindGet:
				seen[in.Key] = op.Output.Value
			case in.Kind == KindPut || op.Output.Swapped:
				seen[in.Key] = in.Value
			}
		}
		pause.Reset(pauseFor)
	}
}

// next picks a call: half reads, the rest puts and compare-and-swaps.
func (w *Workload) next(rng *rand.Rand, seen map[string]string) Input {
	key := w.cfg.KeyPrefix + strconv.Itoa(rng.IntN(w.cfg.Keys))
	value := "v" + strconv.FormatUint(w.values.Add(1), 10)
	switch r := rng.IntN(10); {
	case r < 5:
		return Input{Kind: KindGet, Key: key}
	case r < 8:
		return Input{Kind: KindPut, Key: key, Value: value}
	default:
		return Input{Kind: KindCAS, Key: key, Value: value, Expected: seen[key]}
	}
}

// call runs one call. It returns an Op with an empty Input when the call
// definitely failed.
func (w *Workload) call(cli *clientv3.Client, in Input) Op {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.CallTimeout)
	defer cancel()
	op := Op{Input: in, Call: w.history.Now()}
	var err error
	switch in.Kind {
	case KindGet:
		var resp *clientv3.GetResponse
		// clientv3 reads are linearizable unless WithSerializable is given.
		if resp, err = cli.Get(ctx, in.Key); err == nil && len(resp.Kvs) > 0 {
			op.Output.Value = string(resp.Kvs[0].Value)
		}
	case KindPut:
		_, err = cli.Put(ctx, in.Key, in.Value)
	case KindCAS:
		cmp := clientv3.Compare(clientv3.Value(in.Key), "=", in.Expected)
		if in.Expected == "" {
			cmp = clientv3.Compare(clientv3.CreateRevision(in.Key), "=", 0)
		}
		var resp *clientv3.TxnResponse
		if resp, err = cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(in.Key, in.Value)).Commit(); err == nil {
			op.Output.Swapped = resp.Succeeded
		}
	}
	op.Return = w.history.Now()
	switch {
	case err == nil:
		return op
	case in.Kind == KindGet || etcd.IsRefusedBeforeProposal(err):
		return Op{}
	default:
		op.Output = Output{Unknown: true}
		return op
	}
}
