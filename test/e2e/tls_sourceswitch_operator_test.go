//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
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

// TestTLSSourceSwitchOperatorManagedToCertManager: a running 3-member
// cluster with the operator's own CAs (tls: {}) is switched to a
// cert-manager CA Issuer, under the linearizability checker and a writer
// through the client Service. The members' per-member certificates of the
// operator's CA are what the switch begins from: members restart one at a
// time to trust both CAs, take cert-manager's certificate in place, and
// restart to drop the operator's peer CA; no write fails beyond a leader
// change's retries, and at the end a client that trusts only
// cert-manager's CA connects while one that trusts only the operator's
// old client CA is refused.
func TestTLSSourceSwitchOperatorManagedToCertManager(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	g := NewWithT(t)
	g.Expect(env.EnsureCertManager(ctx, t)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "om-switch")
	r := &rollCluster{t: t, g: g, c: c, ns: ns, name: "om-switch"}

	issuerCA, err := certs.NewCA("cert-manager issuer ca", time.Now(), 48*time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "issuer-ca", Namespace: ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": issuerCA.CertPEM, "tls.key": issuerCA.KeyPEM}})).To(Succeed())
	g.Expect(c.Create(ctx, &cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Name: "etcd-ca", Namespace: ns},
		Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: "issuer-ca"}}}})).To(Succeed())

	cl := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: ns}, Spec: v1alpha1.EtcdClusterSpec{
		Replicas: ptr.To[int32](3),
		TLS:      &v1alpha1.TLSSpec{},
	}}
	framework.AllowE2EClients(cl)
	g.Expect(c.Create(ctx, cl)).To(Succeed())
	r.rolled(ctx, 6*time.Minute)
	operatorCA := func(section string) *certs.KeyPair {
		s := &corev1.Secret{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.CASecretName(r.name, section)}, s)).To(Succeed())
		kp, err := certs.ParseKeyPair(s.Data["tls.crt"], s.Data["tls.key"])
		g.Expect(err).NotTo(HaveOccurred())
		return kp
	}
	oldPeer, oldClient := operatorCA(v1alpha1.TLSSectionPeer), operatorCA(v1alpha1.TLSSectionClient)
	r.expectServedFrom(ctx, oldPeer.Cert, "", v1alpha1.PeerPort)
	r.expectServedFrom(ctx, oldClient.Cert, "", v1alpha1.ClientPort)
	before := names(r.members(ctx))

	var reasons []string
	r.rollSourceCAChange(ctx, before, func() {
		issuer := &v1alpha1.IssuerReference{Name: "etcd-ca", Kind: "Issuer"}
		g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) {
			c.Spec.TLS.Peer.CertificateSourceSpec = v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceCertManager, IssuerRef: issuer}
			c.Spec.TLS.Client.CertificateSourceSpec = v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceCertManager, IssuerRef: issuer}
		})).To(Succeed(), "a running cluster's source may switch from OperatorManaged to cert-manager")
		g.Expect(framework.WaitFor(ctx, 3*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
			ready := meta.FindStatusCondition(r.get(ctx).Status.Conditions, v1alpha1.ReadyCondition)
			if ready != nil && (len(reasons) == 0 || reasons[len(reasons)-1] != ready.Reason) {
				reasons = append(reasons, ready.Reason)
			}
			return ready != nil && ready.Reason == v1alpha1.TLSSourceSwitchingReason &&
				strings.Contains(ready.Message, "from the operator's CA to cert-manager Issuer etcd-ca"), nil
		})).To(Succeed(), "Ready says TLSSourceSwitching: seen %v", reasons)
	})
	t.Logf("Ready reasons seen as the switch began: %v", reasons)

	r.expectServedFrom(ctx, issuerCA.Cert, "", v1alpha1.ClientPort, v1alpha1.PeerPort)
	r.expectPeersTrustOnly(ctx, issuerCA.Cert)
	r.expectEventsOf(ctx, "TLSSourceSwitchStarted", "TLSSourceSwitched")
	ready := meta.FindStatusCondition(r.get(ctx).Status.Conditions, v1alpha1.ReadyCondition)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))

	// A client that trusts cert-manager's CA alone connects, with the
	// client certificate the operator issued on request (its client CA
	// still signs client certificates: mutual TLS is unchanged).
	m, err := framework.ReadClientSecret(ctx, c, ns, framework.E2EClientSecretName(r.name))
	g.Expect(err).NotTo(HaveOccurred())
	m.CAPEM = issuerCA.CertPEM
	cfg, err := m.TLSConfig(r.serverName(), true)
	g.Expect(err).NotTo(HaveOccurred())
	svc, err := env.ClientServiceEndpoint(ctx, ns, r.name)
	g.Expect(err).NotTo(HaveOccurred())
	eps, err := env.MemberEndpoints(ctx, ns, r.name)
	g.Expect(err).NotTo(HaveOccurred())
	for _, ep := range framework.HTTPS(append(eps, svc)) {
		cli, err := framework.EtcdTLSClient(cfg, ep)
		g.Expect(err).NotTo(HaveOccurred())
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = cli.Put(pctx, "switched", ep)
		pcancel()
		cli.Close()
		g.Expect(err).NotTo(HaveOccurred(), "a client trusting only the new CA writes through %s", ep)
	}
	// And one that trusts only the operator's old client CA, which
	// signed what the members served before, is refused.
	m.CAPEM = oldClient.CertPEM
	old, err := m.TLSConfig(r.serverName(), true)
	g.Expect(err).NotTo(HaveOccurred())
	cli, err := framework.EtcdTLSClient(old, framework.HTTPS([]string{svc})...)
	g.Expect(err).NotTo(HaveOccurred())
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = cli.Put(pctx, "switched", "old ca")
	pcancel()
	cli.Close()
	g.Expect(err).To(HaveOccurred(), "a client trusting only the operator's old CA no longer verifies the members")
}
