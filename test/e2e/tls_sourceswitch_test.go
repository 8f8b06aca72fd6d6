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

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// TestTLSSourceSwitchSecretToCertManager: a running 3-member cluster whose
// certificates come from the user's Secrets is switched to a cert-manager
// CA Issuer of another CA, under the linearizability checker and a writer
// through the client Service (issue 28, acceptance 4). The switch is the
// three-pass roll of a source CA change: members restart one at a time
// (each twice), no write fails beyond a leader change's retries, and at
// the end every member serves cert-manager's certificate, trusts its CA
// alone on the peer side, and a client that trusts only that CA connects.
func TestTLSSourceSwitchSecretToCertManager(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	g := NewWithT(t)
	g.Expect(env.EnsureCertManager(ctx, t)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "src-switch")
	r := &rollCluster{t: t, g: g, c: c, ns: ns, name: "src-switch"}

	// The user's Secrets, of their own CA.
	userCA, err := certs.NewCA("user ca", time.Now(), 48*time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	dns := append([]string{"*.src-switch." + ns + ".svc.cluster.local", "*.src-switch." + ns + ".svc"},
		certs.ServiceNames("src-switch-client", ns, "cluster.local")...)
	userLeaf, err := certs.Issue(userCA, certs.LeafRequest{CommonName: "src-switch", DNSNames: dns, Server: true, Client: true, Lifetime: 24 * time.Hour}, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{"user-peer", "user-client"} {
		g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Data: map[string][]byte{"tls.crt": userLeaf.CertPEM, "tls.key": userLeaf.KeyPEM, "ca.crt": userCA.CertPEM}})).To(Succeed())
	}
	// cert-manager's CA Issuer, of another CA.
	issuerCA, _ := newCAIssuer(ctx, g, c, ns, "cert-manager issuer ca")

	cl := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: ns}, Spec: v1alpha1.EtcdClusterSpec{
		Replicas: ptr.To[int32](3),
		TLS: &v1alpha1.TLSSpec{
			Peer:   v1alpha1.PeerTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "user-peer"}},
			Client: v1alpha1.ClientTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "user-client"}},
		},
	}}
	framework.AllowE2EClients(cl)
	g.Expect(c.Create(ctx, cl)).To(Succeed())
	r.rolled(ctx, 6*time.Minute)
	r.expectServedFrom(ctx, userCA.Cert, userLeaf.Cert.SerialNumber.String(), v1alpha1.ClientPort, v1alpha1.PeerPort)
	before := names(r.members(ctx))

	var reasons []string
	r.rollSourceCAChange(ctx, before, func() {
		issuer := &v1alpha1.IssuerReference{Name: "etcd-ca", Kind: "Issuer"}
		g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) {
			c.Spec.TLS.Peer.CertificateSourceSpec = v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceCertManager, IssuerRef: issuer}
			c.Spec.TLS.Client.CertificateSourceSpec = v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceCertManager, IssuerRef: issuer}
		})).To(Succeed(), "a running cluster's source may switch from a Secret to cert-manager")
		// The switch says so on Ready while it runs.
		g.Expect(framework.WaitFor(ctx, 3*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
			ready := meta.FindStatusCondition(r.get(ctx).Status.Conditions, v1alpha1.ReadyCondition)
			if ready != nil && (len(reasons) == 0 || reasons[len(reasons)-1] != ready.Reason) {
				reasons = append(reasons, ready.Reason)
			}
			return ready != nil && ready.Reason == v1alpha1.TLSSourceSwitchingReason && strings.Contains(ready.Message, "cert-manager Issuer etcd-ca"), nil
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
	// client certificate the operator issued on request.
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
	// And one that trusts only the user's old CA is refused.
	m.CAPEM = userCA.CertPEM
	old, err := m.TLSConfig(r.serverName(), true)
	g.Expect(err).NotTo(HaveOccurred())
	cli, err := framework.EtcdTLSClient(old, framework.HTTPS([]string{svc})...)
	g.Expect(err).NotTo(HaveOccurred())
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = cli.Put(pctx, "switched", "old ca")
	pcancel()
	cli.Close()
	g.Expect(err).To(HaveOccurred(), "a client trusting only the old CA no longer verifies the members")
}
