package etcdcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
)

// switchPeerSource edits the cluster's peer source, as kubectl apply would.
func (h *harness) switchPeerSource(src v1alpha1.CertificateSourceSpec) {
	h.t.Helper()
	cl := h.cluster()
	cl.Spec.TLS.Peer.CertificateSourceSpec = src
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
}

func (h *harness) peerStateNotes() map[string]string {
	return h.secret(sourceStateSecretName(testName, "peer")).Annotations
}

// A switch to a source of another CA is the three passes of a source CA
// change: Ready says TLSSourceSwitching with both sources and the pass,
// members keep the old source's certificate until every one trusts both
// CAs, and the switch ends, with an Event, once they trust the new CA
// alone.
func TestSourceSwitch_AnotherCAGoesThroughTheThreePasses(t *testing.T) {
	h := newHarness(t)
	oldCA, oldLeaf := h.userCert("user ca 1")
	h.putUserSecret("my-peer-tls", oldLeaf, oldCA.CertPEM)
	names := h.formedTLS(peerSecretSource)
	pin := h.serveFromSecrets()
	h.g.Expect(h.peerStateNotes()).To(HaveKeyWithValue(adoptedSourceNote, "Secret/my-peer-tls"), "the source is recorded with what was adopted from it")
	h.drainEvents()

	newCA, newLeaf := h.userCert("user ca 2")
	h.putUserSecret("other-peer-tls", newLeaf, newCA.CertPEM)
	h.switchPeerSource(v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "other-peer-tls"})
	h.reconcile()
	h.g.Expect(h.peerStateNotes()).To(HaveKeyWithValue(switchFromNote, "Secret/my-peer-tls"))
	events := strings.Join(h.drainEvents(), "\n")
	h.g.Expect(events).To(ContainSubstring("TLSSourceSwitchStarted"))
	h.g.Expect(events).To(ContainSubstring("CARotationStarted"))
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.TLSSourceSwitchingReason))
	h.g.Expect(ready.Message).To(ContainSubstring("switching the peer certificates from Secret my-peer-tls to Secret other-peer-tls"))
	h.g.Expect(ready.Message).To(ContainSubstring("pass 1 of 3"))
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Reason).To(Equal(v1alpha1.TLSSourceSwitchingReason))
	for _, n := range names {
		h.g.Expect(h.leaf(n, "peer").Cert.Equal(oldLeaf.Cert)).To(BeTrue(), "%s keeps the old source's certificate while not all trust the new CA", n)
	}

	// Pass 1, then pass 2 held while a member serves the old certificate.
	pin(names[2], true)
	first := h.rollThrough(names, func() bool { _, _, prev := h.peerSourceState(); return prev })
	h.g.Expect(first).To(ConsistOf(names), "each member restarted once to trust both CAs")
	for range 3 {
		h.reconcile()
	}
	for _, n := range names {
		h.g.Expect(h.leaf(n, "peer").Cert.Equal(newLeaf.Cert)).To(BeTrue(), "%s's Secret holds the new source's certificate", n)
	}
	h.g.Expect(h.peerStateNotes()).To(HaveKeyWithValue(adoptedSourceNote, "Secret/other-peer-tls"), "pass 2: the members' certificate comes from the new source")
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Message).To(ContainSubstring("pass 2 of 3"))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.TLSSourceSwitchingReason))

	// Pass 3.
	pin(names[2], false)
	second := h.rollThrough(names, func() bool { return h.rotation("peer") == "" && h.peerStateNotes()[switchFromNote] == "" })
	h.g.Expect(second).To(ConsistOf(names), "each member restarted once more, to trust the new CA alone")
	for _, n := range names {
		trust := h.bundle(h.member(n).Spec.TLS.Peer.TrustBundle)
		h.g.Expect(trust).To(HaveLen(1))
		h.g.Expect(trust.Contains(newCA.Cert)).To(BeTrue())
	}
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(strings.Join(h.drainEvents(), "\n")).To(ContainSubstring("TLSSourceSwitched"))

	h.expectSwitchSettled(names)
}

// A switch to a source of the CA the members already trust changes only
// the certificate, in place, in one pass: no trust roll, no restart.
func TestSourceSwitch_TheSameCAOnlyChangesTheCertificate(t *testing.T) {
	h := newHarness(t)
	ca, leaf := h.userCert("user ca 1")
	h.putUserSecret("my-peer-tls", leaf, ca.CertPEM)
	names := h.formedTLS(peerSecretSource)
	h.serveFromSecrets()
	bundle := h.member(names[0]).Spec.TLS.Peer.TrustBundle
	h.drainEvents()

	other, err := certs.Issue(ca, certs.LeafRequest{CommonName: "demo other", DNSNames: []string{"*.demo.ns.svc.cluster.local", "*.demo.ns.svc"},
		Server: true, Client: true, Lifetime: 24 * time.Hour}, h.now.Add(time.Minute))
	h.g.Expect(err).NotTo(HaveOccurred())
	h.putUserSecret("other-peer-tls", other, ca.CertPEM)
	h.switchPeerSource(v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "other-peer-tls"})
	for range 2 {
		h.reconcile()
	}
	h.g.Expect(h.rotation("peer")).To(BeEmpty(), "no rotation")
	h.g.Expect(h.peerStateNotes()).To(HaveKeyWithValue(adoptedSourceNote, "Secret/other-peer-tls"))
	h.g.Expect(h.peerStateNotes()).NotTo(HaveKey(switchFromNote))
	for _, n := range names {
		h.g.Expect(h.leaf(n, "peer").Cert.Equal(other.Cert)).To(BeTrue(), "%s has the new source's certificate", n)
		h.g.Expect(h.member(n).Spec.TLS.Peer.TrustBundle).To(Equal(bundle), "nothing restarts")
		h.g.Expect(h.member(n).Status.RolledAt).To(BeNil())
	}
	events := strings.Join(h.drainEvents(), "\n")
	h.g.Expect(events).To(ContainSubstring("TLSSourceSwitched"))
	h.g.Expect(events).To(ContainSubstring("in place"))
	h.g.Expect(events).NotTo(ContainSubstring("CARotationStarted"))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
}

// Switching back during pass 1, to the source the members' certificate
// still comes from, takes the next CA away again and ends the switch.
func TestSourceSwitch_BackDuringPass1(t *testing.T) {
	h := newHarness(t)
	oldCA, oldLeaf := h.userCert("user ca 1")
	h.putUserSecret("my-peer-tls", oldLeaf, oldCA.CertPEM)
	names := h.formedTLS(peerSecretSource)
	h.serveFromSecrets()
	newCA, newLeaf := h.userCert("user ca 2")
	h.putUserSecret("other-peer-tls", newLeaf, newCA.CertPEM)
	h.switchPeerSource(v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "other-peer-tls"})
	h.reconcile()
	_, next, _ := h.peerSourceState()
	h.g.Expect(next).To(BeTrue())

	h.switchPeerSource(peerSecretSource.Peer.CertificateSourceSpec)
	h.reconcile()
	_, next, _ = h.peerSourceState()
	h.g.Expect(next).To(BeFalse(), "nothing to rotate to any more")
	h.rollThrough(names, func() bool { return h.rotation("peer") == "" && h.peerStateNotes()[switchFromNote] == "" })
	for _, n := range names {
		h.g.Expect(h.leaf(n, "peer").Cert.Equal(oldLeaf.Cert)).To(BeTrue())
		trust := h.bundle(h.member(n).Spec.TLS.Peer.TrustBundle)
		h.g.Expect(trust).To(HaveLen(1))
		h.g.Expect(trust.Contains(oldCA.Cert)).To(BeTrue())
	}
}

// After a change of issuer, cert-manager's Secret still holds the old
// issuer's certificate until it reissues: that is pending, not a switch
// to the new issuer.
func TestSourceSwitch_WaitsForCertManagerToReissueFromTheNewIssuer(t *testing.T) {
	h := newHarness(t)
	ca, leaf := h.userCert("cm ca")
	h.putUserSecret(certManagerSecretName(testName, "peer"), leaf, ca.CertPEM)
	s := h.secret(certManagerSecretName(testName, "peer"))
	s.Labels = v1alpha1.ClusterLabels(testName)
	s.Annotations = map[string]string{cmapi.IssuerNameAnnotationKey: "old", cmapi.IssuerKindAnnotationKey: "Issuer", cmapi.IssuerGroupAnnotationKey: "cert-manager.io"}
	h.g.Expect(h.c.Update(context.Background(), s)).To(Succeed())
	spec := &v1alpha1.TLSSpec{Peer: v1alpha1.PeerTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{
		Source: v1alpha1.CertificateSourceCertManager, IssuerRef: &v1alpha1.IssuerReference{Name: "old"}}}}
	names := h.formedTLS(spec)
	h.serveFromSecrets()

	h.switchPeerSource(v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceCertManager, IssuerRef: &v1alpha1.IssuerReference{Name: "new"}})
	h.reconcile()
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.TLSSourcePendingReason))
	h.g.Expect(ready.Message).To(ContainSubstring("reissue"))
	h.g.Expect(h.peerStateNotes()).To(HaveKeyWithValue(adoptedSourceNote, "CertManager/cert-manager.io/Issuer/old"), "nothing switched yet")
	for _, n := range names {
		h.g.Expect(h.member(n).Status.RolledAt).To(BeNil())
	}
}

// expectSwitchSettled: once a switch is over, more passes record nothing in
// the peer side's state, announce nothing and restart no member.
func (h *harness) expectSwitchSettled(names []string) {
	before := h.secret(sourceStateSecretName(testName, "peer")).ResourceVersion
	for range 3 {
		h.reconcile()
	}
	h.g.Expect(h.secret(sourceStateSecretName(testName, "peer")).ResourceVersion).To(Equal(before))
	h.g.Expect(h.drainEvents()).NotTo(ContainElement(ContainSubstring("TLSSource")))
	for _, n := range names {
		h.g.Expect(h.member(n).Status.RolledAt).To(BeNil())
	}
}
