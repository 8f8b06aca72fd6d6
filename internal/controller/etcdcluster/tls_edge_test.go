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
	"github.com/quorumctl/etcd-operator/internal/carotation"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	tt "github.com/quorumctl/etcd-operator/internal/tlstransition"
)

// peersCanTalk fails when two members that run peer TLS could not connect:
// each one's peer certificate must be issued by a CA the other's running
// Pod trusts (its mounted bundle), which also means no two trust disjoint
// CA sets.
func (h *harness) peersCanTalk(names []string) {
	h.t.Helper()
	trust := map[string]certs.Bundle{}
	for _, n := range names {
		p := h.pod(n)
		if certificates, _ := pod.PeerTLSOf(p); !certificates {
			continue
		}
		trust[n] = h.bundle(pod.MountedTrustBundle(p, v1alpha1.TLSSectionPeer))
	}
	for a := range trust {
		leaf := h.leaf(a, v1alpha1.TLSSectionPeer)
		h.g.Expect(leaf).NotTo(BeNil(), "%s runs peer TLS with a certificate", a)
		for b, bundle := range trust {
			ok := false
			for _, ca := range bundle {
				ok = ok || certs.IssuedBy(leaf.Cert, ca)
			}
			h.g.Expect(ok).To(BeTrue(), "%s trusts the CA of %s's peer certificate", b, a)
		}
	}
}

// drive runs passes until stop says so, playing each restart as walk does
// (the Pod goes down, then comes back built from the member's spec),
// releasing plaintext once clients may switch, and checking after every
// step that one member restarts at a time and that peers can talk.
func (h *harness) drive(names []string, stop func() bool) []string {
	h.t.Helper()
	var restarted []string
	for i := 0; i < 150 && !stop(); i++ {
		h.reconcile()
		h.dialledOverHTTPS()
		h.peersCanTalk(names)
		if t := h.transition(); t != nil && t.Phase == string(tt.PhaseClientsMaySwitch) && h.cluster().Annotations[v1alpha1.ReleasePlaintextAnnotation] == "" {
			h.annotate(v1alpha1.ReleasePlaintextAnnotation, "now")
		}
		for _, n := range names {
			m := h.member(n)
			if m.Status.RolledAt == nil || !pod.Outdated(m, h.pod(n)) {
				continue
			}
			restarted = append(restarted, n)
			h.setPodReady(n, false)
			h.reconcile()
			for _, o := range names {
				if o != n {
					h.g.Expect(h.member(o).Status.RolledAt).To(BeNil(), "nothing else restarts while %s is down", n)
				}
			}
			h.buildPod(n, true)
			h.peersCanTalk(names)
		}
		h.now = h.now.Add(time.Second)
	}
	h.g.Expect(stop()).To(BeTrue(), "the passes ended")
	return restarted
}

// settledOn: no transition, rotation or switch is under way, and every
// member runs TLS alone, trusting ca alone for peers and serving leaf.
func (h *harness) settledOn(names []string, ca, leaf *certs.KeyPair) bool {
	cl := h.cluster()
	if transitionOf(cl) != nil || cl.Status.TLS == nil || cl.Status.TLS.Peer.Rotation != "" || cl.Status.TLS.Client.Rotation != "" {
		return false
	}
	if h.peerStateNotes()[switchFromNote] != "" {
		return false
	}
	for _, n := range names {
		m := h.member(n)
		if tt.SpecPass(m) != tt.TLS || pod.Outdated(m, h.pod(n)) {
			return false
		}
		b := h.bundle(m.Spec.TLS.Peer.TrustBundle)
		if len(b) != 1 || !b.Contains(ca.Cert) || !h.leaf(n, "peer").Cert.Equal(leaf.Cert) {
			return false
		}
	}
	return true
}

func (h *harness) expectReadyOn(names []string, ca, leaf *certs.KeyPair) {
	h.t.Helper()
	h.drive(names, func() bool { return h.settledOn(names, ca, leaf) })
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue), h.condition(v1alpha1.ReadyCondition).Message)
	h.g.Expect(h.peerStateNotes()).To(HaveKeyWithValue(adoptedSourceNote, "Secret/other-peer-tls"))
	h.drainEvents()
	h.expectSwitchSettled(names)
}

// bothServed: n members run both schemes.
func (h *harness) bothServed(names []string) int {
	k := 0
	for _, n := range names {
		if runningPass(h.pod(n)) == tt.Both {
			k++
		}
	}
	return k
}

// A source switch asked while plaintext is being turned into TLS, in its
// pass 1: some members serve both schemes, others still plaintext.
func TestTLSEdge_SourceSwitchDuringTransitionPass1(t *testing.T) {
	h, names := plainToTLS(t)
	h.serveFromSecrets()
	h.drive(names, func() bool { return h.bothServed(names) == 1 })

	newCA, newLeaf := h.userCert("user ca")
	h.putUserSecret("other-peer-tls", newLeaf, newCA.CertPEM)
	h.switchPeerSource(v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "other-peer-tls"})
	h.reconcile()
	h.expectReadyOn(names, newCA, newLeaf)
}

// The same, once every member serves both schemes and clients may switch.
func TestTLSEdge_SourceSwitchWhileClientsMaySwitch(t *testing.T) {
	h, names := plainToTLS(t)
	h.serveFromSecrets()
	h.walk(names, func() bool { t := h.transition(); return t != nil && t.ClientsHTTPS })
	h.g.Expect(h.transition().Phase).To(Equal(string(tt.PhaseClientsMaySwitch)))

	newCA, newLeaf := h.userCert("user ca")
	h.putUserSecret("other-peer-tls", newLeaf, newCA.CertPEM)
	h.switchPeerSource(v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "other-peer-tls"})
	h.reconcile()
	h.expectReadyOn(names, newCA, newLeaf)
}

// A Secret source given when TLS was turned on, switched to another Secret
// of another CA during the transition's pass 1.
func TestTLSEdge_SecretToSecretDuringTransition(t *testing.T) {
	h := newHarness(t)
	names := []string{"demo-a", "demo-b", "demo-c"}
	h.formed(3, names...)
	for _, n := range names {
		h.buildPod(n, true)
	}
	for range 2 {
		h.reconcile()
	}
	oldCA, oldLeaf := h.userCert("user ca 1")
	h.putUserSecret("my-peer-tls", oldLeaf, oldCA.CertPEM)
	h.editSpec(func(s *v1alpha1.EtcdClusterSpec) { s.TLS = peerSecretSource.DeepCopy() })
	h.serveFromSecrets()
	h.drive(names, func() bool { return h.bothServed(names) == 1 })

	newCA, newLeaf := h.userCert("user ca 2")
	h.putUserSecret("other-peer-tls", newLeaf, newCA.CertPEM)
	h.switchPeerSource(v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "other-peer-tls"})
	h.reconcile()
	h.expectReadyOn(names, newCA, newLeaf)
}

// A source switch asked while the operator's own CA rotates because it
// nears its end, in pass 1.
func TestTLSEdge_SourceSwitchDuringAnExpiryRotation(t *testing.T) {
	h, names := servingOperatorTLS(t)
	ca, _, _ := h.caOf("peer")
	_, leafLife := h.cluster().Spec.TLS.Lifetimes()
	h.now = carotation.DueAt(ca.NotBefore, ca.NotAfter, leafLife).Add(time.Minute)
	h.drive(names, func() bool {
		return h.rotation("peer") == v1alpha1.CARotationTrustingNewCA && len(h.bundle(h.member(names[0]).Spec.TLS.Peer.TrustBundle)) == 2
	})
	h.g.Expect(h.cluster().Annotations[v1alpha1.RotateCAAnnotation]).To(BeEmpty())
	newCA, newLeaf := h.userCert("user ca")
	h.putUserSecret("other-peer-tls", newLeaf, newCA.CertPEM)
	h.switchPeerSource(v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "other-peer-tls"})
	h.reconcile()
	h.expectReadyOn(names, newCA, newLeaf)
}

// A source switch asked while the operator's own CA rotates, in pass 1
// (some members trust both of its CAs) or pass 2 (certificates of the new
// one being handed out).
func TestTLSEdge_SourceSwitchDuringOperatorRotation(t *testing.T) {
	for _, pass := range []string{v1alpha1.CARotationTrustingNewCA, v1alpha1.CARotationSwitchingCertificates} {
		t.Run(pass, func(t *testing.T) {
			h, names := servingOperatorTLS(t)
			h.annotate(v1alpha1.RotateCAAnnotation, "1")
			h.drive(names, func() bool {
				if h.rotation("peer") != pass {
					return false
				}
				if pass == v1alpha1.CARotationTrustingNewCA {
					return len(h.bundle(h.member(names[0]).Spec.TLS.Peer.TrustBundle)) == 2 ||
						len(h.bundle(h.member(names[1]).Spec.TLS.Peer.TrustBundle)) == 2
				}
				return true
			})
			newCA, newLeaf := h.userCert("user ca")
			h.putUserSecret("other-peer-tls", newLeaf, newCA.CertPEM)
			h.switchPeerSource(v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "other-peer-tls"})
			h.reconcile()
			h.expectReadyOn(names, newCA, newLeaf)
		})
	}
}

// putCertManagerSecret plays cert-manager issuing into its Secret of the
// peer side, from the named Issuer.
func (h *harness) putCertManagerSecret(issuer string, leaf *certs.KeyPair, ca []byte) {
	h.t.Helper()
	name := certManagerSecretName(testName, "peer")
	h.putUserSecret(name, leaf, ca)
	s := h.secret(name)
	s.Labels = v1alpha1.ClusterLabels(testName)
	s.Annotations = map[string]string{cmapi.IssuerNameAnnotationKey: issuer, cmapi.IssuerKindAnnotationKey: "Issuer", cmapi.IssuerGroupAnnotationKey: "cert-manager.io"}
	h.g.Expect(h.c.Update(context.Background(), s)).To(Succeed())
}

// A switch to cert-manager during the transition's pass 1: while
// cert-manager has not issued, the pass waits on it (TLSSourcePending), the
// transition holds where it is, and it all ends once the certificate is
// there.
func TestTLSEdge_SecretToCertManagerDuringTransition(t *testing.T) {
	h := newHarness(t)
	names := []string{"demo-a", "demo-b", "demo-c"}
	h.formed(3, names...)
	for _, n := range names {
		h.buildPod(n, true)
	}
	for range 2 {
		h.reconcile()
	}
	oldCA, oldLeaf := h.userCert("user ca 1")
	h.putUserSecret("my-peer-tls", oldLeaf, oldCA.CertPEM)
	h.editSpec(func(s *v1alpha1.EtcdClusterSpec) { s.TLS = peerSecretSource.DeepCopy() })
	h.serveFromSecrets()
	h.drive(names, func() bool { return h.bothServed(names) == 1 })

	h.switchPeerSource(v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceCertManager, IssuerRef: &v1alpha1.IssuerReference{Name: "cm"}})
	for range 5 {
		h.reconcile()
		h.peersCanTalk(names)
		h.now = h.now.Add(time.Second)
	}
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.TLSSourcePendingReason))
	h.g.Expect(h.transition()).NotTo(BeNil())

	newCA, newLeaf := h.userCert("cm ca")
	h.putCertManagerSecret("cm", newLeaf, newCA.CertPEM)
	h.drive(names, func() bool { return h.settledOn(names, newCA, newLeaf) })
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue), h.condition(v1alpha1.ReadyCondition).Message)
	h.g.Expect(h.peerStateNotes()).To(HaveKeyWithValue(adoptedSourceNote, "CertManager/cert-manager.io/Issuer/cm"))
}

// A switch asked while a member is down for its transition restart.
func TestTLSEdge_SourceSwitchWhileAMemberIsDown(t *testing.T) {
	h, names := plainToTLS(t)
	h.serveFromSecrets()
	var down string
	for i := 0; i < 20 && down == ""; i++ {
		h.reconcile()
		for _, n := range names {
			if m := h.member(n); m.Status.RolledAt != nil && pod.Outdated(m, h.pod(n)) {
				down = n
			}
		}
	}
	h.g.Expect(down).NotTo(BeEmpty())
	h.setPodReady(down, false)
	newCA, newLeaf := h.userCert("user ca")
	h.putUserSecret("other-peer-tls", newLeaf, newCA.CertPEM)
	h.switchPeerSource(v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "other-peer-tls"})
	h.reconcile()
	for _, o := range names {
		if o != down {
			h.g.Expect(h.member(o).Status.RolledAt).To(BeNil(), "nothing else restarts while %s is down", down)
		}
	}
	h.buildPod(down, true)
	h.expectReadyOn(names, newCA, newLeaf)
}

// After a switch away from the operator's CA asked in pass 1 or 2 of its
// own rotation, a switch back to it: the rotation left in its Secret must
// not hand members certificates of a CA they do not trust.
func TestTLSEdge_SwitchBackAfterASwitchDuringOperatorRotation(t *testing.T) {
	for _, pass := range []string{v1alpha1.CARotationTrustingNewCA, v1alpha1.CARotationSwitchingCertificates} {
		t.Run(pass, func(t *testing.T) {
			h, names := servingOperatorTLS(t)
			before, _, _ := h.caOf("peer")
			h.annotate(v1alpha1.RotateCAAnnotation, "1")
			h.drive(names, func() bool { return h.rotation("peer") == pass })
			newCA, newLeaf := h.userCert("user ca")
			h.putUserSecret("other-peer-tls", newLeaf, newCA.CertPEM)
			h.switchPeerSource(v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "other-peer-tls"})
			h.reconcile()
			h.expectReadyOn(names, newCA, newLeaf)

			h.switchPeerSource(v1alpha1.CertificateSourceSpec{})
			h.reconcile()
			h.g.Expect(h.condition(v1alpha1.ReadyCondition).Message).To(ContainSubstring("switching the peer certificates from Secret other-peer-tls to the operator's CA"))
			h.drive(names, func() bool {
				cl := h.cluster()
				return len(h.secret(sourceStateSecretName(testName, "peer")).Data) == 0 && cl.Status.TLS.Peer.Rotation == "" && cl.Status.TLS.Client.Rotation == ""
			})
			signing, next, previous := h.caOf("peer")
			h.g.Expect(next || previous).To(BeFalse(), "no rotation left over")
			h.g.Expect(signing.Equal(before)).To(BeFalse(), "the rotation asked for is done: its new CA signs")
			h.g.Expect(strings.Join(h.drainEvents(), "\n")).To(ContainSubstring("cut short ends without restarts"))
			for _, n := range names {
				b := h.bundle(h.member(n).Spec.TLS.Peer.TrustBundle)
				h.g.Expect(b).To(HaveLen(1))
				h.g.Expect(b.Contains(signing)).To(BeTrue())
				h.g.Expect(certs.IssuedBy(h.leaf(n, "peer").Cert, signing)).To(BeTrue())
			}
			h.reconcile()
			h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue), h.condition(v1alpha1.ReadyCondition).Message)
		})
	}
}

// A switch away from the operator's CA during pass 1 of its rotation, then
// back while that switch runs: in its pass 1 (the members still hold the
// operator's certificates) or its pass 3 (they hold the source's and still
// trust the operator's CAs).
func TestTLSEdge_BackDuringASwitchThatCutARotationShort(t *testing.T) {
	stages := map[string]func(h *harness, names []string) bool{
		"switch in pass 1": func(h *harness, names []string) bool {
			_, next, _ := h.peerStateRoll()
			return next && len(h.bundle(h.member(names[0]).Spec.TLS.Peer.TrustBundle)) == 3
		},
		"switch in pass 3": func(h *harness, names []string) bool {
			return h.rotation("peer") == v1alpha1.CARotationDroppingOldCA && h.peerStateNotes()[adoptedSourceNote] == "Secret/other-peer-tls" &&
				len(h.bundle(h.member(names[0]).Spec.TLS.Peer.TrustBundle)) == 1
		},
	}
	for stage, reached := range stages {
		t.Run(stage, func(t *testing.T) {
			h, names := servingOperatorTLS(t)
			before, _, _ := h.caOf("peer")
			h.annotate(v1alpha1.RotateCAAnnotation, "1")
			h.drive(names, func() bool { return h.rotation("peer") == v1alpha1.CARotationTrustingNewCA })
			newCA, newLeaf := h.userCert("user ca")
			h.putUserSecret("other-peer-tls", newLeaf, newCA.CertPEM)
			h.switchPeerSource(v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "other-peer-tls"})
			h.reconcile()
			h.drive(names, func() bool { return reached(h, names) })

			h.switchPeerSource(v1alpha1.CertificateSourceSpec{})
			var said []string
			h.drive(names, func() bool {
				cl := h.cluster()
				said = append(said, h.condition(v1alpha1.ReadyCondition).Message)
				return len(h.secret(sourceStateSecretName(testName, "peer")).Data) == 0 && cl.Status.TLS.Peer.Rotation == "" && cl.Status.TLS.Client.Rotation == ""
			})
			h.g.Expect(said).NotTo(ContainElement(ContainSubstring("from the operator's CA to the operator's CA")))
			h.g.Expect(said).To(ContainElement(ContainSubstring("switching the peer certificates back to the operator's CA")))
			if stage == "switch in pass 3" {
				h.g.Expect(said).To(ContainElement(ContainSubstring("switching the peer certificates from Secret other-peer-tls to the operator's CA")))
			}
			signing, next, previous := h.caOf("peer")
			h.g.Expect(next || previous).To(BeFalse(), "no rotation left over")
			h.g.Expect(signing.Equal(before)).To(BeFalse(), "the rotation asked for is done: its new CA signs")
			for _, n := range names {
				b := h.bundle(h.member(n).Spec.TLS.Peer.TrustBundle)
				h.g.Expect(b).To(HaveLen(1))
				h.g.Expect(b.Contains(signing)).To(BeTrue())
				h.g.Expect(certs.IssuedBy(h.leaf(n, "peer").Cert, signing)).To(BeTrue())
			}
			h.reconcile()
			h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue), h.condition(v1alpha1.ReadyCondition).Message)
			h.drainEvents()
			h.expectSwitchSettled(names)
		})
	}
}

// servingOperatorTLS is a formed cluster with the operator's own CAs whose
// members run and serve the certificates of their Secrets.
func servingOperatorTLS(t *testing.T) (*harness, []string) {
	h := newHarness(t)
	names := h.formedTLS(&v1alpha1.TLSSpec{})
	for _, n := range names {
		h.buildPod(n, true)
	}
	h.serveFromSecrets()
	h.reconcile()
	return h, names
}
