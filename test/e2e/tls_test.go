//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
	"github.com/quorumctl/etcd-operator/test/linearizability"
)

// adminTLS is the administrators' client configuration of a TLS cluster.
func (r *rollCluster) adminTLS(ctx context.Context) framework.ClientMaterial {
	m, err := framework.ReadClientSecret(ctx, r.c, r.ns, v1alpha1.AdminClientSecretName(r.name))
	r.g.Expect(err).NotTo(HaveOccurred())
	return m
}

func (r *rollCluster) serverName() string { return framework.ClientServerName(r.ns, r.name) }

// TestTLSDefaults: tls: {} gives operator-managed peer and mutual client
// TLS. etcdctl with the administrators' Secret works over https, plaintext
// fails, a client without a certificate is refused, and every peer URL is
// https.
func TestTLSDefaults(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := newRollCluster(ctx, t, "tls-defaults", func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{} })
	admin := r.adminTLS(ctx)
	svc, err := env.ClientServiceEndpoint(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	https := framework.HTTPS([]string{svc})[0]
	// etcdctl in the cluster, with the administrators' Secret mounted, by
	// the client Service's name, as a user would run it.
	out, err := env.RunEtcdctl(ctx, r.ns, v1alpha1.AdminClientSecretName(r.name),
		"https://"+r.serverName()+":2379", "put", "tls-defaults", "ok")
	r.g.Expect(err).NotTo(HaveOccurred(), out)
	r.g.Expect(out).To(ContainSubstring("OK"))

	cfg, err := admin.TLSConfig(r.serverName(), true)
	r.g.Expect(err).NotTo(HaveOccurred())
	c, err := framework.EtcdTLSClient(cfg, https)
	r.g.Expect(err).NotTo(HaveOccurred())
	defer c.Close()
	get, err := c.Get(ctx, "tls-defaults")
	r.g.Expect(err).NotTo(HaveOccurred())
	r.g.Expect(get.Kvs).To(HaveLen(1))
	list, err := c.MemberList(ctx)
	r.g.Expect(err).NotTo(HaveOccurred())
	r.g.Expect(list.Members).To(HaveLen(3))
	for _, m := range list.Members {
		r.g.Expect(m.PeerURLs[0]).To(HavePrefix("https://"), "peer traffic of %s is TLS", m.Name)
		r.g.Expect(m.ClientURLs[0]).To(HavePrefix("https://"))
	}

	plain, err := framework.EtcdClient(svc)
	r.g.Expect(err).NotTo(HaveOccurred())
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = plain.Get(pctx, "tls-defaults")
	pcancel()
	plain.Close()
	r.g.Expect(err).To(HaveOccurred(), "plaintext fails")

	noCert, err := admin.TLSConfig(r.serverName(), false)
	r.g.Expect(err).NotTo(HaveOccurred())
	anon, err := framework.EtcdTLSClient(noCert, https)
	r.g.Expect(err).NotTo(HaveOccurred())
	actx, acancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = anon.Get(actx, "tls-defaults")
	acancel()
	anon.Close()
	r.g.Expect(err).To(HaveOccurred(), "a client without a certificate is refused")

	cl := r.get(ctx)
	r.g.Expect(cl.Status.TLS).NotTo(BeNil())
	r.g.Expect(cl.Status.TLS.Peer.Phase).To(Equal(v1alpha1.TLSPhaseSteady))
	r.g.Expect(cl.Status.TLS.Client.NextRenewal).NotTo(BeNil())
}

// TestTLSLeafRenewalWithoutRestart: with a five-minute certificate life
// every member's certificate is renewed, each member serves the new one on
// its client port, and no member Pod is re-created or restarted.
func TestTLSLeafRenewalWithoutRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r := newRollCluster(ctx, t, "tls-renew", func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{OperatorManaged: &v1alpha1.OperatorManagedTLS{CertificateDuration: &metav1.Duration{Duration: 5 * time.Minute}}}
	})
	before, err := env.PodStates(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	addrs, err := env.MemberAddresses(ctx, r.ns, r.name, v1alpha1.ClientPort)
	r.g.Expect(err).NotTo(HaveOccurred())
	first := map[string]string{}
	for _, a := range addrs {
		c, err := framework.ServedCertificate(ctx, a)
		r.g.Expect(err).NotTo(HaveOccurred())
		first[a] = certs.Serial(c)
	}
	// Due at two thirds of five minutes; the kubelet then brings the new
	// Secret into the Pods within its sync period.
	r.g.Expect(framework.WaitFor(ctx, 8*time.Minute, 2*time.Second, func(ctx context.Context) (bool, error) {
		for _, a := range addrs {
			c, err := framework.ServedCertificate(ctx, a)
			if err != nil || certs.Serial(c) == first[a] {
				return false, err
			}
		}
		return true, nil
	})).To(Succeed(), "every member serves a renewed certificate")
	after, err := env.PodStates(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	r.g.Expect(after).To(Equal(before), "no member Pod was re-created or restarted")
	r.rolled(ctx, time.Minute)
	r.expectSentinelEverywhere(ctx)
}

// TestTLSCARotationUnderLoad: a CA rotation on request, under the
// linearizability workload over mutual TLS with clients that reload the
// administrators' Secret; the history is linearizable and members restart
// one at a time.
func TestTLSCARotationUnderLoad(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	r := newRollCluster(ctx, t, "tls-rotate", func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{} })
	rc, err := framework.NewReloadingClient(ctx, r.c, r.ns, v1alpha1.AdminClientSecretName(r.name), r.serverName())
	r.g.Expect(err).NotTo(HaveOccurred())
	eps, err := env.MemberEndpoints(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	svc, err := env.ClientServiceEndpoint(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	w, err := linearizability.Start(linearizability.Config{Endpoints: framework.HTTPS(append(eps, svc)), ClientsPerEndpoint: 2, TLS: rc.Config()})
	r.g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	peerBefore := r.get(ctx).Status.TLS.Peer.TrustBundle

	var mu sync.Mutex
	worst, sawBoth := 0, false
	watchCtx, stopWatch := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Samples, five a second, what the clients are given and how many
		// members are down, until the rotation is over.
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			_ = rc.Refresh(watchCtx)
			pods, err := env.MemberPods(watchCtx, r.ns, r.name)
			if err == nil {
				mu.Lock()
				worst = max(worst, 3-countReady(pods))
				sawBoth = sawBoth || rc.CAs() == 2
				mu.Unlock()
			}
			select {
			case <-watchCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	r.g.Expect(framework.Annotate(ctx, r.c, r.ns, r.name, v1alpha1.RotateCAAnnotation, time.Now().UTC().Format(time.RFC3339))).To(Succeed())
	r.g.Expect(framework.WaitFor(ctx, 15*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		cl := r.get(ctx)
		st := cl.Status.TLS
		return st != nil && st.RotatedFor != "" && st.Peer.TrustBundle != peerBefore &&
			st.Peer.Phase == v1alpha1.TLSPhaseSteady && st.Client.Phase == v1alpha1.TLSPhaseSteady, nil
	})).To(Succeed())
	r.rolled(ctx, 5*time.Minute)
	r.expectSentinelEverywhere(ctx)
	stopWatch()
	<-done
	rep, err := w.Stop().Check(linearizability.CheckOptions{VisualizationPath: filepath.Join(t.TempDir(), "history.html")})
	r.g.Expect(err).NotTo(HaveOccurred())
	t.Logf("linearizability: %s", rep)
	r.g.Expect(rep.Err()).NotTo(HaveOccurred(), "the history is linearizable")
	r.g.Expect(rep.Acknowledged).To(BeNumerically(">", 100))
	mu.Lock()
	defer mu.Unlock()
	r.g.Expect(sawBoth).To(BeTrue(), "clients were given the old and the new CA on the way")
	r.g.Expect(worst).To(BeNumerically("<=", 1), "members restarted one at a time")
	r.g.Expect(rc.CAs()).To(Equal(1), "only the new CA is left")
}

// writer writes numbered keys until stopped; each write is retried for up
// to writeBudget, the time a leader change takes here with room to spare,
// and a write that cannot complete within it is a failure.
type writer struct {
	mu       sync.Mutex
	client   *clientv3.Client
	acked    []string
	failures []string
	stop     chan struct{}
	done     chan struct{}
}

const writeBudget = 10 * time.Second

func startWriter(c *clientv3.Client, prefix string) *writer {
	w := &writer{client: c, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			key := fmt.Sprintf("%s/%06d", prefix, i)
			deadline := time.Now().Add(writeBudget)
			for {
				w.mu.Lock()
				cli := w.client
				w.mu.Unlock()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := cli.Put(ctx, key, "v")
				cancel()
				if err == nil {
					w.mu.Lock()
					w.acked = append(w.acked, key)
					w.mu.Unlock()
					break
				}
				if time.Now().After(deadline) {
					w.mu.Lock()
					w.failures = append(w.failures, fmt.Sprintf("%s: %v", key, err))
					w.mu.Unlock()
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	return w
}

// switchTo makes later writes go through c, as a client moved to TLS.
func (w *writer) switchTo(c *clientv3.Client) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.client = c
}

func (w *writer) finish() ([]string, []string) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked, w.failures
}

// TestPlainToTLSUnderAWriter: a running plaintext cluster turns to TLS with
// allowPlaintext while a writer writes through plaintext; the writer moves
// to TLS, plaintext is dropped, and no write fails beyond a leader change.
func TestPlainToTLSUnderAWriter(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	r := newRollCluster(ctx, t, "tls-switch", nil)
	// Through the client Service: members' Pod addresses change as they
	// are re-created, the Service's does not.
	svc, err := env.ClientServiceEndpoint(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	plain, err := framework.EtcdClient(svc)
	r.g.Expect(err).NotTo(HaveOccurred())
	defer plain.Close()
	w := startWriter(plain, "switch")

	r.g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{Client: v1alpha1.ClientTLS{AllowPlaintext: true}}
	})).To(Succeed())
	r.rolled(ctx, 12*time.Minute)
	admin := r.adminTLS(ctx)
	cfg, err := admin.TLSConfig(r.serverName(), true)
	r.g.Expect(err).NotTo(HaveOccurred())
	secure, err := framework.EtcdTLSClient(cfg, framework.HTTPS([]string{svc})...)
	r.g.Expect(err).NotTo(HaveOccurred())
	defer secure.Close()
	w.switchTo(secure)

	r.g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) { c.Spec.TLS.Client.AllowPlaintext = false })).To(Succeed())
	r.rolled(ctx, 8*time.Minute)
	acked, failures := w.finish()
	r.g.Expect(failures).To(BeEmpty(), "no write failed beyond a leader change")
	r.g.Expect(len(acked)).To(BeNumerically(">", 100))
	for _, key := range acked {
		got, err := secure.Get(ctx, key)
		r.g.Expect(err).NotTo(HaveOccurred())
		r.g.Expect(got.Kvs).To(HaveLen(1), "acknowledged %s is there", key)
	}
	list, err := secure.MemberList(ctx)
	r.g.Expect(err).NotTo(HaveOccurred())
	for _, m := range list.Members {
		r.g.Expect(m.PeerURLs[0]).To(HavePrefix("https://"), "%s's peers reach it over TLS", m.Name)
	}
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = plain.Get(pctx, "switch/000000")
	pcancel()
	r.g.Expect(err).To(HaveOccurred(), "plaintext is gone")
	r.expectSentinelEverywhere(ctx)
}

// TestTLSSecretSource: the user's own wildcard certificate serves every
// member on both ports.
func TestTLSSecretSource(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g := NewWithT(t)
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "tls-secret")
	ca, err := certs.NewCA("user ca", time.Now(), 48*time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	dns := append([]string{"*.tls-secret." + ns + ".svc.cluster.local", "*.tls-secret." + ns + ".svc"},
		certs.ServiceNames("tls-secret-client", ns, "cluster.local")...)
	leaf, err := certs.Issue(ca, certs.LeafRequest{CommonName: "tls-secret", DNSNames: dns, Server: true, Client: true, Lifetime: 24 * time.Hour}, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{"user-peer", "user-client"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Data: map[string][]byte{"tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM, "ca.crt": ca.CertPEM}}
		g.Expect(c.Create(ctx, s)).To(Succeed())
	}
	r := &rollCluster{t: t, g: g, c: c, ns: ns, name: "tls-secret"}
	cl := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: ns}, Spec: v1alpha1.EtcdClusterSpec{
		Replicas: ptr.To[int32](3),
		TLS: &v1alpha1.TLSSpec{
			Peer:   v1alpha1.PeerTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "user-peer"}},
			Client: v1alpha1.ClientTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "user-client"}},
		},
	}}
	g.Expect(c.Create(ctx, cl)).To(Succeed())
	r.rolled(ctx, 6*time.Minute)
	r.expectServedFrom(ctx, ca.Cert, certs.Serial(leaf.Cert))
	r.expectWorksWithRequestedCertificate(ctx)
}

// TestTLSCertManagerSource: certificates from a cert-manager CA Issuer.
func TestTLSCertManagerSource(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	g := NewWithT(t)
	g.Expect(env.EnsureCertManager(ctx, t)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "tls-cm")
	for _, obj := range certManagerCA(ns) {
		g.Expect(c.Create(ctx, obj)).To(Succeed())
	}
	caSecret := &corev1.Secret{}
	g.Expect(framework.WaitFor(ctx, 3*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "etcd-ca"}, caSecret)
		return err == nil && len(caSecret.Data["tls.crt"]) > 0, err
	})).To(Succeed(), "cert-manager issued the CA")
	caCerts, err := certs.ParseCertificates(caSecret.Data["tls.crt"])
	g.Expect(err).NotTo(HaveOccurred())
	issuer := &v1alpha1.IssuerReference{Name: "etcd-ca", Kind: "Issuer"}
	r := &rollCluster{t: t, g: g, c: c, ns: ns, name: "tls-cm"}
	cl := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: ns}, Spec: v1alpha1.EtcdClusterSpec{
		Replicas: ptr.To[int32](3),
		TLS: &v1alpha1.TLSSpec{
			Peer:   v1alpha1.PeerTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceCertManager, IssuerRef: issuer}},
			Client: v1alpha1.ClientTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceCertManager, IssuerRef: issuer}},
		},
	}}
	g.Expect(c.Create(ctx, cl)).To(Succeed())
	r.rolled(ctx, 8*time.Minute)
	r.expectServedFrom(ctx, caCerts[0], "")
	r.expectWorksWithRequestedCertificate(ctx)
}

// expectServedFrom: every member serves, on both ports, a certificate of
// ca (with the given serial, when not empty).
func (r *rollCluster) expectServedFrom(ctx context.Context, ca *x509.Certificate, serial string) {
	for _, port := range []int{v1alpha1.ClientPort, v1alpha1.PeerPort} {
		addrs, err := env.MemberAddresses(ctx, r.ns, r.name, port)
		r.g.Expect(err).NotTo(HaveOccurred())
		r.g.Expect(addrs).To(HaveLen(3))
		for _, a := range addrs {
			served, err := framework.ServedCertificate(ctx, a)
			r.g.Expect(err).NotTo(HaveOccurred())
			r.g.Expect(certs.IssuedBy(served, ca)).To(BeTrue(), "%s serves a certificate of the source's CA", a)
			if serial != "" {
				r.g.Expect(certs.Serial(served)).To(Equal(serial))
			}
		}
	}
}

// expectWorksWithRequestedCertificate asks the operator for a client
// certificate as kubectl etcd does, and writes and reads with it.
func (r *rollCluster) expectWorksWithRequestedCertificate(ctx context.Context) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: r.name + "-kubectl-etcd", Namespace: r.ns,
		Labels:      v1alpha1.ClusterLabels(r.name),
		Annotations: map[string]string{v1alpha1.IssueClientCertificateAnnotation: "root"}}}
	r.g.Expect(r.c.Create(ctx, s)).To(Succeed())
	m, err := framework.ReadClientSecret(ctx, r.c, r.ns, s.Name)
	r.g.Expect(err).NotTo(HaveOccurred())
	cfg, err := m.TLSConfig(r.serverName(), true)
	r.g.Expect(err).NotTo(HaveOccurred())
	svc, err := env.ClientServiceEndpoint(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	cli, err := framework.EtcdTLSClient(cfg, framework.HTTPS([]string{svc})...)
	r.g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	_, err = cli.Put(ctx, "source", "works")
	r.g.Expect(err).NotTo(HaveOccurred())
}

// TestAuth: root with the right password works, a wrong one is refused,
// an anonymous client is refused, and the operator keeps managing the
// cluster (it replaces a member) without its password showing anywhere.
func TestAuth(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	g := NewWithT(t)
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "auth")
	const password = "e2e-root-password-7f3a"
	g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: ns},
		Data: map[string][]byte{"password": []byte(password)}})).To(Succeed())
	r := &rollCluster{t: t, g: g, c: c, ns: ns, name: "auth"}
	g.Expect(c.Create(ctx, &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: ns}, Spec: v1alpha1.EtcdClusterSpec{
		Replicas: ptr.To[int32](3),
		TLS:      &v1alpha1.TLSSpec{Client: v1alpha1.ClientTLS{Mutual: ptr.To(false)}},
		Auth:     &v1alpha1.AuthSpec{Enabled: true, RootSecretName: "root"},
	}})).To(Succeed())
	r.rolled(ctx, 6*time.Minute)
	admin := r.adminTLS(ctx)
	cfg, err := admin.TLSConfig(r.serverName(), false)
	g.Expect(err).NotTo(HaveOccurred())
	svc, err := env.ClientServiceEndpoint(ctx, ns, r.name)
	g.Expect(err).NotTo(HaveOccurred())
	endpoint := framework.HTTPS([]string{svc})[0]
	dial := func(user, pw string) (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, TLS: cfg, Username: user, Password: pw, Logger: zap.NewNop()})
	}
	root, err := dial("root", password)
	g.Expect(err).NotTo(HaveOccurred(), "root with the right password")
	defer root.Close()
	_, err = root.Put(ctx, "auth", "ok")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = dial("root", "wrong")
	g.Expect(etcd.IsAuthFailed(err)).To(BeTrue(), "a wrong password is refused: %v", err)
	anon, err := dial("", "")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = anon.Put(ctx, "auth", "anon")
	anon.Close()
	g.Expect(err).To(HaveOccurred(), "a client without credentials is refused")

	var members v1alpha1.EtcdMemberList
	g.Expect(c.List(ctx, &members, client.InNamespace(ns))).To(Succeed())
	g.Expect(c.Delete(ctx, &members.Items[0])).To(Succeed())
	g.Expect(framework.WaitFor(ctx, 6*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		cl, err := framework.WaitForClusterReady(ctx, c, ns, r.name, 5*time.Second)
		if err != nil {
			return false, nil
		}
		for _, m := range cl.Status.Members {
			if m.Name == members.Items[0].Name {
				return false, nil
			}
		}
		return true, nil
	})).To(Succeed(), "the operator replaced the member with auth on")
	logs := env.Kubectl(ctx, "logs", "-n", framework.OperatorNamespace(), "-l", framework.OperatorSelector, "--tail=-1")
	g.Expect(logs.Stdout).NotTo(ContainSubstring(password), "the password is not in the operator's log")
	events := env.Kubectl(ctx, "get", "events", "-n", ns, "-o", "yaml")
	g.Expect(events.Stdout).NotTo(ContainSubstring(password))
	status := env.Kubectl(ctx, "get", "etcdcluster", "-n", ns, r.name, "-o", "yaml")
	g.Expect(status.Stdout).NotTo(ContainSubstring(password))
	g.Expect(strings.Contains(status.Stdout, "AuthFailed")).To(BeFalse())
}
