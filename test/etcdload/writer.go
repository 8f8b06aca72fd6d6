package etcdload

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// WriteError is one write a Writer saw fail: when it was sent, and when it
// returned.
type WriteError struct {
	Started  time.Time
	At       time.Time
	Endpoint string
	Err      error
}

// Written is one write that succeeded: when it was sent, and when it was
// acknowledged.
type Written struct {
	Started, At time.Time
	Endpoint    string
}

// Writer puts a counter through each of its endpoints, one client pinned to
// each, and records every write with its times, so that a test can tell what
// a failure was a failure of, and when writes went through again.
type Writer struct {
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	errs    []WriteError
	oks     []Written
	clients []*clientv3.Client
}

// StartWriter starts writing through every endpoint every interval, each
// call bounded by callTimeout.
func StartWriter(endpoints []string, interval, callTimeout time.Duration) (*Writer, error) {
	w := &Writer{stop: make(chan struct{})}
	for i, ep := range endpoints {
		c, err := Dial(ep)
		if err != nil {
			w.Stop()
			return nil, err
		}
		w.clients = append(w.clients, c)
		w.wg.Add(1)
		go w.run(c, ep, fmt.Sprintf("writer/%d", i), interval, callTimeout)
	}
	return w, nil
}

func (w *Writer) run(c *clientv3.Client, ep, key string, interval, callTimeout time.Duration) {
	defer w.wg.Done()
	for n := 0; ; n++ {
		select {
		case <-w.stop:
			return
		case <-time.After(interval):
		}
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		started := time.Now()
		_, err := c.Put(ctx, key, fmt.Sprint(n))
		at := time.Now()
		cancel()
		w.mu.Lock()
		if err != nil {
			w.errs = append(w.errs, WriteError{Started: started, At: at, Endpoint: ep, Err: err})
		} else {
			w.oks = append(w.oks, Written{Started: started, At: at, Endpoint: ep})
		}
		w.mu.Unlock()
	}
}

// Stop stops writing and returns the failures and how many writes went
// through.
func (w *Writer) Stop() ([]WriteError, int) {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
	for _, c := range w.clients {
		_ = c.Close()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]WriteError(nil), w.errs...), len(w.oks)
}

// Succeeded are the writes that went through, in the order they returned.
func (w *Writer) Succeeded() []Written {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Written(nil), w.oks...)
}
