package etcdcluster

import (
	"context"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
)

var tlsNames = []string{"demo-a", "demo-b", "demo-c"}

// syncPods plays the member controller and the kubelet: a Pod not built
// from its member's spec is re-created from it and comes up ready; the
// member then publishes its client URL to etcd, and serves the
// certificates of its Secret. It returns the members it restarted.
func (h *harness) syncPods() []string {
	h.t.Helper()
	ctx := context.Background()
	var restarted []string
	for _, name := range tlsNames {
		m := h.member(name)
		p := h.pod(name)
		if pod.Outdated(m, p.Annotations) || p.Annotations[pod.TemplateHashAnnotation] == "" {
			if p.Annotations[pod.TemplateHashAnnotation] != "" {
				restarted = append(restarted, name)
			}
			built := pod.Build(pod.Params{Member: m, ClusterFormed: true, ClusterDomain: testDomain})
			built.ResourceVersion = p.ResourceVersion
			built.Labels[v1alpha1.RoleLabel] = v1alpha1.RoleLabelVoter
			built.Status = p.Status
			h.g.Expect(h.c.Update(ctx, built)).To(Succeed())
			em, ok := h.etcdMemberByName(name)
			h.g.Expect(ok).To(BeTrue())
			h.etcd.StartMember(em.ID, name, m.Spec.ClientURL)
		}
		secret := &corev1.Secret{}
		if err := h.c.Get(ctx, clientKey(v1alpha1.MemberTLSSecretName(name)), secret); err == nil {
			for _, sec := range []string{v1alpha1.TLSSectionPeer, v1alpha1.TLSSectionClient} {
				kp, err := certs.ParseKeyPair(secret.Data[sec+".crt"], secret.Data[sec+".key"])
				if err == nil {
					h.etcd.SetServedCertificate(servedEndpoint(m, sec, m.Spec.ClientURL, m.Spec.PeerURL), kp.Cert)
				}
			}
		}
	}
	return restarted
}

func (h *harness) etcdMemberByName(name string) (struct{ ID uint64 }, bool) {
	for _, em := range h.etcd.Members() {
		if em.Name == name {
			return struct{ ID uint64 }{em.ID}, true
		}
	}
	return struct{ ID uint64 }{}, false
}

func (h *harness) setTLS(t *v1alpha1.TLSSpec) {
	h.t.Helper()
	cl := h.cluster()
	cl.Spec.TLS = t
	cl.Generation++
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
}

// settleTLS reconciles and plays the Pods until nothing moves, recording which
// members restarted in which order.
func (h *harness) settleTLS(passes int) []string {
	h.t.Helper()
	var order []string
	h.syncPods()
	for range passes {
		h.reconcile()
		order = append(order, h.syncPods()...)
	}
	return order
}

func (h *harness) secret(name string) *corev1.Secret {
	h.t.Helper()
	s := &corev1.Secret{}
	h.g.Expect(h.c.Get(context.Background(), clientKey(name), s)).To(Succeed())
	return s
}

func (h *harness) bundle(name string) certs.Bundle {
	h.t.Helper()
	cm := &corev1.ConfigMap{}
	h.g.Expect(h.c.Get(context.Background(), clientKey(name), cm)).To(Succeed())
	h.g.Expect(cm.Immutable).NotTo(BeNil())
	b, err := certs.ParseBundle([]byte(cm.Data[etcdaccess.TrustBundleKey]))
	h.g.Expect(err).NotTo(HaveOccurred())
	return b
}

func (h *harness) leaf(member, section string) *x509.Certificate {
	h.t.Helper()
	s := h.secret(v1alpha1.MemberTLSSecretName(member))
	kp, err := certs.ParseKeyPair(s.Data[section+".crt"], s.Data[section+".key"])
	h.g.Expect(err).NotTo(HaveOccurred())
	return kp.Cert
}

// turnTLS turns a formed plaintext cluster to TLS and checks the whole
// switch: one member at a time, plaintext kept on the client port until
// every member serves TLS, peer URLs moved with MemberUpdate.
func (h *harness) turnTLS(spec *v1alpha1.TLSSpec) {
	h.t.Helper()
	// The first pass records the members' URLs, which the Pods are built
	// from; only then do the Pods stand for the members as they are.
	h.reconcile()
	h.syncPods()
	h.setTLS(spec)
	order := h.settleTLS(40)
	h.g.Expect(order).To(HaveLen(6), "every member restarts twice: onto both schemes, then onto TLS alone: %v", order)
	for _, name := range tlsNames {
		m := h.member(name)
		h.g.Expect(m.Spec.PeerURL).To(Equal(transitionPeerURL(peerURL(name))))
		h.g.Expect(m.Spec.ClientURL).To(Equal(withScheme(clientURL(name), "https")))
		h.g.Expect(m.Spec.TLS.Client.Plaintext).To(BeFalse())
		h.g.Expect(m.Spec.TLS.Client.ClientCertAuth).To(BeTrue())
	}
	h.g.Expect(h.etcd.Updated()).To(HaveLen(3), "each peer URL moved once through etcd")
	for _, em := range h.etcd.Members() {
		h.g.Expect(em.PeerURLs[0]).To(HavePrefix("https://"))
		h.g.Expect(em.PeerURLs[0]).To(HaveSuffix(":2382"))
	}
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue), h.condition(v1alpha1.ReadyCondition).Message)
}

func TestTLS_PlainToTLSOneMemberAtATime(t *testing.T) {
	h := newHarness(t)
	h.formed(3, tlsNames...)
	h.setTLS(&v1alpha1.TLSSpec{Client: v1alpha1.ClientTLS{Mutual: ptrBool(true)}})
	seenDual := false
	for range 40 {
		h.reconcile()
		outdated := 0
		for _, name := range tlsNames {
			m := h.member(name)
			if pod.Outdated(m, h.pod(name).Annotations) {
				outdated++
			}
			if m.Spec.TLS != nil && strings.HasPrefix(m.Spec.PeerURL, "http://") {
				seenDual = true
				h.g.Expect(m.Spec.TLS.Client.Plaintext).To(BeTrue(), "%s keeps plaintext while a peer has no TLS", name)
				args := strings.Join(pod.Args(pod.Params{Member: m, ClusterDomain: testDomain}), " ")
				h.g.Expect(args).To(ContainSubstring("--listen-peer-urls=http://0.0.0.0:2380,https://0.0.0.0:2382"))
				h.g.Expect(args).To(ContainSubstring("--listen-client-urls=https://0.0.0.0:2379,http://0.0.0.0:2379"))
			}
		}
		h.g.Expect(outdated).To(BeNumerically("<=", 1), "never two members restarting at once")
		h.syncPods()
	}
	h.g.Expect(seenDual).To(BeTrue())
	for _, name := range tlsNames {
		h.g.Expect(h.member(name).Spec.PeerURL).To(HavePrefix("https://"))
	}
}

func TestTLS_MaterialOfATLSCluster(t *testing.T) {
	h := newHarness(t)
	h.formed(3, tlsNames...)
	h.turnTLS(&v1alpha1.TLSSpec{})
	m := h.member("demo-a")
	peerTrust, clientTrust := h.bundle(m.Spec.TLS.Peer.TrustBundle), h.bundle(m.Spec.TLS.Client.TrustBundle)
	h.g.Expect(peerTrust).To(HaveLen(1))
	h.g.Expect(clientTrust).To(HaveLen(1))
	h.g.Expect(peerTrust.Equal(clientTrust)).To(BeFalse(), "peers and clients have CAs of their own")
	host := hostOf(m.Spec.PeerURL)
	h.g.Expect(certs.Verify(h.leaf("demo-a", "peer"), peerTrust, host, h.now)).To(Succeed())
	h.g.Expect(certs.Verify(h.leaf("demo-a", "client"), clientTrust, "demo-client.ns.svc", h.now)).To(Succeed())
	for _, name := range []string{v1alpha1.OperatorClientSecretName(testName), v1alpha1.AdminClientSecretName(testName)} {
		s := h.secret(name)
		kp, err := certs.ParseKeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
		h.g.Expect(err).NotTo(HaveOccurred())
		h.g.Expect(kp.Cert.Subject.CommonName).To(Equal("root"))
		h.g.Expect(certs.Verify(kp.Cert, clientTrust, "", h.now)).To(Succeed())
		ca, err := certs.ParseBundle(s.Data[etcdaccess.TrustBundleKey])
		h.g.Expect(err).NotTo(HaveOccurred())
		h.g.Expect(ca.Equal(clientTrust)).To(BeTrue(), "%s carries the client trust", name)
	}
	st := h.cluster().Status.TLS
	h.g.Expect(st.Peer.Phase).To(Equal(certs.PhaseSteady))
	h.g.Expect(st.Client.TrustBundle).To(Equal(m.Spec.TLS.Client.TrustBundle))
	for _, d := range h.etcd.Calls {
		if d.Op == "Dial" && len(d.Endpoints) > 0 && strings.HasPrefix(d.Endpoints[0], "https://") {
			h.g.Expect(d.Security.HasClientCertificate()).To(BeTrue(), "the operator dials https with its client certificate")
		}
	}
}

// TestTLS_LeafRenewalRestartsNothing: at two thirds of a certificate's
// life the operator renews it in the member's Secret, and no member is
// restarted: etcd reads it at the next handshake.
func TestTLS_LeafRenewalRestartsNothing(t *testing.T) {
	h := newHarness(t)
	h.formed(3, tlsNames...)
	h.turnTLS(&v1alpha1.TLSSpec{OperatorManaged: &v1alpha1.OperatorManagedTLS{CertificateDuration: &metav1.Duration{Duration: 30 * time.Minute}}})
	before := map[string]string{}
	for _, name := range tlsNames {
		before[name] = certs.Serial(h.leaf(name, "client"))
	}
	h.now = h.now.Add(21 * time.Minute)
	h.g.Expect(h.settleTLS(3)).To(BeEmpty(), "no member restarted")
	for _, name := range tlsNames {
		h.g.Expect(certs.Serial(h.leaf(name, "client"))).NotTo(Equal(before[name]), "%s's certificate was renewed", name)
	}
	h.g.Expect(strings.Join(h.drainEvents(), "\n")).To(ContainSubstring("CertificatesRenewed"))
}

// TestTLS_CARotationOnRequest: the annotation starts the three passes:
// every member trusts old and new (a restart each), the certificates
// switch (no restart), the old CA is dropped (a restart each).
func TestTLS_CARotationOnRequest(t *testing.T) {
	h := newHarness(t)
	h.formed(3, tlsNames...)
	h.turnTLS(&v1alpha1.TLSSpec{})
	oldPeerCA := h.bundle(h.member("demo-a").Spec.TLS.Peer.TrustBundle)[0]
	cl := h.cluster()
	cl.Annotations = map[string]string{v1alpha1.RotateCAAnnotation: "2026-12-01T12:00:00Z"}
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())

	sawBoth := false
	var restarts []string
	for range 60 {
		h.reconcile()
		for _, name := range tlsNames {
			if len(h.bundle(h.member(name).Spec.TLS.Peer.TrustBundle)) == 2 {
				sawBoth = true
			}
		}
		restarts = append(restarts, h.syncPods()...)
	}
	h.g.Expect(sawBoth).To(BeTrue(), "members trusted both CAs on the way")
	h.g.Expect(restarts).To(HaveLen(6), "two restarts per member: to trust both, then to drop the old: %v", restarts)
	for _, name := range tlsNames {
		b := h.bundle(h.member(name).Spec.TLS.Peer.TrustBundle)
		h.g.Expect(b).To(HaveLen(1))
		h.g.Expect(b.Contains(oldPeerCA)).To(BeFalse(), "%s no longer trusts the old CA", name)
		h.g.Expect(certs.IssuedBy(h.leaf(name, "peer"), b[0])).To(BeTrue(), "%s's certificate is from the new CA", name)
	}
	ca := h.secret(v1alpha1.CASecretName(testName, v1alpha1.TLSSectionPeer))
	h.g.Expect(ca.Data).NotTo(HaveKey(previousCertKey), "the old CA is forgotten")
	h.g.Expect(h.cluster().Status.TLS.RotatedFor).To(Equal("2026-12-01T12:00:00Z"))
	h.g.Expect(strings.Join(h.drainEvents(), "\n")).To(ContainSubstring("CARotated"))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
}

func TestTLS_SecretSourceProblemsAreNamed(t *testing.T) {
	h := newHarness(t)
	h.formed(3, tlsNames...)
	h.setTLS(&v1alpha1.TLSSpec{Peer: v1alpha1.PeerTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{
		Source: v1alpha1.CertificateSourceSecret, SecretName: "my-peer-tls"}}})
	h.reconcile()
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.TLSSourceInvalidReason))
	h.g.Expect(ready.Message).To(ContainSubstring("Secret ns/my-peer-tls (spec.tls.peer.secretName): does not exist"))
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionTrue))

	ca, err := certs.NewCA("user ca", h.now, 24*time.Hour)
	h.g.Expect(err).NotTo(HaveOccurred())
	wrong, err := certs.Issue(ca, certs.LeafRequest{CommonName: "x", DNSNames: []string{"elsewhere.example"}, Server: true, Client: true, Lifetime: time.Hour}, h.now)
	h.g.Expect(err).NotTo(HaveOccurred())
	s := &corev1.Secret{Data: map[string][]byte{"tls.crt": wrong.CertPEM, "tls.key": wrong.KeyPEM, "ca.crt": ca.CertPEM}}
	s.Name, s.Namespace = "my-peer-tls", testNS
	h.g.Expect(h.c.Create(context.Background(), s)).To(Succeed())
	h.reconcile()
	ready = h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.TLSSourceInvalidReason))
	h.g.Expect(ready.Message).To(ContainSubstring("does not serve member demo-a as demo-a.demo.ns.svc.cluster.local"))
	for _, name := range tlsNames {
		h.g.Expect(h.member(name).Spec.TLS).To(BeNil(), "nothing rolls on an invalid source")
	}

	right, err := certs.Issue(ca, certs.LeafRequest{CommonName: "x", DNSNames: []string{"*.demo.ns.svc.cluster.local"}, Server: true, Client: true, Lifetime: time.Hour}, h.now)
	h.g.Expect(err).NotTo(HaveOccurred())
	s.Data = map[string][]byte{"tls.crt": right.CertPEM, "tls.key": right.KeyPEM, "ca.crt": ca.CertPEM}
	h.g.Expect(h.c.Update(context.Background(), s)).To(Succeed())
	h.settleTLS(40)
	m := h.member("demo-a")
	h.g.Expect(m.Spec.PeerURL).To(HavePrefix("https://"))
	h.g.Expect(h.bundle(m.Spec.TLS.Peer.TrustBundle).Contains(ca.Cert)).To(BeTrue(), "members trust the user's CA")
	h.g.Expect(certs.Serial(h.leaf("demo-a", "peer"))).To(Equal(certs.Serial(right.Cert)), "members serve the user's certificate")
}

func TestAuth_EnabledWithAGeneratedPasswordAndAWrongOneNamed(t *testing.T) {
	h := newHarness(t)
	h.formed(3, tlsNames...)
	cl := h.cluster()
	cl.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true}
	cl.Generation++
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
	h.reconcile()
	pw := string(h.secret(v1alpha1.GeneratedRootSecretName(testName)).Data[etcdaccess.PasswordKey])
	h.g.Expect(pw).To(HaveLen(32))
	on, got := h.etcd.AuthState()
	h.g.Expect(on).To(BeTrue())
	h.g.Expect(got).To(Equal(pw))
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue), "the operator manages the cluster with auth on")

	s := h.secret(v1alpha1.GeneratedRootSecretName(testName))
	s.Data[etcdaccess.PasswordKey] = []byte("not-the-password")
	h.g.Expect(h.c.Update(context.Background(), s)).To(Succeed())
	h.reconcile()
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.AuthFailedReason))
	h.g.Expect(ready.Message).To(ContainSubstring("Secret ns/demo-root"))
	for _, c := range h.cluster().Status.Conditions {
		h.g.Expect(c.Message).NotTo(ContainSubstring("not-the-password"))
		h.g.Expect(c.Message).NotTo(ContainSubstring(pw))
	}
	for _, e := range h.drainEvents() {
		h.g.Expect(e).NotTo(ContainSubstring(pw))
	}
}

func ptrBool(b bool) *bool { return &b }

func TestTLS_ClientCertificateIssuedOnRequest(t *testing.T) {
	h := newHarness(t)
	h.formed(3, tlsNames...)
	h.turnTLS(&v1alpha1.TLSSpec{})
	req := &corev1.Secret{}
	req.Name, req.Namespace = "demo-kubectl-etcd", testNS
	req.Labels = v1alpha1.ClusterLabels(testName)
	req.Annotations = map[string]string{v1alpha1.IssueClientCertificateAnnotation: "root"}
	h.g.Expect(h.c.Create(context.Background(), req)).To(Succeed())
	h.reconcile()
	got := h.secret("demo-kubectl-etcd")
	kp, err := certs.ParseKeyPair(got.Data[corev1.TLSCertKey], got.Data[corev1.TLSPrivateKeyKey])
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(kp.Cert.Subject.CommonName).To(Equal("root"))
	trust := h.bundle(h.member("demo-a").Spec.TLS.Client.TrustBundle)
	h.g.Expect(certs.Verify(kp.Cert, trust, "", h.now)).To(Succeed(), "the members accept it")
}
