package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// writer puts one key every period, each write tried once with a timeout
// of timeout, and keeps two measures of what a client saw: the time writes
// kept failing, summed over every failing stretch, and the longest stretch
// between two acknowledged writes (the outage a client without retries
// sees).
type writer struct {
	mu       sync.Mutex
	writes   int
	failures int
	failing  time.Duration
	failedAt time.Time
	longest  time.Duration
	lastOK   time.Time
	stop     chan struct{}
	done     chan struct{}
}

// startWriter writes through put, keys prefix/0 to prefix/99 in turn, and
// calls closeClient when it stops.
func startWriter(put func(ctx context.Context, key, value string) error, closeClient func() error, prefix string, period, timeout time.Duration) *writer {
	w := &writer{stop: make(chan struct{}), done: make(chan struct{}), lastOK: time.Now()}
	go func() {
		defer close(w.done)
		defer func() { _ = closeClient() }()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			err := put(ctx, fmt.Sprintf("%s/%d", prefix, i%100), fmt.Sprint(i))
			cancel()
			w.record(err, time.Now())
		}
	}()
	return w
}

func (w *writer) record(err error, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	if err != nil {
		w.failures++
		if w.failedAt.IsZero() {
			w.failedAt = now
		}
		return
	}
	if !w.failedAt.IsZero() {
		w.failing += now.Sub(w.failedAt)
		w.failedAt = time.Time{}
	}
	w.longest = max(w.longest, now.Sub(w.lastOK))
	w.lastOK = now
}

// writerResult is what a writer saw, once stopped.
type writerResult struct {
	writes, failures int
	failing, longest time.Duration
}

func (w *writer) finish() writerResult {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.failedAt.IsZero() {
		w.failing += time.Since(w.failedAt)
	}
	return writerResult{writes: w.writes, failures: w.failures, failing: w.failing, longest: max(w.longest, time.Since(w.lastOK))}
}
