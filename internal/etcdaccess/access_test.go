package etcdaccess

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

func member(client *v1alpha1.MemberTLSEndpoint) *v1alpha1.EtcdMember {
	m := &v1alpha1.EtcdMember{}
	if client != nil {
		m.Spec.TLS = &v1alpha1.MemberTLS{Client: client, Peer: &v1alpha1.MemberTLSEndpoint{TrustBundle: "p"}}
	}
	return m
}

func TestFor(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	pw := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "demo-root", Namespace: "ns"}, Data: map[string][]byte{PasswordKey: []byte("pw\n")}}
	c := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(pw).Build()
	mutual := &v1alpha1.MemberTLSEndpoint{TrustBundle: "c", ClientCertAuth: true}
	cases := []struct {
		name          string
		tls           bool
		auth          bool
		members       []*v1alpha1.EtcdMember
		https, ident  bool
		wantOpts      int
		passwordIsSet bool
	}{
		{"plaintext", false, false, []*v1alpha1.EtcdMember{member(nil)}, false, false, 0, false},
		{"turning to TLS: plaintext until every member serves TLS", true, false, []*v1alpha1.EtcdMember{member(mutual), member(nil)}, false, false, 1, false},
		{"TLS everywhere", true, false, []*v1alpha1.EtcdMember{member(mutual), member(mutual)}, true, false, 1, false},
		{"auth without TLS sends the password", false, true, []*v1alpha1.EtcdMember{member(nil)}, false, false, 1, true},
		{"auth with TLS but no certificate yet sends the password", true, true, []*v1alpha1.EtcdMember{member(mutual)}, true, false, 2, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cl := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns"}}
			if tc.tls {
				cl.Spec.TLS = &v1alpha1.TLSSpec{}
			}
			if tc.auth {
				cl.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true}
			}
			a, err := For(context.Background(), c, c, cl, tc.members)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a.HTTPS).To(Equal(tc.https))
			g.Expect(a.CertificateIdentity).To(Equal(tc.ident), "no operator certificate exists yet")
			g.Expect(a.Options).To(HaveLen(tc.wantOpts))
			sec := etcd.ResolveSecurity(etcd.Security{}, a.Options...)
			g.Expect(sec.Password == "pw").To(Equal(tc.passwordIsSet), "the password, trimmed, when it is needed")
			g.Expect(a.URL("http://m.demo.ns.svc:2379")).To(Equal(map[bool]string{true: "https://m.demo.ns.svc:2379", false: "http://m.demo.ns.svc:2379"}[tc.https]))
		})
	}
}
