package tlsproc

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quorumctl/etcd-operator/internal/certs"
)

// Files are one member's TLS files, laid out as the operator's Pods have them.
type Files struct {
	Dir string
}

func (f Files) path(name string) string { return filepath.Join(f.Dir, name) }

// PeerFlags and ClientFlags are the flags the operator renders, pointing at
// these files.
func (f Files) PeerFlags() []string {
	return []string{
		"--peer-cert-file=" + f.path("peer.crt"), "--peer-key-file=" + f.path("peer.key"),
		"--peer-trusted-ca-file=" + f.path("peer-ca.crt"), "--peer-client-cert-auth=true",
	}
}

func (f Files) ClientFlags(mutual bool) []string {
	return []string{
		"--cert-file=" + f.path("client.crt"), "--key-file=" + f.path("client.key"),
		"--trusted-ca-file=" + f.path("client-ca.crt"), fmt.Sprintf("--client-cert-auth=%t", mutual),
	}
}

// write replaces a file the way the kubelet updates a Secret volume: the new
// content appears at once and whole.
func write(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// Issue writes a member certificate from ca for the section ("peer" or
// "client") and returns it.
func (f Files) Issue(t testing.TB, section string, ca *certs.KeyPair, lifetime time.Duration) *x509.Certificate {
	t.Helper()
	dns, ips := certs.MemberNames("m", "c", "c-client", "ns", "cluster.local")
	leaf, err := certs.Issue(ca, certs.LeafRequest{CommonName: "member", DNSNames: dns, IPs: ips, Server: true, Client: true, Lifetime: lifetime}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	write(t, f.path(section+".key"), leaf.KeyPEM)
	write(t, f.path(section+".crt"), leaf.CertPEM)
	return leaf.Cert
}

// Trust writes the section's trust bundle.
func (f Files) Trust(t testing.TB, section string, cas ...*certs.KeyPair) {
	t.Helper()
	var list []*x509.Certificate
	for _, ca := range cas {
		list = append(list, ca.Cert)
	}
	write(t, f.path(section+"-ca.crt"), certs.NewBundle(list).PEM())
}

// NewFiles makes a member's TLS directory.
func NewFiles(t testing.TB, dir string) Files {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return Files{Dir: dir}
}

// MustCA makes a CA.
func MustCA(t testing.TB, name string) *certs.KeyPair {
	t.Helper()
	ca, err := certs.NewCA(name, time.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// ClientCert is a client certificate for common name cn from ca.
func ClientCert(t testing.TB, ca *certs.KeyPair, cn string) tls.Certificate {
	t.Helper()
	leaf, err := certs.Issue(ca, certs.LeafRequest{CommonName: cn, Client: true, Lifetime: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// ClientConfig trusts cas and presents cert, if any.
func ClientConfig(cas []*certs.KeyPair, cert *tls.Certificate) *tls.Config {
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca.Cert)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg
}
