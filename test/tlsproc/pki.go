package tlsproc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
)

// Files are one member's TLS files, laid out as the operator's Pods mount
// them (certs/, peer-trust/, client-trust/ under one directory).
type Files struct {
	Dir string
}

// podTLSDir is where the operator's Pods mount a member's TLS material;
// Flags moves it to Dir.
const podTLSDir = "/etc/etcd/tls"

func (f Files) path(name string) string { return filepath.Join(f.Dir, name) }

// Flags are the TLS flags the operator renders for a member with TLS
// (internal/component/pod, from the member's spec), pointing at these files
// instead of the Pod's mounts: the flags under test are the product's own.
func (f Files) Flags(t testing.TB, mutual bool) []string {
	t.Helper()
	const host = "m.c.ns.svc.cluster.local"
	m := &v1alpha1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns"},
		Spec: v1alpha1.EtcdMemberSpec{ClusterName: "c", PeerURL: "https://" + host + ":2380", ClientURL: "https://" + host + ":2379",
			TLS: &v1alpha1.MemberTLS{
				Peer:   &v1alpha1.MemberTLSEndpoint{TrustBundle: "c-peer-trust"},
				Client: &v1alpha1.MemberTLSEndpoint{TrustBundle: "c-client-trust", ClientCertAuth: mutual},
			}},
	}
	var out []string
	for _, a := range pod.Args(pod.Params{Member: m, ClusterDomain: "cluster.local"}) {
		if strings.Contains(a, podTLSDir+"/") || strings.Contains(a, "cert-auth") {
			out = append(out, strings.Replace(a, podTLSDir, f.Dir, 1))
		}
	}
	if len(out) == 0 {
		t.Fatal("the operator rendered no TLS flags")
	}
	return out
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
	return f.IssueFor(t, section, ca, lifetime, dns, ips)
}

// IssueFor is Issue for a certificate that lists exactly dns and ips, as
// a user's own certificate may (often DNS names only).
func (f Files) IssueFor(t testing.TB, section string, ca *certs.KeyPair, lifetime time.Duration, dns []string, ips []net.IP) *x509.Certificate {
	t.Helper()
	leaf, err := certs.Issue(ca, certs.LeafRequest{CommonName: "member", DNSNames: dns, IPs: ips, Server: true, Client: true, Lifetime: lifetime}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	write(t, f.path(filepath.Join("certs", section+".key")), leaf.KeyPEM)
	write(t, f.path(filepath.Join("certs", section+".crt")), leaf.CertPEM)
	return leaf.Cert
}

// Trust writes the section's trust bundle.
func (f Files) Trust(t testing.TB, section string, cas ...*certs.KeyPair) {
	t.Helper()
	var list []*x509.Certificate
	for _, ca := range cas {
		list = append(list, ca.Cert)
	}
	write(t, f.path(filepath.Join(section+"-trust", "ca.crt")), certs.NewBundle(list).PEM())
}

// NewFiles makes a member's TLS directory.
func NewFiles(t testing.TB, dir string) Files {
	t.Helper()
	for _, sub := range []string{"certs", "peer-trust", "client-trust"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return Files{Dir: dir}
}

// VerifyingName is cfg checking the server's certificate against name
// instead of the host dialled. clientv3 verifies against the endpoint's
// host whatever tls.Config.ServerName says, so a harness that must reach a
// member by 127.0.0.1 whose certificate lists only a DNS name (its
// readiness check) verifies the chain and the name itself.
func VerifyingName(cfg *tls.Config, name string) *tls.Config {
	out := cfg.Clone()
	roots := cfg.RootCAs
	out.InsecureSkipVerify = true //nolint:gosec // VerifyConnection below checks the chain and the name
	out.VerifyConnection = func(cs tls.ConnectionState) error {
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: name, Roots: roots, Intermediates: inter})
		return err
	}
	return out
}

// ServedCertificate is the certificate a TLS endpoint (an https URL)
// presents in a handshake, read without judging it.
func ServedCertificate(t testing.TB, endpoint string) (*x509.Certificate, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return certs.ServedCertificate(ctx, endpoint)
}
