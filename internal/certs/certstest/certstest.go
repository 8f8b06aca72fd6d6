// Package certstest is the test PKI that tests of TLS share: CAs and client
// certificates made by internal/certs, the client TLS configuration that
// uses them, and a client certificate laid out as a Pod mounts its Secret.
// Tests that need the product's certificates use the product's own code to
// make them, here, rather than each test its own.
//
// The package is test infrastructure: nothing in the product imports it.
package certstest

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/quorumctl/etcd-operator/internal/certs"
)

// lifetime outlasts any test; a CA outlives the leaves it signs, which
// certs.Issue would otherwise cut short.
const (
	caLifetime   = 24 * time.Hour
	leafLifetime = time.Hour
)

// CA is a new CA named name, valid from now.
func CA(t testing.TB, name string) *certs.KeyPair {
	t.Helper()
	ca, err := certs.NewCA(name, time.Now(), caLifetime)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// ClientLeaf is a client certificate for common name cn from ca.
func ClientLeaf(t testing.TB, ca *certs.KeyPair, cn string) *certs.KeyPair {
	t.Helper()
	leaf, err := certs.Issue(ca, certs.LeafRequest{CommonName: cn, Client: true, Lifetime: leafLifetime}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// ClientCert is ClientLeaf as a tls.Certificate to present.
func ClientCert(t testing.TB, ca *certs.KeyPair, cn string) tls.Certificate {
	t.Helper()
	leaf := ClientLeaf(t, ca, cn)
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

// SecretDir is a directory holding a client certificate for cn from ca as
// a Pod has a kubernetes.io/tls Secret with its CA mounted (tls.crt,
// tls.key, ca.crt), as the snapshot Job mounts the operator's.
func SecretDir(t testing.TB, ca *certs.KeyPair, cn string) string {
	t.Helper()
	leaf := ClientLeaf(t, ca, cn)
	dir := t.TempDir()
	files := map[string][]byte{corev1.TLSCertKey: leaf.CertPEM, corev1.TLSPrivateKeyKey: leaf.KeyPEM, "ca.crt": ca.CertPEM}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
