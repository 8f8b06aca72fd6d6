package localcluster

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Progress prints what is happening and how long it has taken, so a long
// cold start is never silent.
type Progress struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
}

// NewProgress writes progress lines to out.
func NewProgress(out io.Writer) *Progress {
	return &Progress{out: out, start: time.Now()}
}

// Printf prints one line prefixed with the elapsed time.
func (p *Progress) Printf(format string, args ...any) {
	if p == nil || p.out == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, "[%6.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

// Elapsed is the time since the progress started.
func (p *Progress) Elapsed() time.Duration { return time.Since(p.start) }

// heartbeat prints a line every interval until the returned stop is called,
// for steps such as cold builds that take minutes.
func (p *Progress) heartbeat(what string, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	began := time.Now()
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.Printf("  ... still %s (%s)", what, time.Since(began).Round(time.Second))
			}
		}
	}()
	return func() { close(done) }
}
