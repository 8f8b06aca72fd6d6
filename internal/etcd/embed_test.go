package etcd_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"
)

// testMember is one in-process etcd server on random loopback ports.
type testMember struct {
	name      string
	peerURL   string
	clientURL string
	etcd      *embed.Etcd
	stopOnce  sync.Once
}

// stop closes the server; embed.Etcd.Close panics when called twice.
func (m *testMember) stop() {
	m.stopOnce.Do(m.etcd.Close)
}

func (m *testMember) id() uint64 { return uint64(m.etcd.Server.MemberID()) }

// freeURL reserves a loopback port by listening on port 0 and releasing it.
// Another process could grab it in between, but on a test machine that is
// rare enough not to be worth the complexity of passing listeners to embed.
func freeURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("failed to reserve a port: %v", err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}

type memberOpts struct {
	// initialCluster lists other members as name=peerURL; empty starts a new
	// single-member cluster.
	initialCluster []string
	maxLearners    int
	quotaBytes     int64
	// maxRequestBytes raises etcd's 1.5 MiB bound on one request.
	maxRequestBytes uint
}

func newMember(t *testing.T, name string) *testMember {
	t.Helper()
	return &testMember{name: name, peerURL: freeURL(t), clientURL: freeURL(t)}
}

// start launches m and waits until it serves clients.
func (m *testMember) start(t *testing.T, o memberOpts) {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = t.TempDir()
	cfg.Logger = "zap"
	// Closing an embedded server logs spurious errors; keep test output readable.
	cfg.LogLevel = "fatal"
	// Fast ticks keep elections and learner catch-up quick, while still
	// leaving headroom for a loaded CI machine.
	cfg.TickMs = 25
	cfg.ElectionMs = 250
	cfg.UnsafeNoFsync = true
	cfg.BcryptCost = uint(bcrypt.MinCost)
	if o.maxLearners > 0 {
		cfg.MaxLearners = o.maxLearners
	}
	if o.quotaBytes > 0 {
		cfg.QuotaBackendBytes = o.quotaBytes
	}
	if o.maxRequestBytes > 0 {
		cfg.MaxRequestBytes = o.maxRequestBytes
	}
	pu, cu := mustURL(t, m.peerURL), mustURL(t, m.clientURL)
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	self := m.name + "=" + m.peerURL
	if len(o.initialCluster) == 0 {
		cfg.InitialCluster = self
		cfg.ClusterState = embed.ClusterStateFlagNew
	} else {
		cfg.InitialCluster = strings.Join(append(o.initialCluster, self), ",")
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("failed to start etcd %s: %v", m.name, err)
	}
	m.etcd = e
	t.Cleanup(m.stop)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcd %s failed while starting: %v", m.name, err)
	case <-time.After(20 * time.Second):
		t.Fatalf("etcd %s did not become ready", m.name)
	}
}

func mustURL(t *testing.T, s string) url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("failed to parse %q: %v", s, err)
	}
	return *u
}

// startCluster starts a single-member cluster.
func startCluster(t *testing.T, o memberOpts) *testMember {
	t.Helper()
	m := newMember(t, "m1")
	m.start(t, o)
	return m
}

// rawClient is for test setup that is not part of the Client interface.
func rawClient(t *testing.T, m *testMember) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{m.clientURL},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("failed to create raw client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func initialClusterEntry(m *testMember) string {
	return fmt.Sprintf("%s=%s", m.name, m.peerURL)
}
