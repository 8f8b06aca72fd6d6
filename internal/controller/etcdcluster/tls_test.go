package etcdcluster

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
)

// createTLSCluster creates a cluster with spec.tls, as a user would: TLS is
// set at creation or never.
func (h *harness) createTLSCluster(replicas int32, spec *v1alpha1.TLSSpec) {
	h.t.Helper()
	c := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: testName, Namespace: testNS, UID: types.UID("uid-" + testName), Generation: 1},
		Spec:       v1alpha1.EtcdClusterSpec{Replicas: ptr.To(replicas), TLS: spec},
	}
	h.g.Expect(h.c.Create(context.Background(), c)).To(Succeed())
}

func (h *harness) secret(name string) *corev1.Secret {
	h.t.Helper()
	s := &corev1.Secret{}
	h.g.Expect(h.c.Get(context.Background(), clientKey(name), s)).To(Succeed())
	return s
}

func (h *harness) objectExists(obj client.Object, name string) bool {
	return h.c.Get(context.Background(), clientKey(name), obj) == nil
}

func (h *harness) bundle(name string) certs.Bundle {
	h.t.Helper()
	cm := &corev1.ConfigMap{}
	h.g.Expect(h.c.Get(context.Background(), clientKey(name), cm)).To(Succeed())
	h.g.Expect(cm.Immutable).To(Equal(ptr.To(true)))
	b, err := certs.ParseBundle([]byte(cm.Data[etcdaccess.TrustBundleKey]))
	h.g.Expect(err).NotTo(HaveOccurred())
	return b
}

func (h *harness) leaf(member, section string) *certs.KeyPair {
	h.t.Helper()
	s := h.secret(v1alpha1.MemberTLSSecretName(member))
	kp, err := certs.ParseKeyPair(s.Data[section+".crt"], s.Data[section+".key"])
	h.g.Expect(err).NotTo(HaveOccurred())
	return kp
}

// seed is the only member of a cluster that is being created.
func (h *harness) seed() *v1alpha1.EtcdMember {
	h.t.Helper()
	ms := h.members()
	h.g.Expect(ms).To(HaveLen(1))
	return &ms[0]
}

func TestTLS_OperatorManagedDefaults(t *testing.T) {
	h := newHarness(t)
	h.createTLSCluster(3, &v1alpha1.TLSSpec{Client: v1alpha1.ClientTLS{Mutual: ptr.To(true)}})
	h.reconcile()
	m := h.seed()
	h.g.Expect(m.Spec.PeerURL).To(HavePrefix("https://"))
	h.g.Expect(m.Spec.ClientURL).To(HavePrefix("https://"))
	h.g.Expect(m.Spec.TLS.Client.ClientCertAuth).To(BeTrue())
	h.reconcile()

	peerCA := h.bundle(m.Spec.TLS.Peer.TrustBundle)
	clientCA := h.bundle(m.Spec.TLS.Client.TrustBundle)
	h.g.Expect(peerCA).To(HaveLen(1))
	h.g.Expect(clientCA).To(HaveLen(1))
	h.g.Expect(peerCA[0].Equal(clientCA[0])).To(BeFalse(), "a CA per section")
	for _, s := range []string{v1alpha1.CASecretName(testName, "peer"), v1alpha1.CASecretName(testName, "client")} {
		h.g.Expect(h.secret(s).Type).To(Equal(corev1.SecretTypeTLS))
	}

	host := m.Name + ".demo.ns.svc.cluster.local"
	for section, trust := range map[string]certs.Bundle{"peer": peerCA, "client": clientCA} {
		leaf := h.leaf(m.Name, section).Cert
		for _, name := range []string{host, "demo", "demo.ns", "demo.ns.svc", "demo.ns.svc.cluster.local",
			"demo-client", "demo-client.ns", "demo-client.ns.svc", "demo-client.ns.svc.cluster.local", "localhost", "127.0.0.1"} {
			h.g.Expect(certs.Verify(leaf, trust, name, h.now)).To(Succeed(), "%s certificate names %s", section, name)
		}
		h.g.Expect(leaf.ExtKeyUsage).To(ConsistOf(x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth))
	}

	// The operator's and the administrators' client certificates, with
	// the client CA beside them.
	for _, name := range []string{v1alpha1.OperatorClientSecretName(testName), v1alpha1.AdminClientSecretName(testName)} {
		s := h.secret(name)
		kp, err := certs.ParseKeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
		h.g.Expect(err).NotTo(HaveOccurred(), name)
		h.g.Expect(kp.Cert.ExtKeyUsage).To(ConsistOf(x509.ExtKeyUsageClientAuth), name)
		h.g.Expect(certs.Verify(kp.Cert, clientCA, "", h.now)).To(Succeed(), name)
		trust, err := certs.ParseBundle(s.Data[etcdaccess.TrustBundleKey])
		h.g.Expect(err).NotTo(HaveOccurred())
		h.g.Expect(trust.Equal(clientCA)).To(BeTrue(), "%s carries the client CA", name)
	}

	st := h.cluster().Status.TLS
	h.g.Expect(st).NotTo(BeNil())
	h.g.Expect(st.Client.TrustBundle).To(Equal(m.Spec.TLS.Client.TrustBundle))
	h.g.Expect(st.Peer.CANotAfter.Time).To(BeTemporally("~", h.now.Add(v1alpha1.DefaultCADuration), time.Hour))
	h.g.Expect(st.Peer.NextRenewal).NotTo(BeNil())
}

// Without mutual TLS the members do not ask for client certificates, so
// there is no administrators' certificate to hand out either; the
// operator still keeps its own (it is what the snapshot Jobs mount).
func TestTLS_WithoutMutualTLS(t *testing.T) {
	h := newHarness(t)
	h.createTLSCluster(1, &v1alpha1.TLSSpec{Client: v1alpha1.ClientTLS{Mutual: ptr.To(false)}})
	h.reconcile()
	h.reconcile()
	m := h.seed()
	h.g.Expect(m.Spec.TLS.Client.ClientCertAuth).To(BeFalse())
	p := pod.Build(pod.Params{Member: m, ClusterDomain: testDomain})
	for _, a := range p.Spec.Containers[0].Args {
		h.g.Expect(a).NotTo(HavePrefix("--trusted-ca-file"), "etcd would demand client certificates")
		h.g.Expect(a).NotTo(HavePrefix("--client-cert-auth"))
	}
	h.g.Expect(h.objectExists(&corev1.Secret{}, v1alpha1.OperatorClientSecretName(testName))).To(BeTrue())
}

// Leaves are renewed at two thirds of their lifetime, in place: the member's
// spec, and so its Pod's template hash, stay as they are.
func TestTLS_RenewalRestartsNothing(t *testing.T) {
	h := newHarness(t)
	h.createTLSCluster(1, &v1alpha1.TLSSpec{OperatorManaged: &v1alpha1.OperatorManagedTLS{
		CertificateDuration: &metav1.Duration{Duration: time.Hour}}})
	h.reconcile()
	res := h.reconcile()
	m := h.seed()
	before := h.leaf(m.Name, "client").Cert
	due := certs.RenewalTime(before)
	h.g.Expect(res.RequeueAfter).To(BeNumerically("<=", due.Sub(h.now)+time.Second), "the pass comes back when the renewal is due")
	hash := pod.TemplateHash(m)

	h.now = due.Add(-time.Minute)
	h.reconcile()
	h.g.Expect(h.leaf(m.Name, "client").Cert.Equal(before)).To(BeTrue(), "not yet due")

	h.now = due.Add(time.Second)
	h.reconcile()
	after := h.leaf(m.Name, "client").Cert
	h.g.Expect(after.Equal(before)).To(BeFalse(), "renewed")
	h.g.Expect(after.NotAfter.After(before.NotAfter)).To(BeTrue())
	h.g.Expect(certs.Verify(after, h.bundle(m.Spec.TLS.Client.TrustBundle), m.Name+".demo.ns.svc", h.now)).To(Succeed(),
		"the trust the member started with still holds")
	h.g.Expect(pod.TemplateHash(h.member(m.Name))).To(Equal(hash), "a renewal changes no template")
	h.g.Expect(h.member(m.Name).Spec.TLS).To(Equal(m.Spec.TLS))
}

func TestTLS_SecretSourceProblemsAreNamed(t *testing.T) {
	h := newHarness(t)
	h.createTLSCluster(3, &v1alpha1.TLSSpec{Peer: v1alpha1.PeerTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{
		Source: v1alpha1.CertificateSourceSecret, SecretName: "my-peer-tls"}}})
	h.reconcile()
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.TLSSourceInvalidReason))
	h.g.Expect(ready.Message).To(ContainSubstring("Secret ns/my-peer-tls (spec.tls.peer.secretName): does not exist"))
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(h.members()).To(BeEmpty(), "nothing starts half-configured")

	ca, err := certs.NewCA("user ca", h.now, 24*time.Hour)
	h.g.Expect(err).NotTo(HaveOccurred())
	right, err := certs.Issue(ca, certs.LeafRequest{CommonName: "x", DNSNames: []string{"*.demo.ns.svc.cluster.local", "*.demo.ns.svc"},
		Server: true, Client: true, Lifetime: time.Hour}, h.now)
	h.g.Expect(err).NotTo(HaveOccurred())
	s := &corev1.Secret{Data: map[string][]byte{"tls.crt": right.CertPEM, "tls.key": right.KeyPEM}}
	s.Name, s.Namespace = "my-peer-tls", testNS
	h.g.Expect(h.c.Create(context.Background(), s)).To(Succeed())
	h.reconcile()
	ready = h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.TLSSourceInvalidReason))
	h.g.Expect(ready.Message).To(ContainSubstring("Secret ns/my-peer-tls (spec.tls.peer.secretName): has no ca.crt"))
	h.g.Expect(h.members()).To(BeEmpty())

	wrong, err := certs.Issue(ca, certs.LeafRequest{CommonName: "x", DNSNames: []string{"elsewhere.example"},
		Server: true, Client: true, Lifetime: time.Hour}, h.now)
	h.g.Expect(err).NotTo(HaveOccurred())
	s.Data = map[string][]byte{"tls.crt": wrong.CertPEM, "tls.key": wrong.KeyPEM, "ca.crt": ca.CertPEM}
	h.g.Expect(h.c.Update(context.Background(), s)).To(Succeed())
	h.reconcile()
	ready = h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.TLSSourceInvalidReason))
	h.g.Expect(ready.Message).To(ContainSubstring("does not serve new members"))
	h.g.Expect(ready.Message).To(ContainSubstring("*.demo.ns.svc.cluster.local"))
	h.g.Expect(h.members()).To(BeEmpty())

	s.Data = map[string][]byte{"tls.crt": right.CertPEM, "tls.key": right.KeyPEM, "ca.crt": ca.CertPEM}
	h.g.Expect(h.c.Update(context.Background(), s)).To(Succeed())
	h.reconcile()
	h.reconcile()
	m := h.seed()
	h.g.Expect(h.bundle(m.Spec.TLS.Peer.TrustBundle).Contains(ca.Cert)).To(BeTrue(), "members trust the user's CA")
	h.g.Expect(h.leaf(m.Name, "peer").Cert.Equal(right.Cert)).To(BeTrue(), "members serve the user's certificate")
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).NotTo(Equal(v1alpha1.TLSSourceInvalidReason))
}

func TestTLS_CertManagerSourceWaitsForTheCertificate(t *testing.T) {
	h := newHarness(t)
	issuer := &v1alpha1.IssuerReference{Name: "ca-issuer", Kind: "ClusterIssuer"}
	h.createTLSCluster(3, &v1alpha1.TLSSpec{Client: v1alpha1.ClientTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{
		Source: v1alpha1.CertificateSourceCertManager, IssuerRef: issuer}}})
	h.reconcile()
	cert := &cmapi.Certificate{}
	h.g.Expect(h.c.Get(context.Background(), clientKey("demo-client"), cert)).To(Succeed())
	h.g.Expect(cert.Spec.IssuerRef.Name).To(Equal("ca-issuer"))
	h.g.Expect(cert.Spec.IssuerRef.Kind).To(Equal("ClusterIssuer"))
	h.g.Expect(cert.Spec.DNSNames).To(ContainElements("*.demo.ns.svc.cluster.local", "demo-client.ns.svc", "localhost"))
	h.g.Expect(cert.Spec.SecretTemplate.Labels).To(HaveKeyWithValue(v1alpha1.ClusterLabel, testName), "the operator's cache sees it")
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.TLSSourcePendingReason))
	h.g.Expect(ready.Message).To(ContainSubstring("demo-client-certmanager"))
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionFalse), "pending is not stuck")
	h.g.Expect(h.members()).To(BeEmpty(), "no member before its certificate")

	// cert-manager issues.
	ca, err := certs.NewCA("cm ca", h.now, 24*time.Hour)
	h.g.Expect(err).NotTo(HaveOccurred())
	leaf, err := certs.Issue(ca, certs.LeafRequest{CommonName: "x", DNSNames: cert.Spec.DNSNames, Server: true, Client: true, Lifetime: time.Hour}, h.now)
	h.g.Expect(err).NotTo(HaveOccurred())
	s := &corev1.Secret{Data: map[string][]byte{"tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM, "ca.crt": ca.CertPEM}}
	s.Name, s.Namespace, s.Labels = cert.Spec.SecretName, testNS, cert.Spec.SecretTemplate.Labels
	h.g.Expect(h.c.Create(context.Background(), s)).To(Succeed())
	h.reconcile()
	h.reconcile()
	m := h.seed()
	trust := h.bundle(m.Spec.TLS.Client.TrustBundle)
	h.g.Expect(trust.Contains(ca.Cert)).To(BeTrue(), "members trust cert-manager's CA for the servers")
	h.g.Expect(h.leaf(m.Name, "client").Cert.Equal(leaf.Cert)).To(BeTrue())
	// With mutual TLS (the default) the operator presents a certificate of
	// its own client CA, which the members trust beside cert-manager's.
	op := h.secret(v1alpha1.OperatorClientSecretName(testName))
	kp, err := certs.ParseKeyPair(op.Data[corev1.TLSCertKey], op.Data[corev1.TLSPrivateKeyKey])
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(certs.Verify(kp.Cert, trust, "", h.now)).To(Succeed())
	h.g.Expect(h.objectExists(&corev1.Secret{}, v1alpha1.AdminClientSecretName(testName))).To(BeFalse(),
		"the administrators' certificate comes with operator-managed client TLS only")
}

func TestTLS_ClientCertificateIssuedOnRequest(t *testing.T) {
	h := newHarness(t)
	h.createTLSCluster(1, &v1alpha1.TLSSpec{})
	h.reconcile()
	req := &corev1.Secret{}
	req.Name, req.Namespace = "demo-kubectl-etcd", testNS
	req.Labels = v1alpha1.ClusterLabels(testName)
	req.Annotations = map[string]string{v1alpha1.IssueClientCertificateAnnotation: "alice"}
	h.g.Expect(h.c.Create(context.Background(), req)).To(Succeed())
	h.reconcile()
	got := h.secret("demo-kubectl-etcd")
	kp, err := certs.ParseKeyPair(got.Data[corev1.TLSCertKey], got.Data[corev1.TLSPrivateKeyKey])
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(kp.Cert.Subject.CommonName).To(Equal("alice"))
	trust := h.bundle(h.seed().Spec.TLS.Client.TrustBundle)
	h.g.Expect(certs.Verify(kp.Cert, trust, "", h.now)).To(Succeed(), "the members accept it")
}

// The operator dials a TLS cluster over https with the cluster's client
// trust and its own certificate.
func TestTLS_OperatorDialsWithTheClustersTLS(t *testing.T) {
	h := newHarness(t)
	h.createTLSCluster(1, &v1alpha1.TLSSpec{})
	h.reconcile()
	h.reconcile()
	m := h.seed()
	h.readyPod(m.Name)
	h.etcd.AddVoter(m.Name, m.Spec.PeerURL, m.Spec.ClientURL)
	h.reconcile()
	h.reconcile()
	dialed := false
	for _, c := range h.etcd.Calls {
		if c.Op != etcd.OpDial {
			continue
		}
		dialed = true
		h.g.Expect(c.Endpoints).To(HaveEach(HavePrefix("https://")))
		h.g.Expect(c.Dial.TLS).NotTo(BeNil())
		h.g.Expect(c.Dial.TLS.Certificates).To(HaveLen(1), "the operator's client certificate")
	}
	h.g.Expect(dialed).To(BeTrue())
}
