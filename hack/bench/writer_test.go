package main

import (
	"errors"
	"testing"
	"time"
)

// The two measures: failing time sums every failing stretch, from the
// first failed write to the next acknowledged one; the longest outage is
// the widest gap between acknowledged writes.
func TestWriterRecord(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := &writer{lastOK: t0}
	fail := errors.New("timeout")
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	w.record(nil, at(50))
	w.record(fail, at(100))
	w.record(fail, at(150))
	w.record(nil, at(400)) // failing 100..400, gap 50..400
	w.record(nil, at(450))
	w.record(fail, at(500))
	w.record(nil, at(600)) // failing 500..600, gap 450..600
	if w.writes != 7 || w.failures != 3 {
		t.Fatalf("writes %d failures %d, want 7 and 3", w.writes, w.failures)
	}
	if want := 400 * time.Millisecond; w.failing != want {
		t.Errorf("failing %s, want %s", w.failing, want)
	}
	if want := 350 * time.Millisecond; w.longest != want {
		t.Errorf("longest %s, want %s", w.longest, want)
	}
}
