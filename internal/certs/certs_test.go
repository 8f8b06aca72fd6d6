package certs

import (
	"crypto/x509"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func mustCA(t *testing.T, name string, now time.Time, life time.Duration) *KeyPair {
	t.Helper()
	ca, err := NewCA(name, now, life)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestIssueMemberCertificate(t *testing.T) {
	g := NewWithT(t)
	ca := mustCA(t, "etcd-ca", t0, 24*time.Hour)
	dns, ips := MemberNames("c-abcde", "c", "c-client", "ns", "cluster.local.")
	leaf, err := Issue(ca, LeafRequest{CommonName: "c-abcde", DNSNames: dns, IPs: ips, Server: true, Client: true, Lifetime: time.Hour}, t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(leaf.Cert.DNSNames).To(ConsistOf(
		"c-abcde.c.ns.svc.cluster.local", "c-abcde.c.ns.svc",
		"c", "c.ns", "c.ns.svc", "c.ns.svc.cluster.local",
		"c-client", "c-client.ns", "c-client.ns.svc", "c-client.ns.svc.cluster.local",
		"localhost"))
	g.Expect(leaf.Cert.IPAddresses).To(ContainElement(net.IPv4(127, 0, 0, 1).To4()))
	g.Expect(leaf.Cert.ExtKeyUsage).To(ConsistOf(x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth))
	for _, host := range []string{"c-abcde.c.ns.svc.cluster.local", "c-client.ns.svc", "localhost", "127.0.0.1"} {
		g.Expect(Verify(leaf.Cert, []*x509.Certificate{ca.Cert}, host, t0)).To(Succeed(), host)
	}
	g.Expect(Verify(leaf.Cert, []*x509.Certificate{ca.Cert}, "c-other.c.ns.svc.cluster.local", t0)).NotTo(Succeed())
	other := mustCA(t, "other", t0, time.Hour*24)
	g.Expect(Verify(leaf.Cert, []*x509.Certificate{other.Cert}, "", t0)).NotTo(Succeed())
	g.Expect(IssuedBy(leaf.Cert, ca.Cert)).To(BeTrue())
	g.Expect(IssuedBy(leaf.Cert, other.Cert)).To(BeFalse())

	back, err := ParseKeyPair(leaf.CertPEM, leaf.KeyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back.Cert.Equal(leaf.Cert)).To(BeTrue())
	_, err = ParseKeyPair(leaf.CertPEM, ca.KeyPEM)
	g.Expect(err).To(MatchError(ContainSubstring("does not belong")))
}

func TestLeafNeverOutlivesItsCA(t *testing.T) {
	g := NewWithT(t)
	ca := mustCA(t, "short", t0, 2*time.Hour)
	leaf, err := Issue(ca, LeafRequest{CommonName: "x", Server: true, Lifetime: 24 * time.Hour}, t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(leaf.Cert.NotAfter).To(Equal(ca.Cert.NotAfter))
	_, err = Issue(leaf, LeafRequest{CommonName: "y"}, t0)
	g.Expect(err).To(MatchError(ContainSubstring("not a CA")))
}

// Renewal is due at two thirds of the lifetime counted from the moment of
// issue, not from NotBefore, which is backdated for clock skew.
func TestRenewalDue(t *testing.T) {
	ca := mustCA(t, "ca", t0, 365*24*time.Hour)
	leaf, err := Issue(ca, LeafRequest{CommonName: "x", Lifetime: 60 * time.Minute}, t0)
	if err != nil {
		t.Fatal(err)
	}
	// Issued at t0, NotAfter t0+60m: due at t0+40m.
	cases := []struct {
		at   time.Duration
		want bool
	}{
		{0, false}, {35 * time.Minute, false}, {40*time.Minute - time.Second, false},
		{40 * time.Minute, true}, {50 * time.Minute, true}, {2 * time.Hour, true},
	}
	for _, tc := range cases {
		if got := RenewalDue(leaf.Cert, t0.Add(tc.at)); got != tc.want {
			t.Errorf("RenewalDue at t0+%s = %v, want %v", tc.at, got, tc.want)
		}
	}
	if got := RenewalTime(leaf.Cert); !got.Equal(t0.Add(40 * time.Minute)) {
		t.Errorf("RenewalTime = %s", got)
	}
}

// A 5-minute leaf is due 3m20s after issue; counting from its backdated
// NotBefore made it due after 1m40s, a third of its life.
func TestShortLeafIsDueTwoThirdsAfterIssue(t *testing.T) {
	ca := mustCA(t, "ca", t0, 365*24*time.Hour)
	leaf, err := Issue(ca, LeafRequest{CommonName: "x", Lifetime: 5 * time.Minute}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := RenewalTime(leaf.Cert), t0.Add(3*time.Minute+20*time.Second); !got.Equal(want) {
		t.Errorf("RenewalTime = t0+%s, want t0+%s", got.Sub(t0), want.Sub(t0))
	}
	if RenewalDue(leaf.Cert, t0.Add(3*time.Minute)) {
		t.Error("due 3m after issue, before two thirds of its life")
	}
}

// A certificate from elsewhere is taken as issued at its NotBefore.
func TestExternalRenewalTime(t *testing.T) {
	c := &x509.Certificate{NotBefore: t0, NotAfter: t0.Add(90 * time.Minute)}
	if got := ExternalRenewalTime(c); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("ExternalRenewalTime = t0+%s, want t0+1h", got.Sub(t0))
	}
}

func TestBundle(t *testing.T) {
	g := NewWithT(t)
	a, b, c := mustCA(t, "a", t0, time.Hour*2), mustCA(t, "b", t0, time.Hour*2), mustCA(t, "c", t0, time.Hour*2)
	ab := NewBundle([]*x509.Certificate{a.Cert, b.Cert})
	ba := NewBundle([]*x509.Certificate{b.Cert}, []*x509.Certificate{a.Cert, b.Cert})
	g.Expect(ab).To(HaveLen(2))
	g.Expect(ab.PEM()).To(Equal(ba.PEM()), "the same set encodes the same")
	g.Expect(ab.Hash()).To(Equal(ba.Hash()))
	g.Expect(ab.Hash()).NotTo(Equal(NewBundle([]*x509.Certificate{a.Cert}).Hash()))
	parsed, err := ParseBundle(ab.PEM())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(parsed.Equal(ab)).To(BeTrue())
	g.Expect(ab.Contains(c.Cert)).To(BeFalse())
}
