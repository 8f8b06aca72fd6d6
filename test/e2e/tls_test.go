//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
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

// adminTLS is the administrators' client configuration of a TLS cluster.
func (r *rollCluster) adminTLS(ctx context.Context) framework.ClientMaterial {
	m, err := framework.ReadClientSecret(ctx, r.c, r.ns, v1alpha1.AdminClientSecretName(r.name))
	r.g.Expect(err).NotTo(HaveOccurred())
	return m
}

func (r *rollCluster) serverName() string { return framework.ClientServerName(r.ns, r.name) }

// TestTLSDefaults: tls: {} gives operator-managed peer and mutual client
// TLS. etcdctl with the administrators' Secret works over https, plaintext
// fails, a client without a certificate is refused, and every peer URL is
// https.
func TestTLSDefaults(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := newRollCluster(ctx, t, "tls-defaults", func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{}
		framework.AllowE2EClients(c)
	})
	admin := r.adminTLS(ctx)
	svc, err := env.ClientServiceEndpoint(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	https := framework.HTTPS([]string{svc})[0]
	// etcdctl in the cluster, with the administrators' Secret mounted, by
	// the client Service's name, as a user would run it.
	out, err := env.RunEtcdctl(ctx, r.ns, v1alpha1.AdminClientSecretName(r.name),
		"https://"+r.serverName()+":2379", "put", "tls-defaults", "ok")
	r.g.Expect(err).NotTo(HaveOccurred(), out)
	r.g.Expect(out).To(ContainSubstring("OK"))

	cfg, err := admin.TLSConfig(r.serverName(), true)
	r.g.Expect(err).NotTo(HaveOccurred())
	c, err := framework.EtcdTLSClient(cfg, https)
	r.g.Expect(err).NotTo(HaveOccurred())
	defer c.Close()
	get, err := c.Get(ctx, "tls-defaults")
	r.g.Expect(err).NotTo(HaveOccurred())
	r.g.Expect(get.Kvs).To(HaveLen(1))
	list, err := c.MemberList(ctx)
	r.g.Expect(err).NotTo(HaveOccurred())
	r.g.Expect(list.Members).To(HaveLen(3))
	for _, m := range list.Members {
		r.g.Expect(m.PeerURLs[0]).To(HavePrefix("https://"), "peer traffic of %s is TLS", m.Name)
		r.g.Expect(m.ClientURLs[0]).To(HavePrefix("https://"))
	}

	plain, err := framework.EtcdClient(svc)
	r.g.Expect(err).NotTo(HaveOccurred())
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = plain.Get(pctx, "tls-defaults")
	pcancel()
	plain.Close()
	r.g.Expect(err).To(HaveOccurred(), "plaintext fails")

	noCert, err := admin.TLSConfig(r.serverName(), false)
	r.g.Expect(err).NotTo(HaveOccurred())
	anon, err := framework.EtcdTLSClient(noCert, https)
	r.g.Expect(err).NotTo(HaveOccurred())
	actx, acancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = anon.Get(actx, "tls-defaults")
	acancel()
	anon.Close()
	r.g.Expect(err).To(HaveOccurred(), "a client without a certificate is refused")

	cl := r.get(ctx)
	r.g.Expect(cl.Status.TLS).NotTo(BeNil())
	r.g.Expect(cl.Status.TLS.Peer).NotTo(BeNil())
	r.g.Expect(cl.Status.TLS.Client).NotTo(BeNil())
	r.g.Expect(cl.Status.TLS.Peer.CANotAfter).NotTo(BeNil())
	r.g.Expect(cl.Status.TLS.Client.NextRenewal).NotTo(BeNil())

	// A running cluster's TLS cannot be turned off; the API server says so.
	err = r.edit(ctx, func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = nil })
	r.g.Expect(err).To(HaveOccurred(), "turning TLS off is refused")
	r.g.Expect(err.Error()).To(ContainSubstring("spec.tls cannot be removed"))
}

// TestTLSLeafRenewalWithoutRestart: with a five-minute certificate life
// every member's certificate is renewed, each member serves the new one on
// its client port, and no member Pod is re-created or restarted.
func TestTLSLeafRenewalWithoutRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r := newRollCluster(ctx, t, "tls-renew", func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{OperatorManaged: &v1alpha1.OperatorManagedTLS{CertificateDuration: &metav1.Duration{Duration: 5 * time.Minute}}}
	})
	before, err := env.PodStates(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	addrs, err := env.MemberAddresses(ctx, r.ns, r.name, v1alpha1.ClientPort)
	r.g.Expect(err).NotTo(HaveOccurred())
	first := map[string]string{}
	for _, a := range addrs {
		c, err := framework.ServedCertificate(ctx, a)
		r.g.Expect(err).NotTo(HaveOccurred())
		first[a] = c.SerialNumber.String()
	}
	// Due at two thirds of five minutes; the kubelet then brings the new
	// Secret into the Pods within its sync period.
	r.g.Expect(framework.WaitFor(ctx, 8*time.Minute, 2*time.Second, func(ctx context.Context) (bool, error) {
		for _, a := range addrs {
			c, err := framework.ServedCertificate(ctx, a)
			if err != nil || c.SerialNumber.String() == first[a] {
				return false, err
			}
		}
		return true, nil
	})).To(Succeed(), "every member serves a renewed certificate")
	after, err := env.PodStates(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	r.g.Expect(after).To(Equal(before), "no member Pod was re-created or restarted")
	r.rolled(ctx, time.Minute)
	r.expectSentinelEverywhere(ctx)
}

// TestTLSSecretSource: the user's own wildcard certificate serves every
// member on both ports.
func TestTLSSecretSource(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g := NewWithT(t)
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "tls-secret")
	ca, err := certs.NewCA("user ca", time.Now(), 48*time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	dns := append([]string{"*.tls-secret." + ns + ".svc.cluster.local", "*.tls-secret." + ns + ".svc"},
		certs.ServiceNames("tls-secret-client", ns, "cluster.local")...)
	leaf, err := certs.Issue(ca, certs.LeafRequest{CommonName: "tls-secret", DNSNames: dns, Server: true, Client: true, Lifetime: 24 * time.Hour}, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{"user-peer", "user-client"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Data: map[string][]byte{"tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM, "ca.crt": ca.CertPEM}}
		g.Expect(c.Create(ctx, s)).To(Succeed())
	}
	r := &rollCluster{t: t, g: g, c: c, ns: ns, name: "tls-secret"}
	cl := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: ns}, Spec: v1alpha1.EtcdClusterSpec{
		Replicas: ptr.To[int32](3),
		TLS: &v1alpha1.TLSSpec{
			Peer:   v1alpha1.PeerTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "user-peer"}},
			Client: v1alpha1.ClientTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "user-client"}},
		},
	}}
	g.Expect(c.Create(ctx, cl)).To(Succeed())
	r.rolled(ctx, 6*time.Minute)
	r.expectServedFrom(ctx, ca.Cert, leaf.Cert.SerialNumber.String(), v1alpha1.ClientPort, v1alpha1.PeerPort)
	r.expectWorksWithRequestedCertificate(ctx)
}

// TestTLSCertManagerSource: certificates from a cert-manager CA Issuer.
func TestTLSCertManagerSource(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	g := NewWithT(t)
	g.Expect(env.EnsureCertManager(ctx, t)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "tls-cm")
	for _, obj := range certManagerCA(ns) {
		g.Expect(c.Create(ctx, obj)).To(Succeed())
	}
	caSecret := &corev1.Secret{}
	g.Expect(framework.WaitFor(ctx, 3*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "etcd-ca"}, caSecret)
		return err == nil && len(caSecret.Data["tls.crt"]) > 0, err
	})).To(Succeed(), "cert-manager issued the CA")
	caCerts, err := certs.ParseCertificates(caSecret.Data["tls.crt"])
	g.Expect(err).NotTo(HaveOccurred())
	issuer := &v1alpha1.IssuerReference{Name: "etcd-ca", Kind: "Issuer"}
	r := &rollCluster{t: t, g: g, c: c, ns: ns, name: "tls-cm"}
	cl := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: ns}, Spec: v1alpha1.EtcdClusterSpec{
		Replicas: ptr.To[int32](3),
		TLS: &v1alpha1.TLSSpec{
			Peer:   v1alpha1.PeerTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceCertManager, IssuerRef: issuer}},
			Client: v1alpha1.ClientTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceCertManager, IssuerRef: issuer}},
		},
	}}
	g.Expect(c.Create(ctx, cl)).To(Succeed())
	r.rolled(ctx, 8*time.Minute)
	r.expectServedFrom(ctx, caCerts[0], "", v1alpha1.ClientPort, v1alpha1.PeerPort)
	r.expectWorksWithRequestedCertificate(ctx)
}

// expectServedFrom: every member serves, on each of the ports, a certificate of
// ca (with the given serial, when not empty).
func (r *rollCluster) expectServedFrom(ctx context.Context, ca *x509.Certificate, serial string, ports ...int) {
	for _, port := range ports {
		addrs, err := env.MemberAddresses(ctx, r.ns, r.name, port)
		r.g.Expect(err).NotTo(HaveOccurred())
		r.g.Expect(addrs).To(HaveLen(3))
		for _, a := range addrs {
			served, err := framework.ServedCertificate(ctx, a)
			r.g.Expect(err).NotTo(HaveOccurred())
			r.g.Expect(certs.IssuedBy(served, ca)).To(BeTrue(), "%s serves a certificate of the source's CA", a)
			if serial != "" {
				r.g.Expect(served.SerialNumber.String()).To(Equal(serial))
			}
		}
	}
}

// expectWorksWithRequestedCertificate asks the operator for a client
// certificate as kubectl etcd does, and writes and reads with it.
func (r *rollCluster) expectWorksWithRequestedCertificate(ctx context.Context) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: r.name + "-kubectl-etcd", Namespace: r.ns,
		Labels:      v1alpha1.ClusterLabels(r.name),
		Annotations: map[string]string{v1alpha1.IssueClientCertificateAnnotation: "root"}}}
	r.g.Expect(r.c.Create(ctx, s)).To(Succeed())
	m, err := framework.ReadClientSecret(ctx, r.c, r.ns, s.Name)
	r.g.Expect(err).NotTo(HaveOccurred())
	cfg, err := m.TLSConfig(r.serverName(), true)
	r.g.Expect(err).NotTo(HaveOccurred())
	svc, err := env.ClientServiceEndpoint(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	cli, err := framework.EtcdTLSClient(cfg, framework.HTTPS([]string{svc})...)
	r.g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	_, err = cli.Put(ctx, "source", "works")
	r.g.Expect(err).NotTo(HaveOccurred())
}

// TestTLSBadSources: a Secret source naming a Secret that does not exist,
// and one whose Secret has no ca.crt, are each reported on Ready (and
// Stalled) with the TLSSourceInvalid reason and a message naming the Secret
// and what is wrong; no member is created meanwhile, so nothing starts half
// configured. Once the user fixes the Secret the cluster comes up without
// any other edit.
func TestTLSBadSources(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	g := NewWithT(t)
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "tls-bad")
	ca, err := certs.NewCA("user ca", time.Now(), 48*time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	// One wildcard certificate serves both clusters' members and Services.
	dns := []string{"*.tls-missing." + ns + ".svc.cluster.local", "*.tls-missing." + ns + ".svc",
		"*.tls-noca." + ns + ".svc.cluster.local", "*.tls-noca." + ns + ".svc"}
	dns = append(dns, certs.ServiceNames("tls-missing-client", ns, "cluster.local")...)
	dns = append(dns, certs.ServiceNames("tls-noca-client", ns, "cluster.local")...)
	leaf, err := certs.Issue(ca, certs.LeafRequest{CommonName: "tls-bad", DNSNames: dns, Server: true, Client: true, Lifetime: 24 * time.Hour}, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	secretSpec := func(name string) *v1alpha1.TLSSpec {
		return &v1alpha1.TLSSpec{Peer: v1alpha1.PeerTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{
			Source: v1alpha1.CertificateSourceSecret, SecretName: name}}}
	}
	// tls-noca's Secret is there but lacks the CA; tls-missing's is not there.
	noCA := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "noca-peer", Namespace: ns},
		Data: map[string][]byte{"tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM}}
	g.Expect(c.Create(ctx, noCA)).To(Succeed())
	cases := []struct{ cluster, secret, says string }{
		{"tls-missing", "missing-peer", "does not exist"},
		{"tls-noca", "noca-peer", "has no ca.crt"},
	}
	for _, tc := range cases {
		g.Expect(c.Create(ctx, &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: tc.cluster, Namespace: ns},
			Spec: v1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3), TLS: secretSpec(tc.secret)}})).To(Succeed())
	}
	for _, tc := range cases {
		var last string
		g.Expect(framework.WaitFor(ctx, 2*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
			cl := &v1alpha1.EtcdCluster{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.cluster}, cl); err != nil {
				return false, err
			}
			ready := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ReadyCondition)
			stalled := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.StalledCondition)
			if ready == nil || stalled == nil {
				return false, nil
			}
			last = fmt.Sprintf("Ready=%s %s %q; Stalled=%s %s", ready.Status, ready.Reason, ready.Message, stalled.Status, stalled.Reason)
			return ready.Status == metav1.ConditionFalse && ready.Reason == v1alpha1.TLSSourceInvalidReason &&
				strings.Contains(ready.Message, ns+"/"+tc.secret) && strings.Contains(ready.Message, tc.says) &&
				stalled.Status == metav1.ConditionTrue && stalled.Reason == v1alpha1.TLSSourceInvalidReason, nil
		})).To(Succeed(), "%s reports its source: last seen %s", tc.cluster, last)
		var members v1alpha1.EtcdMemberList
		g.Expect(c.List(ctx, &members, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ClusterLabel: tc.cluster})).To(Succeed())
		g.Expect(members.Items).To(BeEmpty(), "%s created no member with an unusable source", tc.cluster)
	}
	pods, err := env.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods.Items).To(BeEmpty(), "no Pod started half configured")

	// The user fixes both Secrets; nothing else is edited.
	g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "missing-peer", Namespace: ns},
		Data: map[string][]byte{"tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM, "ca.crt": ca.CertPEM}})).To(Succeed())
	noCA.Data["ca.crt"] = ca.CertPEM
	g.Expect(c.Update(ctx, noCA)).To(Succeed())
	for _, tc := range cases {
		_, err := framework.WaitForClusterReady(ctx, c, ns, tc.cluster, 6*time.Minute)
		g.Expect(err).NotTo(HaveOccurred(), "%s comes up once its Secret is fixed", tc.cluster)
		r := &rollCluster{t: t, g: g, c: c, ns: ns, name: tc.cluster}
		r.expectServedFrom(ctx, ca.Cert, leaf.Cert.SerialNumber.String(), v1alpha1.PeerPort)
		r.expectWorksWithRequestedCertificate(ctx)
	}
}
