package etcdcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
)

// userCert is a user's CA and the wildcard certificate it signed for demo.
func (h *harness) userCert(cn string) (ca, leaf *certs.KeyPair) {
	h.t.Helper()
	ca, err := certs.NewCA(cn, h.now, 48*time.Hour)
	h.g.Expect(err).NotTo(HaveOccurred())
	leaf, err = certs.Issue(ca, certs.LeafRequest{CommonName: "demo", DNSNames: []string{"*.demo.ns.svc.cluster.local", "*.demo.ns.svc"},
		Server: true, Client: true, Lifetime: 24 * time.Hour}, h.now)
	h.g.Expect(err).NotTo(HaveOccurred())
	return ca, leaf
}

// putUserSecret writes the user's Secret as kubectl apply would.
func (h *harness) putUserSecret(name string, leaf *certs.KeyPair, ca []byte) {
	h.t.Helper()
	data := map[string][]byte{"tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM, "ca.crt": ca}
	s := &corev1.Secret{}
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: name}, s); err != nil {
		s = &corev1.Secret{Data: data}
		s.Name, s.Namespace = name, testNS
		h.g.Expect(h.c.Create(context.Background(), s)).To(Succeed())
		return
	}
	s.Data = data
	h.g.Expect(h.c.Update(context.Background(), s)).To(Succeed())
}

var peerSecretSource = &v1alpha1.TLSSpec{Peer: v1alpha1.PeerTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{
	Source: v1alpha1.CertificateSourceSecret, SecretName: "my-peer-tls"}}}

// sourceState reads what the operator keeps of the peer source.
func (h *harness) peerSourceState() (leaf *certs.KeyPair, next, previous bool) {
	s := h.secret(sourceStateSecretName(testName, "peer"))
	kp, err := certs.ParseKeyPair(s.Data["tls.crt"], s.Data["tls.key"])
	h.g.Expect(err).NotTo(HaveOccurred())
	return kp, len(s.Data[nextCertKey]) > 0, len(s.Data[previousCertKey]) > 0
}

// A user's Secret whose CA changes is rolled in the three passes of an
// operator-managed rotation: members keep the old certificate until all
// trust both CAs, take the new one in place, and drop the old CA only once
// every member serves the new certificate.
func TestSourceCAChange_ThreePassesThroughTheRollout(t *testing.T) {
	h := newHarness(t)
	oldCA, oldLeaf := h.userCert("user ca 1")
	h.putUserSecret("my-peer-tls", oldLeaf, oldCA.CertPEM)
	names := h.formedTLS(peerSecretSource)
	pin := h.serveFromSecrets()
	adopted, _, _ := h.peerSourceState()
	h.g.Expect(adopted.Cert.Equal(oldLeaf.Cert)).To(BeTrue(), "the operator keeps what its members are given")
	h.drainEvents()

	newCA, newLeaf := h.userCert("user ca 2")
	h.putUserSecret("my-peer-tls", newLeaf, newCA.CertPEM)
	h.reconcile()
	_, next, _ := h.peerSourceState()
	h.g.Expect(next).To(BeTrue(), "the new CA is kept as next")
	h.g.Expect(strings.Join(h.drainEvents(), "\n")).To(ContainSubstring("CARotationStarted"))
	h.g.Expect(h.rotation("peer")).To(Equal(v1alpha1.CARotationTrustingNewCA))
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.CARotatingReason))
	h.g.Expect(ready.Message).To(ContainSubstring("pass 1 of 3"))
	for _, n := range names {
		h.g.Expect(h.leaf(n, "peer").Cert.Equal(oldLeaf.Cert)).To(BeTrue(), "%s keeps the old certificate while not all trust the new CA", n)
	}

	// Pass 1.
	pin(names[2], true)
	first := h.rollThrough(names, func() bool { _, _, prev := h.peerSourceState(); return prev })
	h.g.Expect(first).To(ConsistOf(names), "each member restarted once to trust both CAs")
	for _, n := range names {
		trust := h.bundle(h.member(n).Spec.TLS.Peer.TrustBundle)
		h.g.Expect(trust).To(HaveLen(2), "%s trusts the old and the new CA", n)
		h.g.Expect(trust.Contains(oldCA.Cert) && trust.Contains(newCA.Cert)).To(BeTrue())
	}

	// Pass 2: the new certificate is copied in place; the old CA stays
	// while a member is still seen serving the old one.
	for range 3 {
		h.reconcile()
	}
	for _, n := range names {
		h.g.Expect(h.leaf(n, "peer").Cert.Equal(newLeaf.Cert)).To(BeTrue(), "%s's Secret holds the new certificate", n)
		h.g.Expect(h.member(n).Status.RolledAt).To(BeNil(), "without a restart")
	}
	_, _, prev := h.peerSourceState()
	h.g.Expect(prev).To(BeTrue(), "a member still serves the old certificate: the old CA stays trusted")
	h.g.Expect(h.rotation("peer")).To(Equal(v1alpha1.CARotationSwitchingCertificates))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Message).To(ContainSubstring("pass 2 of 3"))

	// Pass 3.
	pin(names[2], false)
	second := h.rollThrough(names, func() bool {
		_, _, p := h.peerSourceState()
		return !p && h.rotation("peer") == ""
	})
	h.g.Expect(second).To(ConsistOf(names), "each member restarted once more, to trust the new CA alone")
	for _, n := range names {
		trust := h.bundle(h.member(n).Spec.TLS.Peer.TrustBundle)
		h.g.Expect(trust).To(HaveLen(1))
		h.g.Expect(trust.Contains(newCA.Cert)).To(BeTrue())
	}
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	events := strings.Join(h.drainEvents(), "\n")
	for _, e := range []string{"CARotationSwitching", "CARotationDroppingOldCA", "CARotationCompleted"} {
		h.g.Expect(events).To(ContainSubstring(e))
	}
}

// A new certificate that the Secret's new ca.crt did not sign is refused
// as before, and changes nothing.
func TestSourceCAChange_AStrayCertificateChangesNothing(t *testing.T) {
	h := newHarness(t)
	oldCA, oldLeaf := h.userCert("user ca 1")
	h.putUserSecret("my-peer-tls", oldLeaf, oldCA.CertPEM)
	names := h.formedTLS(peerSecretSource)
	h.serveFromSecrets()
	bundle := h.member(names[0]).Spec.TLS.Peer.TrustBundle

	newCA, _ := h.userCert("user ca 2")
	_, stray := h.userCert("user ca 2")
	h.putUserSecret("my-peer-tls", stray, newCA.CertPEM)
	for range 3 {
		h.reconcile()
	}
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.TLSSourceInvalidReason))
	h.g.Expect(ready.Message).To(ContainSubstring("Secret ns/my-peer-tls"))
	adopted, next, _ := h.peerSourceState()
	h.g.Expect(next).To(BeFalse(), "no rotation begins")
	h.g.Expect(adopted.Cert.Equal(oldLeaf.Cert)).To(BeTrue())
	for _, n := range names {
		h.g.Expect(h.leaf(n, "peer").Cert.Equal(oldLeaf.Cert)).To(BeTrue())
		h.g.Expect(h.member(n).Spec.TLS.Peer.TrustBundle).To(Equal(bundle))
		h.g.Expect(h.member(n).Status.RolledAt).To(BeNil())
	}
}

// A renewal under the same CA is no rotation: it is copied to the members
// in place, as before.
func TestSourceCAChange_ARenewalUnderTheSameCAIsCopiedInPlace(t *testing.T) {
	h := newHarness(t)
	ca, leaf := h.userCert("user ca 1")
	h.putUserSecret("my-peer-tls", leaf, ca.CertPEM)
	names := h.formedTLS(peerSecretSource)
	h.serveFromSecrets()
	bundle := h.member(names[0]).Spec.TLS.Peer.TrustBundle

	renewed, err := certs.Issue(ca, certs.LeafRequest{CommonName: "demo", DNSNames: []string{"*.demo.ns.svc.cluster.local", "*.demo.ns.svc"},
		Server: true, Client: true, Lifetime: 24 * time.Hour}, h.now.Add(time.Minute))
	h.g.Expect(err).NotTo(HaveOccurred())
	h.putUserSecret("my-peer-tls", renewed, ca.CertPEM)
	for range 2 {
		h.reconcile()
	}
	_, next, _ := h.peerSourceState()
	h.g.Expect(next).To(BeFalse())
	h.g.Expect(h.rotation("peer")).To(BeEmpty())
	for _, n := range names {
		h.g.Expect(h.leaf(n, "peer").Cert.Equal(renewed.Cert)).To(BeTrue(), "%s has the renewed certificate", n)
		h.g.Expect(h.member(n).Spec.TLS.Peer.TrustBundle).To(Equal(bundle), "nothing restarts")
	}
}

// spec.rollout.paused holds the switch: after pass 1 the members keep the
// old certificate until the pause is lifted.
func TestSourceCAChange_PausedHoldsTheSwitch(t *testing.T) {
	h := newHarness(t)
	oldCA, oldLeaf := h.userCert("user ca 1")
	h.putUserSecret("my-peer-tls", oldLeaf, oldCA.CertPEM)
	names := h.formedTLS(peerSecretSource)
	h.serveFromSecrets()
	newCA, newLeaf := h.userCert("user ca 2")
	h.putUserSecret("my-peer-tls", newLeaf, newCA.CertPEM)
	h.reconcile()
	// Stops once every member's spec names the two-CA bundle, before the
	// pass that would see the last one back and switch.
	h.rollThrough(names, func() bool { return h.onTwoCAs(names) })
	cl := h.cluster()
	cl.Spec.Rollout.Paused = true
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
	for range 3 {
		h.reconcile()
	}
	_, next, prev := h.peerSourceState()
	h.g.Expect(prev).To(BeFalse())
	h.g.Expect(next).To(BeTrue(), "the switch waits on the pause")
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.RolloutPausedReason))
	for _, n := range names {
		h.g.Expect(h.leaf(n, "peer").Cert.Equal(oldLeaf.Cert)).To(BeTrue())
	}
	cl = h.cluster()
	cl.Spec.Rollout.Paused = false
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
	h.reconcile()
	_, _, prev = h.peerSourceState()
	h.g.Expect(prev).To(BeTrue(), "lifted: the switch")
}

func (h *harness) onTwoCAs(names []string) bool {
	for _, n := range names {
		if len(h.bundle(h.member(n).Spec.TLS.Peer.TrustBundle)) != 2 {
			return false
		}
	}
	return true
}

// Both sides from the user's Secrets, with mutual TLS (the operator's own
// client CA beside the user's): one change of both Secrets ends with every
// member trusting the new CA alone on both sides, the operator's client CA
// untouched and trusted throughout.
func TestSourceCAChange_BothSidesBesideTheOperatorsClientCA(t *testing.T) {
	h := newHarness(t)
	oldCA, oldLeaf := h.userCert("user ca 1")
	h.putUserSecret("my-peer-tls", oldLeaf, oldCA.CertPEM)
	h.putUserSecret("my-client-tls", oldLeaf, oldCA.CertPEM)
	spec := peerSecretSource.DeepCopy()
	spec.Client.CertificateSourceSpec = v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "my-client-tls"}
	names := h.formedTLS(spec)
	h.serveFromSecrets()
	opCA, _, _ := h.caOf("client")

	newCA, newLeaf := h.userCert("user ca 2")
	h.putUserSecret("my-peer-tls", newLeaf, newCA.CertPEM)
	h.putUserSecret("my-client-tls", newLeaf, newCA.CertPEM)
	h.reconcile()
	h.rollThrough(names, func() bool {
		return h.rotation("peer") == "" && h.rotation("client") == "" && h.leaf(names[0], "peer").Cert.Equal(newLeaf.Cert)
	})
	for range 3 {
		h.reconcile()
	}
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue), h.condition(v1alpha1.ReadyCondition).Message)
	for _, n := range names {
		h.g.Expect(h.leaf(n, "peer").Cert.Equal(newLeaf.Cert)).To(BeTrue())
		h.g.Expect(h.leaf(n, "client").Cert.Equal(newLeaf.Cert)).To(BeTrue())
		peer, cli := h.bundle(h.member(n).Spec.TLS.Peer.TrustBundle), h.bundle(h.member(n).Spec.TLS.Client.TrustBundle)
		h.g.Expect(peer).To(HaveLen(1))
		h.g.Expect(peer.Contains(newCA.Cert)).To(BeTrue())
		h.g.Expect(cli).To(HaveLen(2), "%s trusts the user's new CA and the operator's client CA", n)
		h.g.Expect(cli.Contains(newCA.Cert) && cli.Contains(opCA)).To(BeTrue())
	}
	now, next, prev := h.caOf("client")
	h.g.Expect(now.Equal(opCA) && !next && !prev).To(BeTrue(), "the operator's client CA did not rotate")
}

// A second CA change during pass 1, before anything serves the next CA,
// retargets the rotation: it ends on the newest CA, and the CA in between
// is trusted by no member at the end.
func TestSourceCAChange_ASecondChangeDuringPass1Retargets(t *testing.T) {
	h := newHarness(t)
	oldCA, oldLeaf := h.userCert("user ca 1")
	h.putUserSecret("my-peer-tls", oldLeaf, oldCA.CertPEM)
	names := h.formedTLS(peerSecretSource)
	h.serveFromSecrets()
	midCA, midLeaf := h.userCert("user ca 2")
	h.putUserSecret("my-peer-tls", midLeaf, midCA.CertPEM)
	h.reconcile()
	_, next, _ := h.peerSourceState()
	h.g.Expect(next).To(BeTrue())

	lastCA, lastLeaf := h.userCert("user ca 3")
	h.putUserSecret("my-peer-tls", lastLeaf, lastCA.CertPEM)
	h.reconcile()
	s := h.secret(sourceStateSecretName(testName, "peer"))
	b, err := certs.ParseBundle(s.Data[nextCertKey])
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(b.Contains(lastCA.Cert) && !b.Contains(midCA.Cert)).To(BeTrue(), "next is the newest CA")

	h.rollThrough(names, func() bool {
		return h.rotation("peer") == "" && h.leaf(names[0], "peer").Cert.Equal(lastLeaf.Cert)
	})
	for _, n := range names {
		h.g.Expect(h.leaf(n, "peer").Cert.Equal(lastLeaf.Cert)).To(BeTrue())
		trust := h.bundle(h.member(n).Spec.TLS.Peer.TrustBundle)
		h.g.Expect(trust).To(HaveLen(1))
		h.g.Expect(trust.Contains(lastCA.Cert)).To(BeTrue())
	}
}
