package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// backdate covers clock skew between the operator and the members: a
// certificate valid from "now" would be refused for a moment by a member
// whose clock is a little behind.
const backdate = 5 * time.Minute

// KeyPair is a certificate with its private key, parsed and in PEM.
type KeyPair struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA creates a self-signed CA valid for lifetime from now.
func NewCA(commonName string, now time.Time, lifetime time.Duration) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("failed to generate a CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return sign(tmpl, tmpl, key, key)
}

// LeafRequest is what a leaf certificate says.
type LeafRequest struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []net.IP
	// Server and Client are the extended key usages; an etcd member's
	// certificate needs both, since it also dials its peers with it.
	Server, Client bool
	Lifetime       time.Duration
}

// Issue signs a leaf certificate for req with ca. It never outlives ca.
func Issue(ca *KeyPair, req LeafRequest, now time.Time) (*KeyPair, error) {
	if !ca.Cert.IsCA {
		return nil, errors.New("failed to issue a certificate: the signer is not a CA")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("failed to generate a key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(req.Lifetime)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: req.CommonName, Organization: slices.Clone(req.Organization)},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     slices.Clone(req.DNSNames),
		IPAddresses:  slices.Clone(req.IPs),
	}
	if req.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if req.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	return sign(tmpl, ca.Cert, key, ca.Key)
}

func sign(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, signer crypto.Signer) (*KeyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("failed to sign a certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &KeyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("failed to draw a serial number: %w", err)
	}
	return serial.Add(serial, big.NewInt(1)), nil
}

// ParseKeyPair parses a PEM certificate (the first of the chain) and its
// PEM private key, and checks that they belong together.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		return nil, err
	}
	if len(certs) == 0 {
		return nil, errors.New("failed to parse the certificate: no CERTIFICATE block")
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("failed to parse the private key: no PEM block")
	}
	key, err := parseKey(block)
	if err != nil {
		return nil, err
	}
	if !publicKeysEqual(certs[0].PublicKey, key.Public()) {
		return nil, errors.New("the private key does not belong to the certificate")
	}
	return &KeyPair{Cert: certs[0], Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

func parseKey(block *pem.Block) (crypto.Signer, error) {
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			return s, nil
		}
		return nil, errors.New("failed to parse the private key: not a signing key")
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	return nil, fmt.Errorf("failed to parse the private key: unsupported %s", block.Type)
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}

// ParseCertificates parses every CERTIFICATE block of a PEM bundle.
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out, nil
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("failed to parse a certificate: %w", err)
		}
		out = append(out, c)
	}
}

// EncodeCertificates writes certificates as one PEM bundle.
func EncodeCertificates(certs []*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}

// Fingerprint is the SHA-256 of the certificate, in hex.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// RenewalTime is when a certificate Issue made is due for renewal: two
// thirds into its lifetime, so a failed renewal has a third of the lifetime
// to be retried in before anything expires. The lifetime counts from the
// moment of issue, not from NotBefore: NotBefore is backdated for clock
// skew, and counting from it would renew a 5-minute leaf 1m40s after issue
// (a third of its life) instead of 3m20s.
func RenewalTime(c *x509.Certificate) time.Time {
	issued := c.NotBefore.Add(backdate)
	if issued.After(c.NotAfter) {
		issued = c.NotBefore
	}
	return twoThirds(issued, c.NotAfter)
}

// ExternalRenewalTime is when a certificate the operator did not issue (a
// user's Secret, cert-manager's) is two thirds into its validity, which is
// all that is known of when it was issued.
func ExternalRenewalTime(c *x509.Certificate) time.Time { return twoThirds(c.NotBefore, c.NotAfter) }

func twoThirds(from, to time.Time) time.Time { return from.Add(to.Sub(from) * 2 / 3) }

// RenewalDue reports whether c, which Issue made, is due for renewal at now.
func RenewalDue(c *x509.Certificate, now time.Time) bool { return !now.Before(RenewalTime(c)) }

// Verify checks that leaf chains to one of roots at now, for any usage, and
// names host when host is not empty.
func Verify(leaf *x509.Certificate, roots []*x509.Certificate, host string, now time.Time) error {
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:       pool,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
		DNSName:     host,
	})
	return err
}

// IssuedBy reports whether leaf's signature is ca's.
func IssuedBy(leaf, ca *x509.Certificate) bool {
	return bytes.Equal(leaf.RawIssuer, ca.RawSubject) && leaf.CheckSignatureFrom(ca) == nil
}
