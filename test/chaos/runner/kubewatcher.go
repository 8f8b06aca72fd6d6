package runner

import (
	"context"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quorumctl/etcd-operator/test/chaos"
)

// kubeWatcher lists and watches a prefix as a Kubernetes reflector does:
// a linearizable list, then a watch from the list's revision+1 with the
// previous values; after an error or a cancel it watches again from the
// revision after the last it saw, and after a compaction it lists again.
// It logs everything for CheckWatches.
type kubeWatcher struct {
	name   string
	cli    *clientv3.Client
	prefix string

	mu  sync.Mutex
	log []chaos.WatchRecord
	// last is the highest revision the watcher knows it has seen all of:
	// its last list's, its last event's, its last progress notification's.
	// A list moves it too, or a watcher that listed again after a
	// compaction would look behind until its next event.
	last int64
	// cancelWatch ends the current watch; holdAck is set while a hold is
	// asked for and not yet acknowledged, released closes to end it.
	cancelWatch context.CancelFunc
	// watching is the current watch's context, for progress requests;
	// asking tells one is under way.
	watching context.Context
	asking   bool
	holdAck  chan struct{}
	released chan struct{}
}

func newKubeWatcher(name string, cli *clientv3.Client, prefix string) *kubeWatcher {
	return &kubeWatcher{name: name, cli: cli, prefix: prefix}
}

// watchCtx carries the metadata the watch streams are keyed by: a
// progress request must carry the same to reach the watch's stream.
func watchCtx(ctx context.Context) context.Context { return clientv3.WithRequireLeader(ctx) }

func (w *kubeWatcher) run(ctx context.Context) {
	needList := true
	for ctx.Err() == nil {
		if needList {
			if !w.list(ctx) {
				continue
			}
			needList = false
		}
		w.mu.Lock()
		if ack := w.holdAck; ack != nil {
			released := w.released
			w.holdAck = nil
			w.mu.Unlock()
			close(ack)
			select {
			case <-released:
			case <-ctx.Done():
			}
			continue
		}
		sctx, cancel := context.WithCancel(watchCtx(ctx))
		w.cancelWatch, w.watching = cancel, sctx
		from := w.last + 1
		w.mu.Unlock()
		compacted, failed := w.watch(sctx, from)
		cancel()
		needList = compacted
		if failed && !compacted && !sleepCtx(ctx, errorPause) {
			return
		}
	}
}

// list reads the prefix linearizably and moves the watcher to its
// revision; it reports whether it succeeded.
func (w *kubeWatcher) list(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(ctx, kubeCallTimeout)
	resp, err := w.cli.Get(cctx, w.prefix, clientv3.WithPrefix())
	cancel()
	if err != nil {
		sleepCtx(ctx, errorPause)
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = append(w.log, chaos.WatchRecord{Kind: chaos.WatchList, Revision: resp.Header.Revision})
	w.last = max(w.last, resp.Header.Revision)
	return true
}

// watch watches from a revision until the watch ends: it reports whether
// it ended on a compaction, and whether on an error.
func (w *kubeWatcher) watch(ctx context.Context, from int64) (compacted, failed bool) {
	w.append(chaos.WatchRecord{Kind: chaos.WatchStart, Revision: from})
	wch := w.cli.Watch(ctx, w.prefix, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithPrevKV(), clientv3.WithProgressNotify())
	for resp := range wch {
		if err := resp.Err(); err != nil || resp.Canceled {
			rec := chaos.WatchRecord{Kind: chaos.WatchEnd, Compacted: resp.CompactRevision > 0, Revision: resp.CompactRevision}
			if err != nil {
				rec.Err = err.Error()
			}
			w.append(rec)
			return rec.Compacted, true
		}
		switch {
		case resp.IsProgressNotify():
			w.appendSeen(chaos.WatchRecord{Kind: chaos.WatchResponse, Revision: resp.Header.Revision, Progress: true}, resp.Header.Revision)
		case len(resp.Events) > 0:
			rec := chaos.WatchRecord{Kind: chaos.WatchResponse, Revision: resp.Header.Revision}
			var last int64
			for _, ev := range resp.Events {
				rec.Events = append(rec.Events, watchEvent(ev))
				last = max(last, ev.Kv.ModRevision)
			}
			w.appendSeen(rec, last)
		}
	}
	// The channel closes without an error when the watch's context ends.
	w.append(chaos.WatchRecord{Kind: chaos.WatchEnd, Err: "closed"})
	return false, ctx.Err() == nil
}

func watchEvent(ev *clientv3.Event) chaos.WatchEvent {
	kv := func(kv *mvccpb.KeyValue) chaos.KV {
		return chaos.KV{Key: string(kv.Key), Value: string(kv.Value), CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision}
	}
	out := chaos.WatchEvent{Delete: ev.Type == clientv3.EventTypeDelete, KV: kv(ev.Kv)}
	if ev.PrevKv != nil {
		p := kv(ev.PrevKv)
		out.Prev = &p
	}
	return out
}

func (w *kubeWatcher) append(rec chaos.WatchRecord) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = append(w.log, rec)
}

func (w *kubeWatcher) appendSeen(rec chaos.WatchRecord, seen int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = append(w.log, rec)
	w.last = max(w.last, seen)
}

// lastSeen is the highest revision the watcher has seen all of.
func (w *kubeWatcher) lastSeen() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

func (w *kubeWatcher) records() []chaos.WatchRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]chaos.WatchRecord(nil), w.log...)
}

// requestProgress asks etcd for a progress notification on the current
// watch's stream, one request at a time and without waiting for it to be
// sent. The request carries the watch's own context: the client finds the
// stream by its metadata, and where there is no stream it opens one with
// the request's context, which must then not outlive the watch, or the
// next watch could join a stream about to end.
func (w *kubeWatcher) requestProgress() {
	w.mu.Lock()
	defer w.mu.Unlock()
	ctx := w.watching
	if ctx == nil || ctx.Err() != nil || w.asking {
		return
	}
	w.asking = true
	go func() {
		// An error only means no notification comes this time.
		_ = w.cli.RequestProgress(ctx)
		w.mu.Lock()
		w.asking = false
		w.mu.Unlock()
	}()
}

// hold stops the watcher watching until release; it returns once the
// watcher has stopped.
func (w *kubeWatcher) hold(ctx context.Context) error {
	ack := make(chan struct{})
	w.mu.Lock()
	w.holdAck, w.released = ack, make(chan struct{})
	if w.cancelWatch != nil {
		w.cancelWatch()
	}
	w.mu.Unlock()
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release lets a held watcher watch again.
func (w *kubeWatcher) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.released != nil {
		close(w.released)
		w.released = nil
	}
	w.holdAck = nil
}
