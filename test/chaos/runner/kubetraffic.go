package runner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/test/chaos"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// The Kubernetes-like traffic: one writer updating and deleting many keys
// the way kube-apiserver's etcd3 store does, two watchers listing and
// watching them the way a reflector does.
const (
	kubeKeys = 50
	// kubeWriteEvery paces the writer: a steady stream of events for the
	// watchers without adding much to the load the faults are tested under.
	kubeWriteEvery   = 50 * time.Millisecond
	kubeDeleteChance = 0.2
	kubeCallTimeout  = 3 * time.Second
	kubeWatchers     = 2
	// kubeCompactWithin bounds each wait of the compaction: the writer
	// writing past the held watcher, the other watcher reaching the
	// compaction's revision.
	kubeCompactWithin = 30 * time.Second
	// kubeReachWithin bounds the wait at the end of an epoch for every
	// watcher to reach the writer's last acknowledged revision. It is a
	// limit, not a pause: the wait ends as soon as they have.
	kubeReachWithin = time.Minute
	kubePollEvery   = 100 * time.Millisecond
	// kubeProgressEvery is how often each watcher asks for a progress
	// notification, as kube-apiserver does for its consistent reads from
	// the watch cache: every epoch's watches then carry bookmarks to check.
	kubeProgressEvery = time.Second
)

// kubeWriter writes like kube-apiserver: every create, update and delete
// is a transaction that compares the key's ModRevision with the one it last
// saw (0 for a create) and reads the key instead when someone else wrote
// it. It records every write: acknowledged ones with their revision, the
// others as of unknown outcome.
type kubeWriter struct {
	cli    *clientv3.Client
	prefix string
	rng    *rand.Rand
	// known is each key's ModRevision as last seen, 0 when it does not
	// exist; a key missing is of unknown state and read first.
	known map[string]int64
	n     int

	mu      sync.Mutex
	writes  []chaos.KubeWrite
	lastRev int64
}

func (w *kubeWriter) run(ctx context.Context) {
	t := time.NewTicker(kubeWriteEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		key := w.prefix + strconv.Itoa(w.rng.IntN(kubeKeys))
		if err := w.step(ctx, key); err != nil && ctx.Err() == nil {
			delete(w.known, key)
			if !sleepCtx(ctx, errorPause) {
				return
			}
		}
	}
}

// step makes one write of key, reading it first when its state is unknown.
func (w *kubeWriter) step(ctx context.Context, key string) error {
	rev, ok := w.known[key]
	if !ok {
		cctx, cancel := context.WithTimeout(ctx, kubeCallTimeout)
		resp, err := w.cli.Get(cctx, key)
		cancel()
		if err != nil {
			return err
		}
		rev = 0
		if len(resp.Kvs) > 0 {
			rev = resp.Kvs[0].ModRevision
		}
		w.known[key] = rev
	}
	w.n++
	write := chaos.KubeWrite{Key: key}
	var op clientv3.Op
	if rev > 0 && w.rng.Float64() < kubeDeleteChance {
		write.Delete, op = true, clientv3.OpDelete(key)
	} else {
		write.Value = w.prefix + "v" + strconv.Itoa(w.n)
		op = clientv3.OpPut(key, write.Value)
	}
	cctx, cancel := context.WithTimeout(ctx, kubeCallTimeout)
	resp, err := w.cli.Txn(cctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(op).
		Else(clientv3.OpGet(key)).
		Commit()
	cancel()
	if err != nil {
		// It may have taken effect: a watcher may see it.
		w.record(write)
		return err
	}
	if !resp.Succeeded {
		// Someone else's write, or one of ours of unknown outcome.
		w.known[key] = 0
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			w.known[key] = kvs[0].ModRevision
		}
		return nil
	}
	write.Revision = resp.Header.Revision
	w.known[key] = resp.Header.Revision
	if write.Delete {
		w.known[key] = 0
	}
	w.record(write)
	return nil
}

func (w *kubeWriter) record(write chaos.KubeWrite) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, write)
	w.lastRev = max(w.lastRev, write.Revision)
}

// lastAcked is the revision of the writer's last acknowledged write.
func (w *kubeWriter) lastAcked() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastRev
}

// kubeTraffic is an epoch's Kubernetes-like traffic under one prefix.
type kubeTraffic struct {
	prefix   string
	clients  []*clientv3.Client
	writer   *kubeWriter
	watchers []*kubeWatcher
	// compactions are the revisions compacted at while the watchers ran.
	compactions []int64

	stopWriter, stopWatchers context.CancelFunc
	writerDone               chan struct{}
	watchersDone             sync.WaitGroup
	haltOnce                 sync.Once
}

// startKubeTraffic starts the writer and the watchers, each with a client
// of its own on every endpoint.
func startKubeTraffic(endpoints []string, prefix string, seed uint64) (*kubeTraffic, error) {
	k := &kubeTraffic{prefix: prefix, writerDone: make(chan struct{})}
	newClient := func() (*clientv3.Client, error) {
		cli, err := framework.EtcdClient(endpoints...)
		if err != nil {
			k.closeClients()
			return nil, fmt.Errorf("failed to connect the Kubernetes-like traffic: %w", err)
		}
		k.clients = append(k.clients, cli)
		return cli, nil
	}
	cli, err := newClient()
	if err != nil {
		return nil, err
	}
	k.writer = &kubeWriter{cli: cli, prefix: prefix, rng: rand.New(rand.NewPCG(seed, 0x6b756265)), known: map[string]int64{}}
	for i := range kubeWatchers {
		cli, err := newClient()
		if err != nil {
			return nil, err
		}
		k.watchers = append(k.watchers, newKubeWatcher(fmt.Sprintf("watcher-%d", i), cli, prefix))
	}
	wctx, stopWatchers := context.WithCancel(context.Background())
	k.stopWatchers = stopWatchers
	for _, w := range k.watchers {
		k.watchersDone.Add(1)
		go func() {
			defer k.watchersDone.Done()
			w.run(wctx)
		}()
	}
	k.watchersDone.Add(1)
	go func() {
		defer k.watchersDone.Done()
		t := time.NewTicker(kubeProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			for _, w := range k.watchers {
				w.requestProgress()
			}
		}
	}()
	ctx, stopWriter := context.WithCancel(context.Background())
	k.stopWriter = stopWriter
	go func() {
		defer close(k.writerDone)
		k.writer.run(ctx)
	}()
	return k, nil
}

func (k *kubeTraffic) closeClients() {
	for _, c := range k.clients {
		_ = c.Close()
	}
}

// compact makes the first watcher meet a compaction, as a reflector does
// when it comes back after the API server compacted: the watcher stops
// watching; once the writer has written past it and the second watcher has
// received the writes up to the compaction's revision, the cluster is
// compacted there, and the first watcher resumes from its last revision,
// which is now compacted, so it must list again. The second watcher keeps
// watching through it. It returns the revision compacted at.
func (k *kubeTraffic) compact(ctx context.Context) (int64, error) {
	held, other := k.watchers[0], k.watchers[1]
	hctx, cancel := context.WithTimeout(ctx, kubeCompactWithin)
	err := held.hold(hctx)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("%s did not stop watching: %w", held.name, err)
	}
	defer held.release()
	from := held.lastSeen()
	var rev int64
	err = framework.WaitFor(ctx, kubeCompactWithin, kubePollEvery, func(context.Context) (bool, error) {
		rev = k.writer.lastAcked()
		return rev > from+1, nil
	})
	if err != nil {
		return 0, fmt.Errorf("the Kubernetes-like writer did not write past revision %d: %w", from+1, err)
	}
	if err := k.waitReached(ctx, []*kubeWatcher{other}, rev, kubeCompactWithin); err != nil {
		return 0, err
	}
	err = framework.WaitFor(ctx, kubeCompactWithin, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, kubeCallTimeout)
		defer cancel()
		_, err := k.writer.cli.Compact(ctx, rev)
		if etcd.IsCompacted(err) {
			// Compacted already, at rev or later: an earlier try of
			// ours that timed out, or etcd's own compaction.
			return true, nil
		}
		return err == nil, err
	})
	if err != nil {
		return 0, fmt.Errorf("failed to compact at revision %d: %w", rev, err)
	}
	k.compactions = append(k.compactions, rev)
	return rev, nil
}

// waitReached waits until every watcher has seen revision rev, asking each
// that has not for a progress notification, so that a watcher with no
// event to receive learns it is at the end.
func (k *kubeTraffic) waitReached(ctx context.Context, ws []*kubeWatcher, rev int64, within time.Duration) error {
	err := framework.WaitFor(ctx, within, kubePollEvery, func(context.Context) (bool, error) {
		all := true
		for _, w := range ws {
			if w.lastSeen() < rev {
				all = false
				w.requestProgress()
			}
		}
		return all, nil
	})
	if err != nil {
		var behind []string
		for _, w := range ws {
			if s := w.lastSeen(); s < rev {
				behind = append(behind, fmt.Sprintf("%s at %d", w.name, s))
			}
		}
		return fmt.Errorf("watchers did not reach revision %d: %v: %w", rev, behind, err)
	}
	return nil
}

// stop stops the writer and, when reach is set, waits for every watcher to
// have seen its last acknowledged write (the error says which did not),
// then stops the watchers and returns the history.
func (k *kubeTraffic) stop(ctx context.Context, reach bool) (chaos.WatchHistory, error) {
	k.stopWriter()
	<-k.writerDone
	var err error
	if reach {
		err = k.waitReached(ctx, k.watchers, k.writer.lastAcked(), kubeReachWithin)
	}
	k.halt()
	h := chaos.WatchHistory{Prefix: k.prefix, Writes: k.writer.writes, Compactions: k.compactions}
	for _, w := range k.watchers {
		h.Watchers = append(h.Watchers, chaos.WatcherLog{Name: w.name, Records: w.records()})
	}
	return h, err
}

// halt stops the writer and the watchers and closes their clients, once:
// after stop, or instead of it when an epoch ends before its check.
func (k *kubeTraffic) halt() {
	k.haltOnce.Do(func() {
		k.stopWriter()
		<-k.writerDone
		k.stopWatchers()
		k.watchersDone.Wait()
		k.closeClients()
	})
}

// acknowledged counts the writer's acknowledged writes in a history.
func acknowledged(h chaos.WatchHistory) int {
	n := 0
	for _, w := range h.Writes {
		if w.Revision > 0 {
			n++
		}
	}
	return n
}

// sleepCtx waits d unless ctx ends first; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
