//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// TestTLSSourceSwitchOperatorManaged: a running 3-member cluster with the
// operator's own CAs (tls: {}) is switched to a cert-manager CA Issuer and
// then back, each under the linearizability checker and a writer through
// the client Service. Each way is the three-pass roll of a source CA
// change: members restart one at a time to trust both CAs, take the new
// certificates in place (cert-manager's one, or per-member ones of the
// operator's CA), and restart to drop the old CA; no write fails beyond a
// leader change's retries, and at the end a client that trusts only the
// new CA connects while one that trusts only the old one is refused.
func TestTLSSourceSwitchOperatorManaged(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	g := NewWithT(t)
	g.Expect(env.EnsureCertManager(ctx, t)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "om-switch")
	r := &rollCluster{t: t, g: g, c: c, ns: ns, name: "om-switch"}

	issuerCA, _ := newCAIssuer(ctx, g, c, ns, "cert-manager issuer ca")

	cl := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: ns}, Spec: v1alpha1.EtcdClusterSpec{
		Replicas: ptr.To[int32](3),
		TLS:      &v1alpha1.TLSSpec{},
	}}
	framework.AllowE2EClients(cl)
	g.Expect(c.Create(ctx, cl)).To(Succeed())
	r.rolled(ctx, 6*time.Minute)
	operatorCA := func(section string) *certs.KeyPair {
		s := &corev1.Secret{}
		r.g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.CASecretName(r.name, section)}, s)).To(Succeed())
		kp, err := certs.ParseKeyPair(s.Data["tls.crt"], s.Data["tls.key"])
		r.g.Expect(err).NotTo(HaveOccurred())
		return kp
	}
	opPeer, opClient := operatorCA(v1alpha1.TLSSectionPeer), operatorCA(v1alpha1.TLSSectionClient)
	r.expectServedFrom(ctx, opPeer.Cert, "", v1alpha1.PeerPort)
	r.expectServedFrom(ctx, opClient.Cert, "", v1alpha1.ClientPort)
	before := names(r.members(ctx))
	issuer := &v1alpha1.IssuerReference{Name: "etcd-ca", Kind: "Issuer"}

	ok := t.Run("to cert-manager", func(t *testing.T) {
		r.t, r.g = t, NewWithT(t)
		r.switchSource(ctx, before, v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceCertManager, IssuerRef: issuer},
			"from the operator's CA to cert-manager Issuer etcd-ca")
		r.expectServedFrom(ctx, issuerCA.Cert, "", v1alpha1.ClientPort, v1alpha1.PeerPort)
		r.expectPeersTrustOnly(ctx, issuerCA.Cert)
		// The operator's client CA still signs client certificates
		// (mutual TLS is unchanged): the old CA is the one that signed
		// what the members served on the client port.
		r.expectTrustedOnlyBy(ctx, issuerCA.CertPEM, opClient.CertPEM)
	})
	if !ok {
		return
	}
	t.Run("back to OperatorManaged", func(t *testing.T) {
		r.t, r.g = t, NewWithT(t)
		r.switchSource(ctx, before, v1alpha1.CertificateSourceSpec{}, "from cert-manager Issuer etcd-ca to the operator's CA")
		peer, cli := operatorCA(v1alpha1.TLSSectionPeer), operatorCA(v1alpha1.TLSSectionClient)
		r.expectServedFrom(ctx, peer.Cert, "", v1alpha1.PeerPort)
		r.expectServedFrom(ctx, cli.Cert, "", v1alpha1.ClientPort)
		r.expectPeersTrustOnly(ctx, peer.Cert)
		r.expectTrustedOnlyBy(ctx, cli.CertPEM, issuerCA.CertPEM)
		for _, m := range r.members(ctx) {
			s := &corev1.Secret{}
			r.g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.MemberTLSSecretName(m.Name)}, s)).To(Succeed())
			leaf, err := certs.ParseKeyPair(s.Data["peer.crt"], s.Data["peer.key"])
			r.g.Expect(err).NotTo(HaveOccurred())
			r.g.Expect(leaf.Cert.Subject.CommonName).To(Equal(m.Name), "%s has a certificate of its own again", m.Name)
		}
	})
}

// switchSource edits both sides' source under the checker and the writer
// (rollSourceCAChange), and sees Ready say TLSSourceSwitching with what.
func (r *rollCluster) switchSource(ctx context.Context, before []string, src v1alpha1.CertificateSourceSpec, what string) {
	var reasons []string
	r.rollSourceCAChange(ctx, before, func() {
		r.g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) {
			c.Spec.TLS.Peer.CertificateSourceSpec = *src.DeepCopy()
			c.Spec.TLS.Client.CertificateSourceSpec = *src.DeepCopy()
		})).To(Succeed(), "a running cluster's source may switch %s", what)
		r.g.Expect(framework.WaitFor(ctx, 3*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
			ready := meta.FindStatusCondition(r.get(ctx).Status.Conditions, v1alpha1.ReadyCondition)
			if ready != nil && (len(reasons) == 0 || reasons[len(reasons)-1] != ready.Reason) {
				reasons = append(reasons, ready.Reason)
			}
			return ready != nil && ready.Reason == v1alpha1.TLSSourceSwitchingReason && strings.Contains(ready.Message, what), nil
		})).To(Succeed(), "Ready says TLSSourceSwitching: seen %v", reasons)
	})
	r.t.Logf("Ready reasons seen as the switch began: %v", reasons)
	r.expectEventsOf(ctx, "TLSSourceSwitchStarted", "TLSSourceSwitched")
	ready := meta.FindStatusCondition(r.get(ctx).Status.Conditions, v1alpha1.ReadyCondition)
	r.g.Expect(ready).NotTo(BeNil())
	r.g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
}

// expectTrustedOnlyBy: a client trusting newCA alone writes through every
// member and the client Service, with the client certificate the operator
// issued on request; one trusting oldCA alone is refused.
func (r *rollCluster) expectTrustedOnlyBy(ctx context.Context, newCA, oldCA []byte) {
	m, err := framework.ReadClientSecret(ctx, r.c, r.ns, framework.E2EClientSecretName(r.name))
	r.g.Expect(err).NotTo(HaveOccurred())
	m.CAPEM = newCA
	cfg, err := m.TLSConfig(r.serverName(), true)
	r.g.Expect(err).NotTo(HaveOccurred())
	svc, err := env.ClientServiceEndpoint(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	eps, err := env.MemberEndpoints(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	for _, ep := range framework.HTTPS(append(eps, svc)) {
		cli, err := framework.EtcdTLSClient(cfg, ep)
		r.g.Expect(err).NotTo(HaveOccurred())
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = cli.Put(pctx, "switched", ep)
		pcancel()
		cli.Close()
		r.g.Expect(err).NotTo(HaveOccurred(), "a client trusting only the new CA writes through %s", ep)
	}
	m.CAPEM = oldCA
	old, err := m.TLSConfig(r.serverName(), true)
	r.g.Expect(err).NotTo(HaveOccurred())
	cli, err := framework.EtcdTLSClient(old, framework.HTTPS([]string{svc})...)
	r.g.Expect(err).NotTo(HaveOccurred())
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = cli.Put(pctx, "switched", "old ca")
	pcancel()
	cli.Close()
	r.g.Expect(err).To(HaveOccurred(), "a client trusting only the old CA no longer verifies the members")
}
