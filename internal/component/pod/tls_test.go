package pod_test

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
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

func memberTLS(mutual bool) *v1alpha1.MemberTLS {
	return &v1alpha1.MemberTLS{
		Peer:   &v1alpha1.MemberTLSEndpoint{TrustBundle: "demo-peer-trust-aaaa"},
		Client: &v1alpha1.MemberTLSEndpoint{TrustBundle: "demo-client-trust-bbbb", ClientCertAuth: mutual},
	}
}

func TestTLSFlagsFollowTheMembersShape(t *testing.T) {
	const (
		peerHTTPS   = "https://" + host + ":2380"
		clientHTTPS = "https://" + host + ":2379"
	)
	cases := []struct {
		name      string
		peerURL   string
		clientURL string
		tls       *v1alpha1.MemberTLS
		// absent flags must not be there at all.
		want   map[string]string
		absent []string
		// trust bundles mounted, by volume name.
		mounts map[string]string
	}{
		{
			name: "plaintext", peerURL: "http://" + host + ":2380", clientURL: "http://" + host + ":2379",
			want:   map[string]string{"listen-peer-urls": "http://0.0.0.0:2380", "listen-client-urls": "http://0.0.0.0:2379"},
			absent: []string{"peer-cert-file", "cert-file", "trusted-ca-file", "client-cert-auth", "peer-client-cert-auth"},
		},
		{
			name: "mutual TLS", peerURL: peerHTTPS, clientURL: clientHTTPS, tls: memberTLS(true),
			want: map[string]string{
				"listen-peer-urls": "https://0.0.0.0:2380", "listen-client-urls": "https://0.0.0.0:2379",
				"peer-cert-file": "/etc/etcd/tls/certs/peer.crt", "peer-key-file": "/etc/etcd/tls/certs/peer.key",
				"peer-trusted-ca-file": "/etc/etcd/tls/peer-trust/ca.crt", "peer-client-cert-auth": "true",
				"cert-file": "/etc/etcd/tls/certs/client.crt", "key-file": "/etc/etcd/tls/certs/client.key",
				"trusted-ca-file": "/etc/etcd/tls/client-trust/ca.crt", "client-cert-auth": "true",
			},
			mounts: map[string]string{"tls-certs": "demo-x7k2p-tls", "tls-peer-trust": "demo-peer-trust-aaaa", "tls-client-trust": "demo-client-trust-bbbb"},
		},
		{
			// etcd demands a client certificate whenever --trusted-ca-file
			// is set; without mutual TLS it must not be.
			name: "server TLS without client certificates", peerURL: peerHTTPS, clientURL: clientHTTPS, tls: memberTLS(false),
			want: map[string]string{
				"listen-peer-urls": "https://0.0.0.0:2380", "listen-client-urls": "https://0.0.0.0:2379",
				"peer-trusted-ca-file": "/etc/etcd/tls/peer-trust/ca.crt", "peer-client-cert-auth": "true",
				"cert-file": "/etc/etcd/tls/certs/client.crt", "key-file": "/etc/etcd/tls/certs/client.key",
			},
			absent: []string{"trusted-ca-file", "client-cert-auth"},
			mounts: map[string]string{"tls-certs": "demo-x7k2p-tls", "tls-peer-trust": "demo-peer-trust-aaaa"},
		},
		{
			// Turning TLS on for a running cluster, first pass (design
			// 0023): the member's URLs are still http; it gets its peer
			// certificates (to dial peers already on https) with an http
			// peer listener, and TLS beside plaintext on its client port.
			name: "TLS beside plaintext while a running cluster turns TLS on", peerURL: "http://" + host + ":2380", clientURL: "http://" + host + ":2379", tls: memberTLS(true),
			want: map[string]string{
				"listen-peer-urls": "http://0.0.0.0:2380", "listen-client-urls": "http://0.0.0.0:2379,https://0.0.0.0:2379",
				"peer-cert-file": "/etc/etcd/tls/certs/peer.crt", "peer-key-file": "/etc/etcd/tls/certs/peer.key",
				"peer-trusted-ca-file": "/etc/etcd/tls/peer-trust/ca.crt", "peer-client-cert-auth": "true",
				"cert-file": "/etc/etcd/tls/certs/client.crt", "key-file": "/etc/etcd/tls/certs/client.key",
				"trusted-ca-file": "/etc/etcd/tls/client-trust/ca.crt", "client-cert-auth": "true",
			},
			mounts: map[string]string{"tls-certs": "demo-x7k2p-tls", "tls-peer-trust": "demo-peer-trust-aaaa", "tls-client-trust": "demo-client-trust-bbbb"},
		},
		{
			// Only a recorded http client URL means "both": without one
			// the client port serves TLS alone.
			name: "TLS with no URL recorded", tls: memberTLS(true),
			want:   map[string]string{"listen-client-urls": "https://0.0.0.0:2379"},
			mounts: map[string]string{"tls-certs": "demo-x7k2p-tls", "tls-peer-trust": "demo-peer-trust-aaaa", "tls-client-trust": "demo-client-trust-bbbb"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			m := newMember(withTLS(tc.peerURL, tc.clientURL, tc.tls))
			p := pod.Build(newParams(m))
			for name, want := range tc.want {
				v, has := flag(p, name)
				g.Expect(has).To(BeTrue(), "--%s", name)
				g.Expect(v).To(Equal(want), "--%s", name)
			}
			for _, name := range tc.absent {
				_, has := flag(p, name)
				g.Expect(has).To(BeFalse(), "--%s must not be set", name)
			}
			if tc.peerURL != "" {
				v, _ := flag(p, "initial-advertise-peer-urls")
				g.Expect(v).To(Equal(tc.peerURL))
				v, _ = flag(p, "advertise-client-urls")
				g.Expect(v).To(Equal(tc.clientURL))
			}
			v, _ := flag(p, "listen-metrics-urls")
			g.Expect(v).To(Equal("http://0.0.0.0:2381"), "metrics stay plaintext on their own port")
			ctr := p.Spec.Containers[0]
			g.Expect(ctr.Ports).To(HaveLen(3))
			g.Expect(ctr.ReadinessProbe.HTTPGet.Port.StrVal).To(Equal("metrics"), "the probe stays on the plaintext metrics port")
			for _, vm := range ctr.VolumeMounts {
				g.Expect(vm.SubPath).To(BeEmpty(), "a subPath mount never sees a renewed Secret")
			}
			names := map[string]string{}
			for _, v := range p.Spec.Volumes {
				switch {
				case v.Secret != nil:
					names[v.Name] = v.Secret.SecretName
					g.Expect(v.Secret.Items).To(BeEmpty(), "the whole Secret is mounted")
				case v.ConfigMap != nil:
					names[v.Name] = v.ConfigMap.Name
				}
			}
			if tc.tls == nil {
				g.Expect(p.Spec.Volumes).To(HaveLen(1))
				return
			}
			g.Expect(names).To(Equal(tc.mounts))
			secret, cms := pod.TLSMaterialNames(m)
			g.Expect(secret).To(Equal("demo-x7k2p-tls"))
			var wantCMs []string
			for name, obj := range tc.mounts {
				if name != "tls-certs" {
					wantCMs = append(wantCMs, obj)
				}
			}
			g.Expect(cms).To(ConsistOf(wantCMs), "the member controller waits for exactly what the Pod mounts")
		})
	}
}

// A member's trust bundles are in the template hash: a CA rotation changes
// them, and etcd reads its CA files only at start, so the Pod is re-created
// (through the rollout's approval). A member without TLS hashes as it did
// before TLS was hashed.
func TestTrustBundlesAreInTheTemplateHash(t *testing.T) {
	g := NewWithT(t)
	m := newMember(withTLS("https://"+host+":2380", "https://"+host+":2379", memberTLS(true)))
	p := pod.Build(newParams(m))
	g.Expect(pod.Outdated(m, p)).To(BeFalse())
	rotated := m.DeepCopy()
	rotated.Spec.TLS.Peer.TrustBundle = "demo-peer-trust-cccc"
	g.Expect(pod.Outdated(rotated, p)).To(BeTrue(), "a new peer trust bundle re-creates the Pod")
	rotated = m.DeepCopy()
	rotated.Spec.TLS.Client.TrustBundle = "demo-client-trust-cccc"
	g.Expect(pod.Outdated(rotated, p)).To(BeTrue(), "and so does a new client trust bundle")

	plain := newMember()
	g.Expect(pod.TemplateHash(plain)).To(Equal(templateOnlyHash(plain)), "plaintext members keep their hash")
}

// A Pod hashed by an operator that left TLS out is current while it mounts
// the trust bundles its member names (upgrading the operator restarts
// nothing), and outdated once the member names another (a rotation begun
// before the member controller recorded today's hash still restarts it).
func TestLegacyHashIsCurrentOnlyWithTheMembersTrust(t *testing.T) {
	g := NewWithT(t)
	m := newMember(withTLS("https://"+host+":2380", "https://"+host+":2379", memberTLS(true)))
	p := pod.Build(newParams(m))
	p.Annotations[pod.TemplateHashAnnotation] = templateOnlyHash(m)
	g.Expect(templateOnlyHash(m)).NotTo(Equal(pod.TemplateHash(m)))
	g.Expect(pod.Outdated(m, p)).To(BeFalse(), "an operator upgrade restarts nothing")

	rotated := m.DeepCopy()
	rotated.Spec.TLS.Peer.TrustBundle = "demo-peer-trust-cccc"
	g.Expect(templateOnlyHash(rotated)).To(Equal(templateOnlyHash(m)), "the old hash cannot tell")
	g.Expect(pod.Outdated(rotated, p)).To(BeTrue(), "the mounted bundle can")
}

// templateOnlyHash is the hash the operator gave Pods before TLS was in it,
// written out so that the test does not depend on the code it checks.
func templateOnlyHash(m *v1alpha1.EtcdMember) string {
	data, err := json.Marshal(struct {
		Template v1alpha1.MemberTemplate `json:"template"`
	}{m.Spec.MemberTemplate})
	if err != nil {
		panic(err)
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	return fmt.Sprintf("%016x", h.Sum64())
}

// The bundle a running Pod trusts is read from its volumes, whatever its
// member's spec says since.
func TestMountedTrustBundle(t *testing.T) {
	g := NewWithT(t)
	p := pod.Build(newParams(newMember(withTLS("https://"+host+":2380", "https://"+host+":2379", memberTLS(true)))))
	g.Expect(pod.MountedTrustBundle(p, "peer")).To(Equal("demo-peer-trust-aaaa"))
	g.Expect(pod.MountedTrustBundle(p, "client")).To(Equal("demo-client-trust-bbbb"))
	p = pod.Build(newParams(newMember(withTLS("https://"+host+":2380", "https://"+host+":2379", memberTLS(false)))))
	g.Expect(pod.MountedTrustBundle(p, "client")).To(BeEmpty(), "without mutual TLS no client bundle is loaded")
	g.Expect(pod.MountedTrustBundle(pod.Build(newParams(newMember())), "peer")).To(BeEmpty())
}

// Turning TLS on restarts a member twice, each a change of its hash the
// rollout approves: plaintext to both schemes (TLS appears), then both to
// TLS alone (only the URLs' scheme changes). Members that existed before
// the schemes were hashed (plaintext, or TLS with https URLs) keep their
// hash, so upgrading the operator restarts nothing.
func TestURLSchemesOfATLSMemberAreInTheTemplateHash(t *testing.T) {
	g := NewWithT(t)
	plain := newMember(withTLS("http://"+host+":2380", "http://"+host+":2379", nil))
	both := newMember(withTLS("http://"+host+":2380", "http://"+host+":2379", memberTLS(true)))
	tls := newMember(withTLS("https://"+host+":2380", "https://"+host+":2379", memberTLS(true)))

	g.Expect(pod.Outdated(both, pod.Build(newParams(plain)))).To(BeTrue(), "plaintext to both schemes restarts")
	g.Expect(pod.Outdated(tls, pod.Build(newParams(both)))).To(BeTrue(), "both schemes to TLS alone restarts")
	g.Expect(pod.Outdated(tls, pod.Build(newParams(tls)))).To(BeFalse())

	g.Expect(pod.TemplateHash(plain)).To(Equal(templateOnlyHash(plain)), "plaintext members keep their hash")
	g.Expect(pod.TemplateHash(tls)).To(Equal(templateAndTLSHash(tls)), "members created with TLS keep their hash")
	g.Expect(pod.TemplateHash(both)).NotTo(Equal(templateAndTLSHash(both)))
}

// templateAndTLSHash is the hash the operator gave Pods before the URL
// schemes were in it, written out as templateOnlyHash is.
func templateAndTLSHash(m *v1alpha1.EtcdMember) string {
	data, err := json.Marshal(struct {
		Template v1alpha1.MemberTemplate `json:"template"`
		TLS      *v1alpha1.MemberTLS     `json:"tls,omitempty"`
	}{m.Spec.MemberTemplate, m.Spec.TLS})
	if err != nil {
		panic(err)
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	return fmt.Sprintf("%016x", h.Sum64())
}

// A Pod's peer side is read back from the flags it was built with, one
// pass of turning TLS on apart from the next.
func TestPeerTLSOf(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		name              string
		m                 *v1alpha1.EtcdMember
		certs, httpsPeers bool
	}{
		{"plaintext", newMember(withTLS("http://"+host+":2380", "http://"+host+":2379", nil)), false, false},
		{"both schemes", newMember(withTLS("http://"+host+":2380", "http://"+host+":2379", memberTLS(true))), true, false},
		{"TLS", newMember(withTLS("https://"+host+":2380", "https://"+host+":2379", memberTLS(true))), true, true},
	} {
		c, h := pod.PeerTLSOf(pod.Build(newParams(tc.m)))
		g.Expect([]bool{c, h}).To(Equal([]bool{tc.certs, tc.httpsPeers}), tc.name)
	}
}
