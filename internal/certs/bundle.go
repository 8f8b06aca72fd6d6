package certs

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"slices"
	"strings"
)

// Bundle is a set of CA certificates, kept sorted by fingerprint so the same
// set always encodes to the same bytes and the same name: a trust bundle
// ConfigMap is named after its content, since etcd reads its CA files only
// at start and a member keeps the bundle it was created with.
type Bundle []*x509.Certificate

// NewBundle merges certificate lists into one bundle without duplicates.
func NewBundle(lists ...[]*x509.Certificate) Bundle {
	seen := map[string]bool{}
	var out Bundle
	for _, l := range lists {
		for _, c := range l {
			if c == nil {
				continue
			}
			fp := Fingerprint(c)
			if seen[fp] {
				continue
			}
			seen[fp] = true
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *x509.Certificate) int { return strings.Compare(Fingerprint(a), Fingerprint(b)) })
	return out
}

// ParseBundle parses a PEM bundle.
func ParseBundle(data []byte) (Bundle, error) {
	certs, err := ParseCertificates(data)
	if err != nil {
		return nil, err
	}
	return NewBundle(certs), nil
}

// PEM encodes the bundle.
func (b Bundle) PEM() []byte { return EncodeCertificates(b) }

// Hash is a short digest of the bundle's content, for naming the immutable
// object that holds it.
func (b Bundle) Hash() string {
	h := sha256.New()
	for _, c := range b {
		h.Write(c.Raw)
	}
	return hex.EncodeToString(h.Sum(nil))[:10]
}

// Contains reports whether c is in the bundle.
func (b Bundle) Contains(c *x509.Certificate) bool {
	fp := Fingerprint(c)
	return slices.ContainsFunc(b, func(x *x509.Certificate) bool { return Fingerprint(x) == fp })
}

// Equal reports whether both hold the same certificates.
func (b Bundle) Equal(o Bundle) bool {
	if len(b) != len(o) {
		return false
	}
	for _, c := range o {
		if !b.Contains(c) {
			return false
		}
	}
	return true
}
