//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
	"github.com/quorumctl/etcd-operator/test/linearizability"
)

// TestSecretSourceCAChange: the user replaces the certificate of their own
// Secret source with one from a new CA, under the linearizability checker
// and a writer through the client Service. The clients follow a client
// certificate Secret the operator issued on request, whose ca.crt holds
// the old and the new CA from pass 1 on, as docs/tls.md says. The
// operator rolls the change in three passes: members restart one at a
// time (each twice), no write fails beyond a leader change's retries, and
// at the end members serve the new certificate and trust the new CA alone.
func TestSecretSourceCAChange(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	g := NewWithT(t)
	g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "src-ca")
	r := &rollCluster{t: t, g: g, c: c, ns: ns, name: "src-ca"}
	dns := append([]string{"*.src-ca." + ns + ".svc.cluster.local", "*.src-ca." + ns + ".svc"},
		certs.ServiceNames("src-ca-client", ns, "cluster.local")...)
	issue := func(cn string) (*certs.KeyPair, *certs.KeyPair) {
		ca, err := certs.NewCA(cn, time.Now(), 48*time.Hour)
		g.Expect(err).NotTo(HaveOccurred())
		leaf, err := certs.Issue(ca, certs.LeafRequest{CommonName: "src-ca", DNSNames: dns, Server: true, Client: true, Lifetime: 24 * time.Hour}, time.Now())
		g.Expect(err).NotTo(HaveOccurred())
		return ca, leaf
	}
	oldCA, oldLeaf := issue("user ca 1")
	newCA, newLeaf := issue("user ca 2")
	// A certificate of the new CA's name that the new CA did not sign.
	_, strayLeaf := issue("user ca 2")

	put := func(name string, leaf *certs.KeyPair, ca ...[]byte) {
		data := map[string][]byte{"tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM, "ca.crt": []byte(strings.Join(func() []string {
			var out []string
			for _, b := range ca {
				out = append(out, string(b))
			}
			return out
		}(), ""))}
		s := &corev1.Secret{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)
		if err != nil {
			s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}
			g.Expect(c.Create(ctx, s)).To(Succeed())
			return
		}
		s.Data = data
		g.Expect(c.Update(ctx, s)).To(Succeed())
	}
	for _, name := range []string{"user-peer", "user-client"} {
		put(name, oldLeaf, oldCA.CertPEM)
	}
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
	before := names(r.members(ctx))

	// A new certificate that its new ca.crt did not sign is refused and
	// changes nothing.
	put("user-peer", strayLeaf, newCA.CertPEM)
	var last string
	g.Expect(framework.WaitFor(ctx, 2*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		ready := meta.FindStatusCondition(r.get(ctx).Status.Conditions, v1alpha1.ReadyCondition)
		if ready == nil {
			return false, nil
		}
		last = ready.Reason + ": " + ready.Message
		return ready.Reason == v1alpha1.TLSSourceInvalidReason && strings.Contains(ready.Message, ns+"/user-peer"), nil
	})).To(Succeed(), "the stray certificate is refused: last seen %s", last)
	r.expectServedFrom(ctx, oldCA.Cert, oldLeaf.Cert.SerialNumber.String(), v1alpha1.ClientPort, v1alpha1.PeerPort)
	put("user-peer", oldLeaf, oldCA.CertPEM)
	r.rolled(ctx, 2*time.Minute)

	r.rollSourceCAChange(ctx, before, func() {
		for _, name := range []string{"user-peer", "user-client"} {
			put(name, newLeaf, newCA.CertPEM)
		}
	})
	r.expectServedFrom(ctx, newCA.Cert, newLeaf.Cert.SerialNumber.String(), v1alpha1.ClientPort, v1alpha1.PeerPort)
	r.expectPeersTrustOnly(ctx, newCA.Cert)
}

// expectPeersTrustOnly: every member's peer trust bundle is ca alone.
func (r *rollCluster) expectPeersTrustOnly(ctx context.Context, ca *x509.Certificate) {
	for _, m := range r.members(ctx) {
		cm := &corev1.ConfigMap{}
		r.g.Expect(r.c.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: m.Spec.TLS.Peer.TrustBundle}, cm)).To(Succeed())
		b, err := certs.ParseBundle([]byte(cm.Data["ca.crt"]))
		r.g.Expect(err).NotTo(HaveOccurred())
		r.g.Expect(b).To(HaveLen(1), "%s trusts one peer CA", m.Name)
		r.g.Expect(b[0].Equal(ca)).To(BeTrue(), "%s trusts the new peer CA", m.Name)
	}
}

// rollSourceCAChange makes the change of a source's CA under the
// linearizability checker and a writer through the client Service, whose
// clients follow a client certificate Secret the operator issued on
// request (mutual TLS is the default): its ca.crt holds the old and the
// new CA from pass 1 on, and the clients re-read it as a well-behaved
// client re-reads its files. It waits for the three passes to end and
// checks that members restarted one at a time, each of before, and that no
// write failed beyond a leader change's retries.
func (r *rollCluster) rollSourceCAChange(ctx context.Context, before []string, change func()) {
	t, g, c, ns := r.t, r.g, r.c, r.ns
	_, err := framework.RequestClientCertificate(ctx, c, ns, r.name, "root")
	g.Expect(err).NotTo(HaveOccurred())
	follow, err := framework.FollowClientSecret(ctx, c, ns, framework.E2EClientSecretName(r.name), r.serverName())
	g.Expect(err).NotTo(HaveOccurred())
	eps, err := env.MemberEndpoints(ctx, ns, r.name)
	g.Expect(err).NotTo(HaveOccurred())
	svc, err := env.ClientServiceEndpoint(ctx, ns, r.name)
	g.Expect(err).NotTo(HaveOccurred())
	checker, err := linearizability.Start(linearizability.Config{Endpoints: framework.HTTPS(append(eps, svc)), ClientsPerEndpoint: 2, TLS: follow})
	g.Expect(err).NotTo(HaveOccurred())
	writer, err := startServiceWriter(follow, framework.HTTPS([]string{svc})[0])
	g.Expect(err).NotTo(HaveOccurred())
	watch := env.WatchMembersDownTLS(ctx, ns, r.name, follow)
	defer func() { _, _ = watch.Stop() }()

	began := time.Now()
	change()
	var phases []string
	g.Expect(framework.WaitFor(ctx, 12*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		cl := r.get(ctx)
		st := cl.Status.TLS
		if st == nil || st.Peer == nil || st.Client == nil {
			return false, nil
		}
		phase := st.Peer.Rotation + "/" + st.Client.Rotation
		if len(phases) == 0 || phases[len(phases)-1] != phase {
			phases = append(phases, phase)
		}
		if len(phases) < 2 || st.Peer.Rotation != "" || st.Client.Rotation != "" {
			return false, nil
		}
		_, err := framework.WaitForClusterReady(ctx, c, ns, r.name, time.Second)
		return err == nil, nil
	})).To(Succeed(), "the rotation ended: %v", phases)
	took := time.Since(began)
	t.Logf("rotated in %s through %v", took.Round(time.Second), phases)

	writer.Stop()
	rep, err := checker.Stop().Check(linearizability.CheckOptions{VisualizationPath: filepath.Join(t.TempDir(), "history.html")})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("linearizability: %s", rep)
	seen, err := watch.Stop()
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("members down, run by run:\n%s", seen.Timeline())
	writer.mu.Lock()
	t.Logf("service writer: %d writes, %d retries, longest gap between writes %s", writer.written, writer.retried, writer.longest.Round(time.Millisecond))
	g.Expect(writer.failed).To(BeEmpty(), "no write through the Service failed beyond a leader change's retries")
	writer.mu.Unlock()

	g.Expect(rep.Err()).NotTo(HaveOccurred(), "the history is linearizable")
	g.Expect(rep.Acknowledged).To(BeNumerically(">", 100), "writes went on throughout")
	g.Expect(seen.MaxDown).To(BeNumerically("<=", 1), "at no sample were two members down: %s", seen)
	g.Expect(seen.SeenDown()).To(ConsistOf(before), "every member restarted: %s", seen)
	g.Expect(strings.Join(phases, " ")).To(ContainSubstring(v1alpha1.CARotationTrustingNewCA), "through the first pass")
	g.Expect(strings.Join(phases, " ")).To(ContainSubstring(v1alpha1.CARotationSwitchingCertificates), "through the second pass")

	g.Expect(names(r.members(ctx))).To(Equal(before), "the same members, restarted in place")
	r.expectEventsOf(ctx, "CARotationStarted", "CARotationSwitching", "CARotationDroppingOldCA", "CARotationCompleted")
}

// TestCertManagerSourceCAChange: the CA behind a cert-manager CA Issuer is
// replaced and the cluster's Certificates renewed (as `cmctl renew` does):
// the issued Secrets' ca.crt changes, and the operator rolls it in three
// passes as for a user's Secret.
func TestCertManagerSourceCAChange(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	g := NewWithT(t)
	g.Expect(env.EnsureCertManager(ctx, t)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "cm-ca")
	r := &rollCluster{t: t, g: g, c: c, ns: ns, name: "cm-ca"}
	oldCA, caSecret := newCAIssuer(ctx, g, c, ns, "issuer ca 1")
	issuer := &v1alpha1.IssuerReference{Name: "etcd-ca", Kind: "Issuer"}
	cl := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: ns}, Spec: v1alpha1.EtcdClusterSpec{
		Replicas: ptr.To[int32](3),
		TLS: &v1alpha1.TLSSpec{
			Peer:   v1alpha1.PeerTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceCertManager, IssuerRef: issuer}},
			Client: v1alpha1.ClientTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceCertManager, IssuerRef: issuer}},
		},
	}}
	framework.AllowE2EClients(cl)
	g.Expect(c.Create(ctx, cl)).To(Succeed())
	r.rolled(ctx, 8*time.Minute)
	r.expectServedFrom(ctx, oldCA.Cert, "", v1alpha1.ClientPort, v1alpha1.PeerPort)
	before := names(r.members(ctx))

	newCA, err := certs.NewCA("issuer ca 2", time.Now(), 48*time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	r.rollSourceCAChange(ctx, before, func() {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(caSecret), caSecret)).To(Succeed())
		caSecret.Data = map[string][]byte{"tls.crt": newCA.CertPEM, "tls.key": newCA.KeyPEM}
		g.Expect(c.Update(ctx, caSecret)).To(Succeed())
		for _, name := range []string{r.name + "-peer", r.name + "-client"} {
			// What `cmctl renew` does: cert-manager reissues a Certificate
			// whose Issuing condition is set.
			g.Expect(retryOnConflict(ctx, func() error {
				crt := &cmapi.Certificate{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, crt); err != nil {
					return err
				}
				crt.Status.Conditions = append(crt.Status.Conditions, cmapi.CertificateCondition{
					Type: cmapi.CertificateConditionIssuing, Status: cmmeta.ConditionTrue,
					Reason: "ManuallyTriggered", Message: "the e2e test renews it after replacing the Issuer's CA"})
				return c.Status().Update(ctx, crt)
			})).To(Succeed())
		}
	})
	r.expectServedFrom(ctx, newCA.Cert, "", v1alpha1.ClientPort, v1alpha1.PeerPort)
	r.expectPeersTrustOnly(ctx, newCA.Cert)
}

func retryOnConflict(ctx context.Context, f func() error) error {
	return framework.WaitFor(ctx, 30*time.Second, 200*time.Millisecond, func(context.Context) (bool, error) {
		err := f()
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// newCAIssuer makes a CA of its own, keeps it in the Secret issuer-ca and
// creates the cert-manager CA Issuer etcd-ca that signs with it. It returns
// the CA and the Secret, which a test may update to change the CA.
func newCAIssuer(ctx context.Context, g Gomega, c client.Client, ns, commonName string) (*certs.KeyPair, *corev1.Secret) {
	ca, err := certs.NewCA(commonName, time.Now(), 48*time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "issuer-ca", Namespace: ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": ca.CertPEM, "tls.key": ca.KeyPEM}}
	g.Expect(c.Create(ctx, secret)).To(Succeed())
	g.Expect(c.Create(ctx, &cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Name: "etcd-ca", Namespace: ns},
		Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: "issuer-ca"}}}})).To(Succeed())
	return ca, secret
}
