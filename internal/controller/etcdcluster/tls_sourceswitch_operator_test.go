package etcdcluster

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
)

// peerStateRoll reads the rotation state kept of the peer source, which
// has no certificate of its own before pass 2 of a switch from the
// operator's CA.
func (h *harness) peerStateRoll() (leaf, next, previous bool) {
	s := h.secret(sourceStateSecretName(testName, "peer"))
	return len(s.Data["tls.crt"]) > 0, len(s.Data[nextCertKey]) > 0, len(s.Data[previousCertKey]) > 0
}

// A switch from OperatorManaged to a source of another CA: the members'
// per-member certificates of the operator's CA are the adopted ones until
// pass 2, which gives every member the source's certificate in place; the
// three passes are the source CA change's, and the switch is recorded and
// reported as between sources.
func TestSourceSwitch_FromTheOperatorsCA(t *testing.T) {
	h := newHarness(t)
	names := h.formedTLS(&v1alpha1.TLSSpec{})
	pin := h.serveFromSecrets()
	opCA := h.secret(v1alpha1.CASecretName(testName, "peer"))
	operatorCA, err := certs.ParseKeyPair(opCA.Data["tls.crt"], opCA.Data["tls.key"])
	h.g.Expect(err).NotTo(HaveOccurred())
	own := map[string]*certs.KeyPair{}
	for _, n := range names {
		own[n] = h.leaf(n, "peer")
	}
	h.drainEvents()

	newCA, newLeaf := h.userCert("user ca")
	h.putUserSecret("my-peer-tls", newLeaf, newCA.CertPEM)
	h.switchPeerSource(peerSecretSource.Peer.CertificateSourceSpec)
	h.reconcile()
	h.g.Expect(h.peerStateNotes()).To(HaveKeyWithValue(adoptedSourceNote, "OperatorManaged"), "the members' certificates come from the operator's CA")
	h.g.Expect(h.peerStateNotes()).To(HaveKeyWithValue(switchFromNote, "OperatorManaged"))
	hasLeaf, next, _ := h.peerStateRoll()
	h.g.Expect(hasLeaf).To(BeFalse(), "no shared certificate before pass 2")
	h.g.Expect(next).To(BeTrue(), "the source's CA is the next one")
	events := strings.Join(h.drainEvents(), "\n")
	h.g.Expect(events).To(ContainSubstring("TLSSourceSwitchStarted"))
	h.g.Expect(events).To(ContainSubstring("from the operator's CA to Secret my-peer-tls"))
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.TLSSourceSwitchingReason))
	h.g.Expect(ready.Message).To(ContainSubstring("switching the peer certificates from the operator's CA to Secret my-peer-tls"))
	h.g.Expect(ready.Message).To(ContainSubstring("pass 1 of 3"))

	// Pass 1: each member restarts once to trust both CAs, keeping its
	// own certificate; pass 2 is held while a member serves it.
	pin(names[2], true)
	first := h.rollThrough(names, func() bool { _, _, prev := h.peerStateRoll(); return prev })
	h.g.Expect(first).To(ConsistOf(names), "each member restarted once to trust both CAs")
	for _, n := range names {
		trust := h.bundle(h.member(n).Spec.TLS.Peer.TrustBundle)
		h.g.Expect(trust).To(HaveLen(2))
		h.g.Expect(trust.Contains(operatorCA.Cert)).To(BeTrue())
		h.g.Expect(trust.Contains(newCA.Cert)).To(BeTrue())
	}
	for range 3 {
		h.reconcile()
	}
	for _, n := range names {
		h.g.Expect(h.leaf(n, "peer").Cert.Equal(newLeaf.Cert)).To(BeTrue(), "%s's Secret holds the source's certificate", n)
		h.g.Expect(own[n].Cert.Equal(newLeaf.Cert)).To(BeFalse())
	}
	h.g.Expect(h.peerStateNotes()).To(HaveKeyWithValue(adoptedSourceNote, "Secret/my-peer-tls"))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Message).To(ContainSubstring("pass 2 of 3"))

	// Pass 3: the operator's CA is dropped.
	pin(names[2], false)
	second := h.rollThrough(names, func() bool { return h.rotation("peer") == "" && h.peerStateNotes()[switchFromNote] == "" })
	h.g.Expect(second).To(ConsistOf(names), "each member restarted once more, to trust the source's CA alone")
	for _, n := range names {
		trust := h.bundle(h.member(n).Spec.TLS.Peer.TrustBundle)
		h.g.Expect(trust).To(HaveLen(1))
		h.g.Expect(trust.Contains(newCA.Cert)).To(BeTrue())
	}
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(strings.Join(h.drainEvents(), "\n")).To(ContainSubstring("TLSSourceSwitched"))

	h.expectSwitchSettled(names)
	for _, n := range names {
		h.g.Expect(h.leaf(n, "peer").Cert.Equal(newLeaf.Cert)).To(BeTrue())
	}
}

// A source created with the cluster is not mistaken for a switch from the
// operator's CA, even where the operator keeps a CA of the section (the
// client side with mutual TLS, whose CA signs client certificates).
func TestSourceSwitch_ASourceFromCreationIsNoSwitch(t *testing.T) {
	h := newHarness(t)
	ca, leaf := h.userCert("user ca")
	h.putUserSecret("my-client-tls", leaf, ca.CertPEM)
	h.formedTLS(&v1alpha1.TLSSpec{Client: v1alpha1.ClientTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{
		Source: v1alpha1.CertificateSourceSecret, SecretName: "my-client-tls"}}})
	h.serveFromSecrets()
	for range 2 {
		h.reconcile()
	}
	notes := h.secret(sourceStateSecretName(testName, "client")).Annotations
	h.g.Expect(notes).To(HaveKeyWithValue(adoptedSourceNote, "Secret/my-client-tls"))
	h.g.Expect(notes).NotTo(HaveKey(switchFromNote))
	h.g.Expect(h.rotation("client")).To(BeEmpty())
}

// A switch back from a source to OperatorManaged: the operator's CA is
// offered as a source's new CA would be, members keep the source's
// certificate until every one trusts both CAs, pass 2 issues each member
// a certificate of its own from the operator's CA, and once the source's
// CA is dropped the state of the source goes, leaving the section as a
// cluster created OperatorManaged has it.
func TestSourceSwitch_BackToTheOperatorsCA(t *testing.T) {
	h := newHarness(t)
	userCA, userLeaf := h.userCert("user ca")
	h.putUserSecret("my-peer-tls", userLeaf, userCA.CertPEM)
	names := h.formedTLS(peerSecretSource)
	pin := h.serveFromSecrets()
	h.drainEvents()

	h.switchPeerSource(v1alpha1.CertificateSourceSpec{})
	h.reconcile()
	h.g.Expect(h.peerStateNotes()).To(HaveKeyWithValue(switchFromNote, "Secret/my-peer-tls"))
	_, next, _ := h.peerStateRoll()
	h.g.Expect(next).To(BeTrue(), "the operator's CA is the next one")
	opCA := h.secret(v1alpha1.CASecretName(testName, "peer"))
	operatorCA, err := certs.ParseKeyPair(opCA.Data["tls.crt"], opCA.Data["tls.key"])
	h.g.Expect(err).NotTo(HaveOccurred())
	events := strings.Join(h.drainEvents(), "\n")
	h.g.Expect(events).To(ContainSubstring("TLSSourceSwitchStarted"))
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.TLSSourceSwitchingReason))
	h.g.Expect(ready.Message).To(ContainSubstring("switching the peer certificates from Secret my-peer-tls to the operator's CA"))
	h.g.Expect(ready.Message).To(ContainSubstring("pass 1 of 3"))

	pin(names[2], true)
	first := h.rollThrough(names, func() bool { _, _, prev := h.peerStateRoll(); return prev })
	h.g.Expect(first).To(ConsistOf(names), "each member restarted once to trust both CAs")
	for _, n := range names {
		trust := h.bundle(h.member(n).Spec.TLS.Peer.TrustBundle)
		h.g.Expect(trust).To(HaveLen(2))
		h.g.Expect(trust.Contains(operatorCA.Cert)).To(BeTrue())
		h.g.Expect(trust.Contains(userCA.Cert)).To(BeTrue())
	}
	for range 3 {
		h.reconcile()
	}
	serials := map[string]bool{}
	for _, n := range names {
		leaf := h.leaf(n, "peer")
		h.g.Expect(certs.IssuedBy(leaf.Cert, operatorCA.Cert)).To(BeTrue(), "%s has a certificate of the operator's CA", n)
		serials[leaf.Cert.SerialNumber.String()] = true
	}
	h.g.Expect(serials).To(HaveLen(3), "one certificate per member")
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Message).To(ContainSubstring("pass 2 of 3"))

	pin(names[2], false)
	second := h.rollThrough(names, func() bool {
		return h.rotation("peer") == "" && len(h.secret(sourceStateSecretName(testName, "peer")).Data) == 0
	})
	h.g.Expect(second).To(ConsistOf(names), "each member restarted once more, to trust the operator's CA alone")
	for _, n := range names {
		trust := h.bundle(h.member(n).Spec.TLS.Peer.TrustBundle)
		h.g.Expect(trust).To(HaveLen(1))
		h.g.Expect(trust.Contains(operatorCA.Cert)).To(BeTrue())
	}
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(strings.Join(h.drainEvents(), "\n")).To(ContainSubstring("TLSSourceSwitched"))
	for range 3 {
		h.reconcile()
	}
	h.g.Expect(h.drainEvents()).NotTo(ContainElement(ContainSubstring("TLSSource")))
	for _, n := range names {
		h.g.Expect(h.member(n).Status.RolledAt).To(BeNil())
		h.g.Expect(certs.IssuedBy(h.leaf(n, "peer").Cert, operatorCA.Cert)).To(BeTrue())
	}

	// The emptied state is made afresh by a later switch away.
	h.switchPeerSource(peerSecretSource.Peer.CertificateSourceSpec)
	h.reconcile()
	h.g.Expect(h.peerStateNotes()).To(HaveKeyWithValue(switchFromNote, "OperatorManaged"))
	_, next, _ = h.peerStateRoll()
	h.g.Expect(next).To(BeTrue(), "the source's CA is the next one again")
}
