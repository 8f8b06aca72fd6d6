package etcdaccess

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

func member(client *v1alpha1.MemberTLSEndpoint) *v1alpha1.EtcdMember {
	m := &v1alpha1.EtcdMember{}
	if client != nil {
		m.Spec.TLS = &v1alpha1.MemberTLS{Client: client, Peer: &v1alpha1.MemberTLSEndpoint{TrustBundle: "p"}}
	}
	return m
}

func withURL(m *v1alpha1.EtcdMember, clientURL string) *v1alpha1.EtcdMember {
	m.Spec.ClientURL = clientURL
	return m
}

func TestShapeOf(t *testing.T) {
	mutual := &v1alpha1.MemberTLSEndpoint{TrustBundle: "c", ClientCertAuth: true}
	server := &v1alpha1.MemberTLSEndpoint{TrustBundle: "c"}
	tlsSpec := func(mutual bool) *v1alpha1.TLSSpec {
		return &v1alpha1.TLSSpec{Client: v1alpha1.ClientTLS{Mutual: ptr.To(mutual)}}
	}
	cases := []struct {
		name    string
		spec    *v1alpha1.TLSSpec
		members []*v1alpha1.EtcdMember
		want    Shape
	}{
		{"plaintext", nil, []*v1alpha1.EtcdMember{member(nil)}, Shape{}},
		{"mutual TLS members", tlsSpec(true), []*v1alpha1.EtcdMember{member(mutual), member(mutual)}, Shape{TLS: true, HTTPS: true, Mutual: true}},
		{"server TLS members", tlsSpec(false), []*v1alpha1.EtcdMember{member(server)}, Shape{TLS: true, HTTPS: true}},
		{"no members yet: as the spec says", tlsSpec(true), nil, Shape{TLS: true, HTTPS: true, Mutual: true}},
		{"no members, no TLS", nil, nil, Shape{}},
		{"turning TLS on: plaintext members dialled in plain", tlsSpec(true), []*v1alpha1.EtcdMember{member(nil), withURL(member(mutual), "http://m:2379")}, Shape{TLS: true}},
		{"turning TLS on: every member on both schemes, clients not switched", tlsSpec(true), []*v1alpha1.EtcdMember{withURL(member(mutual), "http://m:2379"), withURL(member(mutual), "http://n:2379")}, Shape{TLS: true}},
		{"turning TLS on: clients switched", tlsSpec(true), []*v1alpha1.EtcdMember{withURL(member(mutual), "http://m:2379"), withURL(member(mutual), "https://n:2379")}, Shape{TLS: true, HTTPS: true, Mutual: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1alpha1.EtcdCluster{Spec: v1alpha1.EtcdClusterSpec{TLS: tc.spec}}
			if strings.Contains(tc.name, "clients switched") {
				c.Status.TLS = &v1alpha1.TLSStatus{Transition: &v1alpha1.TLSTransitionStatus{ClientsHTTPS: true}}
			}
			NewWithT(t).Expect(ShapeOf(c, tc.members)).To(Equal(tc.want))
		})
	}
}

func TestFor(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	now := time.Now()
	ca, err := certs.NewCA("client CA", now, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	leaf, err := certs.Issue(ca, certs.LeafRequest{CommonName: "root", Client: true, Lifetime: time.Hour}, now)
	g.Expect(err).NotTo(HaveOccurred())
	bundle := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-client-trust-x", Namespace: "ns",
			Labels: map[string]string{v1alpha1.ClusterLabel: "demo", TrustLabel: v1alpha1.TLSSectionClient}},
		Data: map[string]string{TrustBundleKey: string(ca.CertPEM)},
	}
	operator := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.OperatorClientSecretName("demo"), Namespace: "ns"},
		Data:       map[string][]byte{corev1.TLSCertKey: leaf.CertPEM, corev1.TLSPrivateKeyKey: leaf.KeyPEM},
	}
	mutual := &v1alpha1.MemberTLSEndpoint{TrustBundle: "c", ClientCertAuth: true}
	cl := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns"}}

	t.Run("plaintext dials without options", func(t *testing.T) {
		g := NewWithT(t)
		c := fakeclient.NewClientBuilder().WithScheme(scheme).Build()
		a, err := For(context.Background(), c, nil, cl, []*v1alpha1.EtcdMember{member(nil)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a.HTTPS).To(BeFalse())
		g.Expect(a.Options).To(BeEmpty())
		g.Expect(a.URL("http://m.demo.ns.svc:2379")).To(Equal("http://m.demo.ns.svc:2379"))
	})
	t.Run("TLS trusts the client bundle and presents the operator's certificate", func(t *testing.T) {
		g := NewWithT(t)
		c := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(bundle, operator).Build()
		tc := cl.DeepCopy()
		tc.Spec.TLS = &v1alpha1.TLSSpec{}
		a, err := For(context.Background(), c, nil, tc, []*v1alpha1.EtcdMember{member(mutual)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a.HTTPS).To(BeTrue())
		g.Expect(a.URL("http://m.demo.ns.svc:2379")).To(Equal("https://m.demo.ns.svc:2379"))
		d := etcd.ResolveDial(etcd.DialSettings{}, a.Options...)
		g.Expect(d.TLS).NotTo(BeNil())
		g.Expect(d.TLS.Certificates).To(HaveLen(1))
		g.Expect(d.TLS.RootCAs.Equal(poolOf(ca.Cert))).To(BeTrue())
	})
	t.Run("TLS before the operator's certificate exists dials without one", func(t *testing.T) {
		g := NewWithT(t)
		c := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(bundle).Build()
		tc := cl.DeepCopy()
		tc.Spec.TLS = &v1alpha1.TLSSpec{}
		a, err := For(context.Background(), c, nil, tc, []*v1alpha1.EtcdMember{member(mutual)})
		g.Expect(err).NotTo(HaveOccurred())
		d := etcd.ResolveDial(etcd.DialSettings{}, a.Options...)
		g.Expect(d.TLS).NotTo(BeNil())
		g.Expect(d.TLS.Certificates).To(BeEmpty())
	})
}

func poolOf(cs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range cs {
		p.AddCert(c)
	}
	return p
}

func TestForAuth(t *testing.T) {
	scheme := runtime.NewScheme()
	NewWithT(t).Expect(corev1.AddToScheme(scheme)).To(Succeed())
	now := time.Now()
	ca, err := certs.NewCA("client CA", now, time.Hour)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	leaf, err := certs.Issue(ca, certs.LeafRequest{CommonName: "root", Client: true, Lifetime: time.Hour}, now)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	operator := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.OperatorClientSecretName("demo"), Namespace: "ns"},
		Data:       map[string][]byte{corev1.TLSCertKey: leaf.CertPEM, corev1.TLSPrivateKeyKey: leaf.KeyPEM},
	}
	generated := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "demo-etcd-root", Namespace: "ns"},
		Data: map[string][]byte{"password": []byte("generated-pw")}}
	users := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: "ns"},
		Data: map[string][]byte{"password": []byte("my-pw")}}
	empty := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "empty", Namespace: "ns"}, Data: map[string][]byte{"username": []byte("root")}}
	withAuth := func(secret string) *v1alpha1.EtcdCluster {
		return &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns"},
			Spec: v1alpha1.EtcdClusterSpec{Auth: &v1alpha1.AuthSpec{Enabled: true, RootSecretName: secret}}}
	}
	creds := func(a Access) etcd.Credentials {
		return etcd.ResolveDial(etcd.DialSettings{}, a.Options...).Credentials
	}

	t.Run("without spec.auth, no credentials", func(t *testing.T) {
		g := NewWithT(t)
		c := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(generated).Build()
		cl := withAuth("")
		cl.Spec.Auth = nil
		a, err := For(context.Background(), c, nil, cl, []*v1alpha1.EtcdMember{member(nil)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a.Identity).To(Equal(IdentityNone))
		g.Expect(creds(a).IsZero()).To(BeTrue())
	})
	t.Run("plaintext: root's generated password, from the cache", func(t *testing.T) {
		g := NewWithT(t)
		cached := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(generated).Build()
		live := fakeclient.NewClientBuilder().WithScheme(scheme).Build()
		a, err := For(context.Background(), cached, live, withAuth(""), []*v1alpha1.EtcdMember{member(nil)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a.Identity).To(Equal(IdentityPassword))
		g.Expect(a.CredentialsErr).NotTo(HaveOccurred())
		g.Expect(creds(a)).To(Equal(etcd.Credentials{User: "root", Password: "generated-pw"}))
	})
	t.Run("a Secret the user named is read past the cache", func(t *testing.T) {
		g := NewWithT(t)
		cached := fakeclient.NewClientBuilder().WithScheme(scheme).Build()
		live := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(users).Build()
		a, err := For(context.Background(), cached, live, withAuth("mine"), []*v1alpha1.EtcdMember{member(nil)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(creds(a)).To(Equal(etcd.Credentials{User: "root", Password: "my-pw"}))
	})
	t.Run("a missing or empty Secret dials without and says why", func(t *testing.T) {
		g := NewWithT(t)
		c := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(empty).Build()
		for name, missing := range map[string]bool{"gone": true, "empty": false} {
			a, err := For(context.Background(), c, c, withAuth(name), []*v1alpha1.EtcdMember{member(nil)})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(creds(a).IsZero()).To(BeTrue())
			var rs *RootSecretError
			g.Expect(errors.As(a.CredentialsErr, &rs)).To(BeTrue())
			g.Expect(rs.Missing).To(Equal(missing))
			g.Expect(rs.Secret).To(Equal("ns/" + name))
		}
	})
	t.Run("mutual TLS: the certificate's user, no password", func(t *testing.T) {
		g := NewWithT(t)
		c := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(operator, generated).Build()
		cl := withAuth("")
		cl.Spec.TLS = &v1alpha1.TLSSpec{}
		mutual := &v1alpha1.MemberTLSEndpoint{TrustBundle: "c", ClientCertAuth: true}
		a, err := For(context.Background(), c, nil, cl, []*v1alpha1.EtcdMember{member(mutual)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a.Identity).To(Equal(IdentityCertificate))
		g.Expect(a.CertificateUser).To(Equal("root"))
		g.Expect(creds(a).IsZero()).To(BeTrue())
	})
	t.Run("server-only TLS: the password", func(t *testing.T) {
		g := NewWithT(t)
		c := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(operator, generated).Build()
		cl := withAuth("")
		cl.Spec.TLS = &v1alpha1.TLSSpec{Client: v1alpha1.ClientTLS{Mutual: ptr.To(false)}}
		a, err := For(context.Background(), c, nil, cl, []*v1alpha1.EtcdMember{member(&v1alpha1.MemberTLSEndpoint{TrustBundle: "c"})})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a.Identity).To(Equal(IdentityPassword))
		g.Expect(creds(a).Password).To(Equal("generated-pw"))
	})
}
