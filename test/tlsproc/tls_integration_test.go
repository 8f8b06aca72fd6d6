//go:build integration

package tlsproc_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/test/etcdproc"
	"github.com/quorumctl/etcd-operator/test/linearizability"
	"github.com/quorumctl/etcd-operator/test/tlsproc"
)

// tlsCluster is three members with operator-style certificates.
type tlsCluster struct {
	members          []*etcdproc.Member
	files            map[string]tlsproc.Files
	peerCA, clientCA *certs.KeyPair
	operator         tls.Certificate
}

func startTLSCluster(t *testing.T, mutual bool) *tlsCluster {
	t.Helper()
	c := &tlsCluster{files: map[string]tlsproc.Files{}, peerCA: tlsproc.MustCA(t, "peer-ca"), clientCA: tlsproc.MustCA(t, "client-ca")}
	c.operator = tlsproc.ClientCert(t, c.clientCA, etcd.RootUser)
	dir := t.TempDir()
	c.members = etcdproc.StartCluster(t, etcdproc.Binary(t, ""), etcdproc.Options{
		Members: 3, ClientScheme: "https", PeerScheme: "https",
		ClientTLS: tlsproc.ClientConfig([]*certs.KeyPair{c.clientCA}, &c.operator),
		MemberArgs: func(m *etcdproc.Member) []string {
			f := tlsproc.NewFiles(t, filepath.Join(dir, m.Name))
			f.Issue(t, "peer", c.peerCA, time.Hour)
			f.Issue(t, "client", c.clientCA, time.Hour)
			f.Trust(t, "peer", c.peerCA)
			f.Trust(t, "client", c.clientCA)
			c.files[m.Name] = f
			return append(f.PeerFlags(), f.ClientFlags(mutual)...)
		},
	})
	return c
}

func (c *tlsCluster) dial(t *testing.T, opts ...etcd.DialOption) (etcd.Client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return etcd.NewDialer(etcd.WithCallTimeout(5*time.Second)).Dial(ctx, etcdproc.ClientURLs(c.members), opts...)
}

// rawGet is one linearizable read with plain clientv3.
func rawGet(endpoint string, cfg *tls.Config) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, TLS: cfg, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = cli.Get(ctx, "probe")
	return err
}

// TestMutualTLS: the operator's certificates make a working cluster with
// TLS between peers; a client with the client CA and a certificate works,
// plaintext fails, and a client without a certificate is refused.
func TestMutualTLS(t *testing.T) {
	g := NewWithT(t)
	c := startTLSCluster(t, true)
	cli, err := c.dial(t, etcd.WithClientTLS(tlsproc.ClientConfig([]*certs.KeyPair{c.clientCA}, &c.operator)))
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	list, err := cli.MemberList(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Members).To(HaveLen(3))
	for _, m := range list.Members {
		g.Expect(m.PeerURLs[0]).To(HavePrefix("https://"), "peer traffic is TLS")
		g.Expect(m.ClientURLs[0]).To(HavePrefix("https://"))
	}
	ep := c.members[0].ClientURL
	g.Expect(rawGet(ep, tlsproc.ClientConfig([]*certs.KeyPair{c.clientCA}, &c.operator))).To(Succeed())
	g.Expect(rawGet(strings.Replace(ep, "https://", "http://", 1), nil)).NotTo(Succeed(), "plaintext fails")
	g.Expect(rawGet(ep, tlsproc.ClientConfig([]*certs.KeyPair{c.clientCA}, nil))).NotTo(Succeed(), "no client certificate is refused")
	stranger := tlsproc.ClientCert(t, tlsproc.MustCA(t, "stranger"), "root")
	g.Expect(rawGet(ep, tlsproc.ClientConfig([]*certs.KeyPair{c.clientCA}, &stranger))).NotTo(Succeed(), "a certificate from another CA is refused")
	g.Expect(rawGet(ep, tlsproc.ClientConfig([]*certs.KeyPair{c.peerCA}, &c.operator))).NotTo(Succeed(), "the server is verified against the client CA")
}

// TestAuth: internal/etcd turns auth on; root's password works and a wrong
// one is refused with an error IsAuthFailed recognises; with mutual TLS a
// certificate whose common name is root is root without a password, and
// one for a user etcd does not know is refused.
func TestAuth(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := startTLSCluster(t, true)
	asRoot := tlsproc.ClientConfig([]*certs.KeyPair{c.clientCA}, &c.operator)
	nobodyCert := tlsproc.ClientCert(t, c.clientCA, "nobody")
	asNobody := tlsproc.ClientConfig([]*certs.KeyPair{c.clientCA}, &nobodyCert)

	cli, err := c.dial(t, etcd.WithClientTLS(asRoot))
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	g.Expect(cli.AuthEnabled(ctx)).To(BeFalse())
	g.Expect(cli.EnableAuth(ctx, "first")).To(Succeed())
	g.Expect(cli.AuthEnabled(ctx)).To(BeTrue())
	g.Expect(cli.EnableAuth(ctx, "second")).To(Succeed(), "enabling again only sets the password")

	_, err = cli.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "a certificate named root is root")
	g.Expect(cli.CheckPassword(ctx, etcd.RootUser, "second")).To(Succeed())
	g.Expect(etcd.IsAuthFailed(cli.CheckPassword(ctx, etcd.RootUser, "first"))).To(BeTrue(), "the old password is refused")

	_, err = c.dial(t, etcd.WithClientTLS(asNobody), etcd.WithPassword(etcd.RootUser, "wrong"))
	g.Expect(err).To(HaveOccurred())
	g.Expect(etcd.IsAuthFailed(err)).To(BeTrue(), "a wrong password: %v", err)

	pw, err := c.dial(t, etcd.WithClientTLS(asNobody), etcd.WithPassword(etcd.RootUser, "second"))
	g.Expect(err).NotTo(HaveOccurred())
	defer pw.Close()
	_, err = pw.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "the right password works whatever the certificate")

	anon, err := c.dial(t, etcd.WithClientTLS(asNobody))
	g.Expect(err).NotTo(HaveOccurred())
	defer anon.Close()
	_, err = anon.MemberUpdate(ctx, 1, []string{"https://127.0.0.1:1"})
	g.Expect(err).To(HaveOccurred())
	g.Expect(etcd.IsAuthFailed(err) || etcd.IsAuthRequired(err)).To(BeTrue(), "an unknown user is refused: %v", err)

	g.Expect(cli.DisableAuth(ctx)).To(Succeed())
	g.Expect(cli.AuthEnabled(ctx)).To(BeFalse())
}

// TestLeafRenewalWithoutRestart: a member serves a renewed certificate on
// its next handshake, on the client and on the peer port, with the same
// process and its peers still talking to it.
func TestLeafRenewalWithoutRestart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := startTLSCluster(t, true)
	cli, err := c.dial(t, etcd.WithClientTLS(tlsproc.ClientConfig([]*certs.KeyPair{c.clientCA}, &c.operator)))
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	m := c.members[0]
	pid := m.PID()
	before, err := cli.ServedCertificate(ctx, m.ClientURL)
	g.Expect(err).NotTo(HaveOccurred())
	beforePeer, err := cli.ServedCertificate(ctx, m.PeerURL)
	g.Expect(err).NotTo(HaveOccurred())

	renewed := c.files[m.Name].Issue(t, "client", c.clientCA, time.Hour)
	renewedPeer := c.files[m.Name].Issue(t, "peer", c.peerCA, time.Hour)
	g.Expect(certs.Serial(renewed)).NotTo(Equal(certs.Serial(before)))
	g.Eventually(func() (string, error) {
		got, err := cli.ServedCertificate(ctx, m.ClientURL)
		if err != nil {
			return "", err
		}
		return certs.Serial(got), nil
	}, 10*time.Second, 100*time.Millisecond).Should(Equal(certs.Serial(renewed)), "the client port serves the new certificate")
	g.Eventually(func() (string, error) {
		got, err := cli.ServedCertificate(ctx, m.PeerURL)
		if err != nil {
			return "", err
		}
		return certs.Serial(got), nil
	}, 10*time.Second, 100*time.Millisecond).Should(Equal(certs.Serial(renewedPeer)), "the peer port serves the new certificate")
	g.Expect(certs.Serial(beforePeer)).NotTo(Equal(certs.Serial(renewedPeer)))
	g.Expect(m.PID()).To(Equal(pid), "the member was not restarted")
	g.Expect(m.Exited()).To(BeFalse())
	for _, o := range c.members {
		g.Expect(cli.Health(ctx, o.ClientURL)).To(Succeed(), "%s is healthy", o.Name)
	}
}

// TestCARotationUnderLoad runs the three passes the operator runs, restarting
// one member at a time as its rollout does, under the linearizability
// workload over mutual TLS: 1) every member trusts old and new, 2) the
// certificates switch to the new CA without a restart, 3) the old CA is
// dropped. Clients, like the operator, trust both CAs from pass 1 on and
// re-read their own certificate at each handshake.
func TestCARotationUnderLoad(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := startTLSCluster(t, true)
	newPeer, newClient := tlsproc.MustCA(t, "peer-ca-2"), tlsproc.MustCA(t, "client-ca-2")
	current := c.operator
	clientCfg := tlsproc.ClientConfig([]*certs.KeyPair{c.clientCA, newClient}, nil)
	clientCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &current, nil }

	w, err := linearizability.Start(linearizability.Config{
		Endpoints: etcdproc.ClientURLs(c.members), ClientsPerEndpoint: 2, TLS: clientCfg, Interval: 10 * time.Millisecond,
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	h := w.History()
	progress := func(what string) {
		t.Helper()
		since := h.Now()
		g.Eventually(func() bool {
			for _, op := range h.Ops() {
				if op.Call >= since && op.Input.Kind == linearizability.KindPut && !op.Output.Unknown {
					return true
				}
			}
			return false
		}, 30*time.Second, 50*time.Millisecond).Should(BeTrue(), "writes are acknowledged %s", what)
	}
	progress("before the rotation")

	roll := func(pass string, peer, client []*certs.KeyPair) {
		for _, m := range c.members {
			m.Stop()
			c.files[m.Name].Trust(t, "peer", peer...)
			c.files[m.Name].Trust(t, "client", client...)
			g.Expect(m.RestartWithFlags(m.Args(), "", clientCfg)).To(Succeed())
			g.Expect(m.WaitReady(time.Minute)).To(Succeed(), m.LogTail(30))
			progress(pass + " after restarting " + m.Name)
		}
	}
	roll("pass 1", []*certs.KeyPair{c.peerCA, newPeer}, []*certs.KeyPair{c.clientCA, newClient})

	current = tlsproc.ClientCert(t, newClient, etcd.RootUser)
	op, err := c.dial(t, etcd.WithClientTLS(clientCfg))
	g.Expect(err).NotTo(HaveOccurred())
	defer op.Close()
	for _, m := range c.members {
		c.files[m.Name].Issue(t, "peer", newPeer, time.Hour)
		c.files[m.Name].Issue(t, "client", newClient, time.Hour)
	}
	for _, m := range c.members {
		for _, ep := range []string{m.ClientURL, m.PeerURL} {
			g.Eventually(func() (bool, error) {
				got, err := op.ServedCertificate(ctx, ep)
				if err != nil {
					return false, err
				}
				return certs.IssuedBy(got, newPeer.Cert) || certs.IssuedBy(got, newClient.Cert), nil
			}, 10*time.Second, 100*time.Millisecond).Should(BeTrue(), "%s serves a certificate of the new CA", ep)
		}
	}
	progress("after the certificates switched")
	roll("pass 3", []*certs.KeyPair{newPeer}, []*certs.KeyPair{newClient})

	report, err := w.Stop().Check(linearizability.CheckOptions{VisualizationPath: filepath.Join(t.ArtifactDir(), "ca-rotation.html")})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("report: %s", report)
	g.Expect(report.Err()).NotTo(HaveOccurred(), "the history is linearizable")
	g.Expect(report.Acknowledged).To(BeNumerically(">", 100))

	oldOnly := tlsproc.ClientConfig([]*certs.KeyPair{c.clientCA}, &current)
	g.Expect(rawGet(c.members[0].ClientURL, oldOnly)).NotTo(Succeed(), "the old CA no longer verifies the members")
	oldCert := c.operator
	g.Expect(rawGet(c.members[0].ClientURL, tlsproc.ClientConfig([]*certs.KeyPair{newClient}, &oldCert))).NotTo(Succeed(), "the members no longer accept the old CA's client certificates")
	g.Expect(rawGet(c.members[0].ClientURL, tlsproc.ClientConfig([]*certs.KeyPair{newClient}, &current))).To(Succeed())
}

// TestPlainToTLS turns a running plaintext cluster to TLS the way the
// operator does, one member at a time: pass 1 gives each member TLS on its
// client port beside plaintext (one port serves both) and peer TLS on the
// transition port beside its plaintext peer URL; pass 2 moves each member's
// peer URL there with MemberUpdate and restarts it without plaintext. A
// plaintext workload runs through pass 1 and a TLS one through pass 2; both
// histories are linearizable.
func TestPlainToTLS(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	members := etcdproc.StartCluster(t, etcdproc.Binary(t, ""), etcdproc.Options{Members: 3})
	peerCA, clientCA := tlsproc.MustCA(t, "peer-ca"), tlsproc.MustCA(t, "client-ca")
	operator := tlsproc.ClientCert(t, clientCA, etcd.RootUser)
	tlsCfg := tlsproc.ClientConfig([]*certs.KeyPair{clientCA}, &operator)
	dir := t.TempDir()
	plainURLs := etcdproc.ClientURLs(members)
	transition := etcdproc.FreePorts(t, len(members))

	plain, err := linearizability.Start(linearizability.Config{Endpoints: plainURLs, ClientsPerEndpoint: 2, Interval: 10 * time.Millisecond})
	g.Expect(err).NotTo(HaveOccurred())
	defer plain.Stop()
	// flagsFor rewrites a member's listeners and adds its certificates.
	flagsFor := func(m *etcdproc.Member, i int, dual bool) []string {
		f := tlsproc.NewFiles(t, filepath.Join(dir, m.Name))
		var out []string
		for _, a := range m.Args() {
			if strings.HasPrefix(a, "--listen-client-urls=") || strings.HasPrefix(a, "--listen-peer-urls=") ||
				strings.HasPrefix(a, "--advertise-client-urls=") || strings.HasPrefix(a, "--peer-") ||
				strings.HasPrefix(a, "--cert-file") || strings.HasPrefix(a, "--key-file") ||
				strings.HasPrefix(a, "--trusted-ca-file") || strings.HasPrefix(a, "--client-cert-auth") {
				continue
			}
			out = append(out, a)
		}
		host := strings.TrimPrefix(plainURLs[i], "http://")
		tlsPeer := fmt.Sprintf("https://127.0.0.1:%d", transition[i])
		if dual {
			out = append(out, "--listen-client-urls=https://"+host+",http://"+host,
				"--listen-peer-urls="+m.PeerURL+","+tlsPeer)
		} else {
			out = append(out, "--listen-client-urls=https://"+host, "--listen-peer-urls="+tlsPeer)
		}
		out = append(out, "--advertise-client-urls=https://"+host)
		return append(append(out, f.PeerFlags()...), f.ClientFlags(true)...)
	}
	for i, m := range members {
		f := tlsproc.NewFiles(t, filepath.Join(dir, m.Name))
		f.Issue(t, "peer", peerCA, time.Hour)
		f.Issue(t, "client", clientCA, time.Hour)
		f.Trust(t, "peer", peerCA)
		f.Trust(t, "client", clientCA)
		m.Stop()
		g.Expect(m.RestartWithFlags(flagsFor(m, i, true), "", nil)).To(Succeed())
		g.Expect(m.WaitReady(time.Minute)).To(Succeed(), m.LogTail(30))
	}
	for i := range members {
		https := strings.Replace(plainURLs[i], "http://", "https://", 1)
		g.Expect(rawGet(plainURLs[i], nil)).To(Succeed(), "plaintext on the client port while both are served")
		g.Expect(rawGet(https, tlsCfg)).To(Succeed(), "TLS on the same port")
	}
	rep, err := plain.Stop().Check(linearizability.CheckOptions{VisualizationPath: filepath.Join(t.ArtifactDir(), "plain.html")})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("plaintext clients through pass 1: %s", rep)
	g.Expect(rep.Err()).NotTo(HaveOccurred())
	g.Expect(rep.Acknowledged).To(BeNumerically(">", 100))

	var httpsURLs []string
	for _, u := range plainURLs {
		httpsURLs = append(httpsURLs, strings.Replace(u, "http://", "https://", 1))
	}
	secure, err := linearizability.Start(linearizability.Config{Endpoints: httpsURLs, ClientsPerEndpoint: 2, TLS: tlsCfg, Interval: 10 * time.Millisecond})
	g.Expect(err).NotTo(HaveOccurred())
	defer secure.Stop()
	op, err := etcd.NewDialer().Dial(ctx, httpsURLs, etcd.WithClientTLS(tlsCfg))
	g.Expect(err).NotTo(HaveOccurred())
	defer op.Close()
	for i, m := range members {
		list, err := op.MemberList(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		var id uint64
		for _, em := range list.Members {
			if em.Name == m.Name {
				id = em.ID
			}
		}
		_, err = op.MemberUpdate(ctx, id, []string{fmt.Sprintf("https://127.0.0.1:%d", transition[i])})
		g.Expect(err).NotTo(HaveOccurred())
		m.Stop()
		g.Expect(m.RestartWithFlags(flagsFor(m, i, false), httpsURLs[i], tlsCfg)).To(Succeed())
		g.Expect(m.WaitReady(time.Minute)).To(Succeed(), m.LogTail(30))
	}
	list, err := op.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	for _, em := range list.Members {
		g.Expect(em.PeerURLs).To(HaveLen(1))
		g.Expect(em.PeerURLs[0]).To(HavePrefix("https://"), "%s's peers reach it over TLS", em.Name)
	}
	g.Expect(rawGet(plainURLs[0], nil)).NotTo(Succeed(), "plaintext is gone")
	for _, ep := range httpsURLs {
		g.Expect(op.Health(ctx, ep)).To(Succeed())
	}
	rep, err = secure.Stop().Check(linearizability.CheckOptions{VisualizationPath: filepath.Join(t.ArtifactDir(), "tls.html")})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("TLS clients through pass 2: %s", rep)
	g.Expect(rep.Err()).NotTo(HaveOccurred())
	g.Expect(rep.Acknowledged).To(BeNumerically(">", 100))
}
