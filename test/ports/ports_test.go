package ports

import (
	"net"
	"strconv"
	"sync"
	"testing"
)

func TestReserveHandsOutDistinctBindablePorts(t *testing.T) {
	ps := Reserve(t, 50)
	seen := map[int]bool{}
	for _, p := range ps {
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if p < low || p >= high {
			t.Fatalf("port %d outside [%d, %d)", p, low, high)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("reserved port %d cannot be bound: %v", p, err)
		}
		_ = l.Close()
	}
}

// Callers at once, as parallel tests in one package are, never share a
// port: the lock is taken per open file, so it holds within a process too.
func TestConcurrentCallersNeverShare(t *testing.T) {
	var mu sync.Mutex
	owner := map[int]int{}
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, p := range Reserve(t, 20) {
				mu.Lock()
				if o, ok := owner[p]; ok {
					t.Errorf("port %d handed to caller %d and %d", p, o, c)
				}
				owner[p] = c
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// A port another process listens on is not free, and is free again once
// that listener is gone.
func TestFreeSeesABoundPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := l.Addr().(*net.TCPAddr).Port
	if free(p) {
		t.Fatalf("port %d reported free while bound", p)
	}
	_ = l.Close()
	if !free(p) {
		t.Fatalf("port %d not free after its listener closed", p)
	}
}
