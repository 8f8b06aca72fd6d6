package pod_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
)

const (
	host = "demo-x7k2p.demo.prod.svc.cluster.local"
)

func withTLS(peerURL, clientURL string, t *v1alpha1.MemberTLS) func(*v1alpha1.EtcdMember) {
	return func(m *v1alpha1.EtcdMember) {
		m.Spec.PeerURL, m.Spec.ClientURL, m.Spec.TLS = peerURL, clientURL, t
	}
}

func TestTLSListenersFollowTheMembersShape(t *testing.T) {
	peer := &v1alpha1.MemberTLSEndpoint{TrustBundle: "demo-peer-trust-aaaa"}
	cases := []struct {
		name         string
		peerURL      string
		clientURL    string
		tls          *v1alpha1.MemberTLS
		listenPeer   string
		listenClient string
		clientAuth   string
		ports        int
	}{
		{"plaintext", "http://" + host + ":2380", "http://" + host + ":2379", nil,
			"http://0.0.0.0:2380", "http://0.0.0.0:2379", "", 3},
		{"created with TLS", "https://" + host + ":2380", "https://" + host + ":2379",
			&v1alpha1.MemberTLS{Peer: peer, Client: &v1alpha1.MemberTLSEndpoint{TrustBundle: "demo-client-trust-bbbb", ClientCertAuth: true}},
			"https://0.0.0.0:2380", "https://0.0.0.0:2379", "true", 3},
		{"turning to TLS: both schemes, peer TLS on the transition port", "http://" + host + ":2380", "https://" + host + ":2379",
			&v1alpha1.MemberTLS{Peer: peer, Client: &v1alpha1.MemberTLSEndpoint{TrustBundle: "demo-client-trust-bbbb", Plaintext: true, ClientCertAuth: true}},
			"http://0.0.0.0:2380,https://0.0.0.0:2382", "https://0.0.0.0:2379,http://0.0.0.0:2379", "true", 4},
		{"moved to the transition port", "https://" + host + ":2382", "https://" + host + ":2379",
			&v1alpha1.MemberTLS{Peer: peer, Client: &v1alpha1.MemberTLSEndpoint{TrustBundle: "demo-client-trust-bbbb"}},
			"https://0.0.0.0:2382", "https://0.0.0.0:2379", "false", 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := pod.Build(newParams(newMember(withTLS(tc.peerURL, tc.clientURL, tc.tls))))
			val := func(name string) string { v, _ := flag(p, name); return v }
			g.Expect(val("listen-peer-urls")).To(Equal(tc.listenPeer))
			g.Expect(val("listen-client-urls")).To(Equal(tc.listenClient))
			g.Expect(val("initial-advertise-peer-urls")).To(Equal(tc.peerURL))
			g.Expect(val("advertise-client-urls")).To(Equal(tc.clientURL))
			g.Expect(val("client-cert-auth")).To(Equal(tc.clientAuth))
			g.Expect(p.Spec.Containers[0].Ports).To(HaveLen(tc.ports))
			probe := p.Spec.Containers[0].ReadinessProbe.HTTPGet
			g.Expect(probe.Port.StrVal).To(Equal("metrics"), "the probe stays on the plaintext metrics port")
			if tc.tls == nil {
				g.Expect(p.Spec.Volumes).To(HaveLen(1))
				_, has := flag(p, "peer-cert-file")
				g.Expect(has).To(BeFalse())
				return
			}
			g.Expect(val("peer-cert-file")).To(Equal("/etc/etcd/tls/certs/peer.crt"))
			g.Expect(val("peer-trusted-ca-file")).To(Equal("/etc/etcd/tls/peer-trust/ca.crt"))
			g.Expect(val("peer-client-cert-auth")).To(Equal("true"))
			g.Expect(val("cert-file")).To(Equal("/etc/etcd/tls/certs/client.crt"))
			g.Expect(val("trusted-ca-file")).To(Equal("/etc/etcd/tls/client-trust/ca.crt"))
			names := map[string]string{}
			for _, v := range p.Spec.Volumes {
				switch {
				case v.Secret != nil:
					names[v.Name] = v.Secret.SecretName
				case v.ConfigMap != nil:
					names[v.Name] = v.ConfigMap.Name
				}
			}
			g.Expect(names).To(Equal(map[string]string{
				"tls-certs": "demo-x7k2p-tls", "tls-peer-trust": "demo-peer-trust-aaaa", "tls-client-trust": "demo-client-trust-bbbb",
			}))
			secret, cms := pod.TLSMaterialNames(newMember(withTLS(tc.peerURL, tc.clientURL, tc.tls)))
			g.Expect(secret).To(Equal("demo-x7k2p-tls"))
			g.Expect(cms).To(ConsistOf("demo-peer-trust-aaaa", "demo-client-trust-bbbb"))
		})
	}
}

// A new trust bundle is a new template hash, so the rollout restarts the
// member; a member without TLS keeps the hash it had before TLS existed.
func TestTLSShapesTheTemplateHash(t *testing.T) {
	g := NewWithT(t)
	plain := newMember()
	g.Expect(pod.TemplateHash(plain)).To(Equal(pod.TemplateHash(newMember(func(m *v1alpha1.EtcdMember) { m.Spec.TLS = nil }))))
	a := newMember(withTLS("", "", &v1alpha1.MemberTLS{Peer: &v1alpha1.MemberTLSEndpoint{TrustBundle: "a"}}))
	b := newMember(withTLS("", "", &v1alpha1.MemberTLS{Peer: &v1alpha1.MemberTLSEndpoint{TrustBundle: "b"}}))
	g.Expect(pod.TemplateHash(a)).NotTo(Equal(pod.TemplateHash(b)))
	g.Expect(pod.TemplateHash(a)).NotTo(Equal(pod.TemplateHash(plain)))
}
