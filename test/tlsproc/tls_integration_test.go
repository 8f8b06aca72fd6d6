//go:build integration

package tlsproc_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/certs/certstest"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/test/etcdproc"
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
	c := &tlsCluster{files: map[string]tlsproc.Files{}, peerCA: certstest.CA(t, "peer-ca"), clientCA: certstest.CA(t, "client-ca")}
	c.operator = certstest.ClientCert(t, c.clientCA, "root")
	dir := t.TempDir()
	c.members = etcdproc.StartCluster(t, etcdproc.Binary(t, ""), etcdproc.Options{
		Members: 3, ClientScheme: "https", PeerScheme: "https",
		ClientTLS: certstest.ClientConfig([]*certs.KeyPair{c.clientCA}, &c.operator),
		MemberArgs: func(m *etcdproc.Member) []string {
			f := tlsproc.NewFiles(t, filepath.Join(dir, m.Name))
			f.Issue(t, "peer", c.peerCA, time.Hour)
			f.Issue(t, "client", c.clientCA, time.Hour)
			f.Trust(t, "peer", c.peerCA)
			f.Trust(t, "client", c.clientCA)
			c.files[m.Name] = f
			return f.Flags(t, mutual)
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
	cli, err := c.dial(t, etcd.WithClientTLS(certstest.ClientConfig([]*certs.KeyPair{c.clientCA}, &c.operator)))
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
	g.Expect(rawGet(ep, certstest.ClientConfig([]*certs.KeyPair{c.clientCA}, &c.operator))).To(Succeed())
	g.Expect(rawGet(strings.Replace(ep, "https://", "http://", 1), nil)).NotTo(Succeed(), "plaintext fails")
	g.Expect(rawGet(ep, certstest.ClientConfig([]*certs.KeyPair{c.clientCA}, nil))).NotTo(Succeed(), "no client certificate is refused")
	stranger := certstest.ClientCert(t, certstest.CA(t, "stranger"), "root")
	g.Expect(rawGet(ep, certstest.ClientConfig([]*certs.KeyPair{c.clientCA}, &stranger))).NotTo(Succeed(), "a certificate from another CA is refused")
	g.Expect(rawGet(ep, certstest.ClientConfig([]*certs.KeyPair{c.peerCA}, &c.operator))).NotTo(Succeed(), "the server is verified against the client CA")
}

// TestServerTLSWithoutMutual: with mutual off the members serve TLS and
// ask for no client certificate, so a client with the CA alone is served.
// (The reverted first version gave members --trusted-ca-file here, with
// which etcd demands a certificate whatever --client-cert-auth says.)
func TestServerTLSWithoutMutual(t *testing.T) {
	g := NewWithT(t)
	c := startTLSCluster(t, false)
	ep := c.members[0].ClientURL
	g.Expect(rawGet(ep, certstest.ClientConfig([]*certs.KeyPair{c.clientCA}, nil))).To(Succeed(), "no client certificate needed")
	g.Expect(rawGet(ep, certstest.ClientConfig([]*certs.KeyPair{c.clientCA}, &c.operator))).To(Succeed(), "one is ignored")
	g.Expect(rawGet(strings.Replace(ep, "https://", "http://", 1), nil)).NotTo(Succeed(), "plaintext fails")
	cli, err := c.dial(t, etcd.WithClientTLS(certstest.ClientConfig([]*certs.KeyPair{c.clientCA}, nil)))
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	list, err := cli.MemberList(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range list.Members {
		g.Expect(m.PeerURLs[0]).To(HavePrefix("https://"), "peers still authenticate each other")
	}
}

// TestLeafRenewalWithoutRestart: a member serves a renewed certificate on
// its next handshake, on the client and on the peer port, with the same
// process and its peers still talking to it.
func TestLeafRenewalWithoutRestart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := startTLSCluster(t, true)
	cli, err := c.dial(t, etcd.WithClientTLS(certstest.ClientConfig([]*certs.KeyPair{c.clientCA}, &c.operator)))
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	m := c.members[0]
	pid := m.PID()
	before, err := tlsproc.ServedCertificate(t, m.ClientURL)
	g.Expect(err).NotTo(HaveOccurred())
	beforePeer, err := tlsproc.ServedCertificate(t, m.PeerURL)
	g.Expect(err).NotTo(HaveOccurred())

	renewed := c.files[m.Name].Issue(t, "client", c.clientCA, time.Hour)
	renewedPeer := c.files[m.Name].Issue(t, "peer", c.peerCA, time.Hour)
	g.Expect(serial(renewed)).NotTo(Equal(serial(before)))
	g.Eventually(func() (string, error) {
		got, err := tlsproc.ServedCertificate(t, m.ClientURL)
		if err != nil {
			return "", err
		}
		return serial(got), nil
	}, 10*time.Second, 100*time.Millisecond).Should(Equal(serial(renewed)), "the client port serves the new certificate")
	g.Eventually(func() (string, error) {
		got, err := tlsproc.ServedCertificate(t, m.PeerURL)
		if err != nil {
			return "", err
		}
		return serial(got), nil
	}, 10*time.Second, 100*time.Millisecond).Should(Equal(serial(renewedPeer)), "the peer port serves the new certificate")
	g.Expect(serial(beforePeer)).NotTo(Equal(serial(renewedPeer)))
	g.Expect(m.PID()).To(Equal(pid), "the member was not restarted")
	g.Expect(m.Exited()).To(BeFalse())
	for _, o := range c.members {
		g.Expect(cli.Health(ctx, o.ClientURL)).To(Succeed(), "%s is healthy", o.Name)
	}
}

func serial(c *x509.Certificate) string { return c.SerialNumber.Text(16) }
