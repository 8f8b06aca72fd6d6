//go:build integration

package tlsproc_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/certs/certstest"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/test/etcdproc"
	"github.com/quorumctl/etcd-operator/test/tlsproc"
)

// writeAttempts bounds the tries of one write: a leader change (an
// election after a member stops, a MoveLeader) fails the writes in flight
// once or twice; anything beyond is an outage.
const writeAttempts = 5

// putTimeout bounds one attempt. A write sent to a member that is just
// stopping waits for it until then; on a loaded machine (a test run beside
// the local cluster) a healthy write can take over a second, so the bound
// is generous and the figure that matters is the count of retries.
const putTimeout = 3 * time.Second

// TestPlainToTLSInTwoPasses walks a running plaintext cluster to mutual TLS
// as docs/design/0023 describes, with the operator's flag rendering
// (internal/component/pod) and its MemberUpdate, under a writer, on every
// etcd version the operator supports:
//
//  1. each member restarts with peer certificates and trust (its peer
//     listener and URL still http) and TLS beside plaintext on its client
//     port; the writer (a user's client) then moves to https;
//  2. each member is drained, stopped, its peer URL moved to https in
//     etcd's membership while it is down, and started with https only.
//
// No write fails beyond the retries of a leader change, every acknowledged
// write is there at the end, and the end is what a cluster created with TLS
// is: https peer and client URLs, plaintext and certificate-less clients
// refused.
func TestPlainToTLSInTwoPasses(t *testing.T) {
	for _, v := range etcdproc.Versions(t) {
		t.Run(v, func(t *testing.T) { plainToTLS(t, etcdproc.Binary(t, v)) })
	}
}

func plainToTLS(t *testing.T, bin string) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	members := etcdproc.StartCluster(t, bin, etcdproc.Options{Members: 3})
	peerCA, clientCA := certstest.CA(t, "peer-ca"), certstest.CA(t, "client-ca")
	operator := certstest.ClientCert(t, clientCA, "root")
	asOperator := certstest.ClientConfig([]*certs.KeyPair{clientCA}, &operator)
	// Step 1's defaults: peer TLS, client TLS with client certificates.
	shape := &v1alpha1.MemberTLS{
		Peer:   &v1alpha1.MemberTLSEndpoint{TrustBundle: "c-peer-trust"},
		Client: &v1alpha1.MemberTLSEndpoint{TrustBundle: "c-client-trust", ClientCertAuth: true},
	}
	dir := t.TempDir()
	files := map[string]tlsproc.Files{}
	plainURLs := map[string][2]string{}
	for _, m := range members {
		f := tlsproc.NewFiles(t, filepath.Join(dir, m.Name))
		f.Issue(t, "peer", peerCA, time.Hour)
		f.Issue(t, "client", clientCA, time.Hour)
		f.Trust(t, "peer", peerCA)
		f.Trust(t, "client", clientCA)
		files[m.Name] = f
		plainURLs[m.Name] = [2]string{m.PeerURL, m.ClientURL}
	}
	https := func(u string) string { return strings.Replace(u, "http://", "https://", 1) }

	w := startWriter(t, etcdproc.ClientURLs(members), nil)
	defer w.stop()
	w.waitAcked(t, 20)

	op := dialOperator(t, etcdproc.ClientURLs(members), nil)
	// restart drains m from the writer (as the client Service does), hands
	// leadership away when m has it, stops m, runs between (the peer URL
	// update of pass 2) and starts m with the flags rendered for spec.
	restart := func(m *etcdproc.Member, spec *v1alpha1.EtcdMember, clientTLS *tls.Config, between func(id uint64)) {
		t.Helper()
		// The operator retries a failed call on its next pass: a member
		// restarted just before leaves its client a broken connection.
		var list etcd.MemberList
		g.Eventually(func() (err error) { list, err = op.MemberList(ctx); return err }, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		id := memberID(t, list, m.Name)
		var others []string
		var transferee uint64
		for _, o := range members {
			if o != m {
				others = append(others, o.ClientURL)
				transferee = memberID(t, list, o.Name)
			}
		}
		w.setEndpoints(others)
		g.Eventually(func() error { return op.MoveLeader(ctx, transferee) }, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "hand leadership away from %s", m.Name)
		t.Logf("%s: stopping %s", time.Now().Format("15:04:05.000"), m.Name)
		m.Stop()
		if between != nil {
			between(id)
		}
		args := tlsproc.ReplaceFlags(m.Args(), files[m.Name].RenderedFlags(t, spec))
		g.Expect(m.RestartWithFlags(args, spec.Spec.ClientURL, clientTLS)).To(Succeed())
		g.Expect(m.WaitReady(30*time.Second)).To(Succeed(), "%s back\n%s\nlast lines:\n%s", m.Name, notInfo(m.LogTail(300)), m.LogTail(15))
		t.Logf("%s: %s serves again", time.Now().Format("15:04:05.000"), m.Name)
		w.setEndpoints(etcdproc.ClientURLs(members))
	}

	// Pass 1: certificates and trust, peer on http, client on both.
	for _, m := range members {
		u := plainURLs[m.Name]
		restart(m, tlsproc.MemberSpec(m.Name, u[0], u[1], shape), nil, nil)
	}
	for _, m := range members {
		g.Expect(rawGet(m.ClientURL, nil)).To(Succeed(), "pass 1: %s still serves plaintext", m.Name)
		g.Expect(rawGet(https(m.ClientURL), asOperator)).To(Succeed(), "pass 1: %s serves TLS on the same port", m.Name)
	}
	list, err := op.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range list.Members {
		g.Expect(m.PeerURLs).To(HaveEach(HavePrefix("http://")), "pass 1 changes no peer URL")
	}
	// Every member serves https now: the operator and the user's clients
	// move to it. The writer's old client is closed only at the end, so a
	// write in flight on it finishes there.
	_ = op.Close()
	for _, m := range members {
		m.ClientURL = https(m.ClientURL)
	}
	t.Logf("%s: clients move to https", time.Now().Format("15:04:05.000"))
	w.switchTo(t, etcdproc.ClientURLs(members), asOperator)
	op = dialOperator(t, etcdproc.ClientURLs(members), asOperator)
	defer func() { _ = op.Close() }()
	w.waitAcked(t, w.acked()+20)

	// Pass 2: one member at a time, its peer URL moved while it is down.
	for _, m := range members {
		u := plainURLs[m.Name]
		spec := tlsproc.MemberSpec(m.Name, https(u[0]), https(u[1]), shape)
		restart(m, spec, asOperator, func(id uint64) {
			// The operator knows the member is down and asks the others.
			var others []string
			for _, o := range members {
				if o != m {
					others = append(others, o.ClientURL)
				}
			}
			up := dialOperator(t, others, asOperator)
			defer func() { _ = up.Close() }()
			g.Eventually(func() error {
				_, err := up.MemberUpdate(ctx, id, []string{spec.Spec.PeerURL})
				return err
			}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "MemberUpdate of %s while it is down", m.Name)
		})
		w.waitAcked(t, w.acked()+10)
	}
	w.waitAcked(t, w.acked()+20)
	stats := w.stop()

	t.Logf("writes acknowledged: %d, retried attempts: %d, longest gap between acknowledgements: %s", stats.acked, stats.retries, stats.longestGap)
	for _, r := range stats.retried {
		t.Logf("retried: %s", r)
	}
	g.Expect(stats.failed).To(BeEmpty(), "no write fails beyond the retries of a leader change")

	list, err = op.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Members).To(HaveLen(3))
	for _, m := range list.Members {
		g.Expect(m.PeerURLs).To(HaveExactElements(HavePrefix("https://")), "%s's peer URL is https in etcd's membership", m.Name)
		g.Expect(m.ClientURLs).To(HaveExactElements(HavePrefix("https://")), "%s advertises https alone", m.Name)
	}
	for _, m := range members {
		g.Eventually(func() error { return rawGet(m.ClientURL, asOperator) }, 30*time.Second, 100*time.Millisecond).Should(Succeed(), func() string {
			var b strings.Builder
			fmt.Fprintf(&b, "%s serves its client over TLS\n", m.Name)
			for _, o := range members {
				st, err := op.Status(ctx, o.ClientURL)
				fmt.Fprintf(&b, "status of %s: %+v %v\n", o.Name, st, err)
			}
			serial := rawSerializable(m.ClientURL, asOperator)
			fmt.Fprintf(&b, "serializable read on %s: %v\n%s", m.Name, serial, notInfo(m.LogTail(60)))
			return b.String()
		})
		// Refusals count only from a member that serves (above).
		g.Expect(rawGet(strings.Replace(m.ClientURL, "https://", "http://", 1), nil)).NotTo(Succeed(), "%s refuses plaintext at the end", m.Name)
		g.Expect(rawGet(m.ClientURL, certstest.ClientConfig([]*certs.KeyPair{clientCA}, nil))).NotTo(Succeed(), "%s refuses a client without a certificate", m.Name)
		_, err := tlsproc.ServedCertificate(t, https(plainURLs[m.Name][0]))
		g.Expect(err).NotTo(HaveOccurred(), "%s's peer port speaks TLS", m.Name)
	}

	// Every acknowledged write is there, read linearizably over TLS.
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcdproc.ClientURLs(members), DialTimeout: 5 * time.Second, TLS: asOperator, Logger: zap.NewNop()})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = cli.Close() }()
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	resp, err := cli.Get(rctx, writerPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	g.Expect(err).NotTo(HaveOccurred())
	have := map[string]bool{}
	for _, kv := range resp.Kvs {
		have[string(kv.Key)] = true
	}
	var missing []string
	for _, k := range stats.keys {
		if !have[k] {
			missing = append(missing, k)
		}
	}
	g.Expect(missing).To(BeEmpty(), "every acknowledged write survives")
}

func dialOperator(t *testing.T, endpoints []string, cfg *tls.Config) etcd.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var opts []etcd.DialOption
	if cfg != nil {
		opts = append(opts, etcd.WithClientTLS(cfg))
	}
	cli, err := etcd.NewDialer(etcd.WithCallTimeout(10*time.Second)).Dial(ctx, endpoints, opts...)
	if err != nil {
		t.Fatalf("failed to dial %v: %v", endpoints, err)
	}
	return cli
}

func memberID(t *testing.T, list etcd.MemberList, name string) uint64 {
	t.Helper()
	for _, m := range list.Members {
		if m.Name == name {
			return m.ID
		}
	}
	t.Fatalf("no member %s in %+v", name, list.Members)
	return 0
}

const writerPrefix = "writer/"

// writer puts keys one after another for the whole transition, each with
// up to writeAttempts tries, as a user's client that retries a leader
// change would.
type writer struct {
	mu      sync.Mutex
	cli     *clientv3.Client
	old     []*clientv3.Client
	stats   writerStats
	lastAck time.Time
	cancel  context.CancelFunc
	done    chan struct{}
}

type writerStats struct {
	acked, retries int
	keys           []string
	failed         []string
	retried        []string
	longestGap     time.Duration
}

func newClient(t *testing.T, endpoints []string, cfg *tls.Config) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, TLS: cfg, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("failed to make a client for %v: %v", endpoints, err)
	}
	return cli
}

func startWriter(t *testing.T, endpoints []string, cfg *tls.Config) *writer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{cli: newClient(t, endpoints, cfg), cancel: cancel, done: make(chan struct{}), lastAck: time.Now()}
	go w.run(ctx)
	return w
}

func (w *writer) run(ctx context.Context) {
	defer close(w.done)
	for i := 0; ctx.Err() == nil; i++ {
		key := fmt.Sprintf("%s%07d", writerPrefix, i)
		for attempt := 1; ; attempt++ {
			w.mu.Lock()
			cli := w.cli
			w.mu.Unlock()
			start := time.Now()
			pctx, cancel := context.WithTimeout(ctx, putTimeout)
			_, err := cli.Put(pctx, key, "v")
			cancel()
			w.mu.Lock()
			if err == nil {
				now := time.Now()
				w.stats.longestGap = max(w.stats.longestGap, now.Sub(w.lastAck))
				w.lastAck = now
				w.stats.acked++
				w.stats.keys = append(w.stats.keys, key)
				w.mu.Unlock()
				break
			}
			if ctx.Err() != nil {
				w.mu.Unlock()
				return
			}
			if attempt >= writeAttempts {
				w.stats.failed = append(w.stats.failed, fmt.Sprintf("%s: %v", key, err))
				w.mu.Unlock()
				break
			}
			w.stats.retries++
			w.stats.retried = append(w.stats.retried, fmt.Sprintf("%s attempt %d at %s after %s: %v", key, attempt, time.Now().Format("15:04:05.000"), time.Since(start).Round(time.Millisecond), err))
			w.mu.Unlock()
		}
	}
}

// setEndpoints is what the client Service's endpoints do to a user's
// client: the drained member is no longer picked.
func (w *writer) setEndpoints(endpoints []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cli.SetEndpoints(endpoints...)
}

// switchTo moves the writer to a new client, as a user's client is
// reconfigured for https; the old one is closed at the end, so a write in
// flight on it finishes.
func (w *writer) switchTo(t *testing.T, endpoints []string, cfg *tls.Config) {
	t.Helper()
	cli := newClient(t, endpoints, cfg)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.old = append(w.old, w.cli)
	w.cli = cli
}

func (w *writer) acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats.acked
}

// waitAcked waits until n writes are acknowledged, so each step of the
// transition happens under writes.
func (w *writer) waitAcked(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for w.acked() < n {
		select {
		case <-w.done:
			t.Fatalf("the writer stopped at %d writes", w.acked())
		default:
		}
		if time.Now().After(deadline) {
			w.mu.Lock()
			defer w.mu.Unlock()
			t.Fatalf("only %d of %d writes acknowledged; failed: %v", w.stats.acked, n, w.stats.failed)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (w *writer) stop() writerStats {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range append(w.old, w.cli) {
		if c != nil {
			_ = c.Close()
		}
	}
	w.old, w.cli = nil, nil
	return w.stats
}

// notInfo is a log without etcd's info lines, where the reason a member
// stopped is.
func notInfo(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, `"level":"info"`) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func rawSerializable(endpoint string, cfg *tls.Config) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, TLS: cfg, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = cli.Get(ctx, "probe", clientv3.WithSerializable())
	return err
}
