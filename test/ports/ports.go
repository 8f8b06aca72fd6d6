// Package ports hands integration tests loopback TCP ports that stay
// theirs until the test ends.
//
// Asking the kernel for port 0 and closing the listener is not enough for
// a process that binds the port later, and again after each restart: the
// port lies in the ephemeral range, so any outgoing connection on the
// machine (another test's client, the Go toolchain, a kubelet) can be
// given it as its source port in between. Under load that happened often
// enough to fail the real-etcd tests, with a member that could not bind
// its peer port on restart. The ports here come from below the ephemeral
// range, which the kernel never picks for a source port, and each one is
// held by an flock on a file shared by every test process on the machine,
// so two packages running at once never hand out the same port.
package ports

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

const (
	// low is the first port handed out: above the well-known and the
	// commonly configured service ports.
	low = 20000
	// high is the end of the range (exclusive) unless the ephemeral range
	// starts below it. Kubernetes' NodePort range starts at 30000.
	high = 30000
	// minRange is the smallest range worth working in.
	minRange = 1000
)

// Reserve returns n distinct loopback ports that nothing listens on now,
// that no outgoing connection will take, and that no other caller of
// Reserve on this machine gets until t ends.
func Reserve(t testing.TB, n int) []int {
	t.Helper()
	hi, err := rangeEnd()
	if err != nil {
		t.Fatalf("ports: %v", err)
	}
	dir := filepath.Join(os.TempDir(), "etcd-operator-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatalf("ports: %v", err)
	}
	span := hi - low
	start := rand.IntN(span)
	got := make([]int, 0, n)
	for i := 0; i < span && len(got) < n; i++ {
		port := low + (start+i)%span
		f, ok := claim(dir, port)
		if !ok {
			continue
		}
		if !free(port) {
			_ = f.Close()
			continue
		}
		// Closing the file releases the lock, so it stays open until the
		// test (and every process it started on the port) is done.
		t.Cleanup(func() { _ = f.Close() })
		got = append(got, port)
	}
	if len(got) < n {
		t.Fatalf("ports: only %d of %d free ports in [%d, %d)", len(got), n, low, hi)
	}
	return got
}

// claim takes the machine-wide lock on port, without waiting. flock locks
// belong to the open file, so a second open in this same process is
// refused as another process's would be, and the lock is dropped when the
// process dies, however it dies.
func claim(dir string, port int) (*os.File, bool) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, false
	}
	return f, true
}

// free is whether a listener can bind port now; something outside the
// tests (a daemon on the machine) may own it.
func free(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// rangeEnd is the end of the range: high, or the start of the kernel's
// ephemeral range if that is lower.
func rangeEnd() (int, error) {
	hi := high
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	switch {
	case errors.Is(err, os.ErrNotExist):
		// Not Linux: keep the default range.
	case err != nil:
		return 0, err
	default:
		fields := strings.Fields(string(data))
		if len(fields) != 2 {
			return 0, fmt.Errorf("unexpected ip_local_port_range %q", data)
		}
		eph, err := strconv.Atoi(fields[0])
		if err != nil {
			return 0, fmt.Errorf("unexpected ip_local_port_range %q", data)
		}
		hi = min(hi, eph)
	}
	if hi-low < minRange {
		return 0, fmt.Errorf("the ephemeral port range starts at %d, leaving fewer than %d ports above %d", hi, minRange, low)
	}
	return hi, nil
}
