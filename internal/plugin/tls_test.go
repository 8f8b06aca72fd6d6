package plugin

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs/certstest"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// tlsClientURL is the client URL a TLS member advertises, by its DNS name.
func tlsClientURL(member string) string {
	return "https://" + v1alpha1.MemberHost(member, "demo", testNS, "cluster.local") + ":2379"
}

// tlsWorld is a cluster whose members serve TLS, and the certificate the
// operator issued on request. Each fake member is at the client URL it
// advertises, so a call reaches it only when dialled by that name (which
// the dial must map to the member's tunnel).
func tlsWorld(t *testing.T) *world {
	t.Helper()
	w := newWorld(t)
	w.objs = append(w.objs, &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: testNS},
		Spec: v1alpha1.EtcdClusterSpec{TLS: &v1alpha1.TLSSpec{}}})
	for _, name := range []string{"demo-a", "demo-b"} {
		w.endpoint(name)
		w.members[name] = w.etcd.AddVoter(name, peerURL("demo", name), tlsClientURL(name))
		w.objs = append(w.objs, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: v1alpha1.MemberLabels("demo", name)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd",
				Args: []string{"--listen-client-urls=https://0.0.0.0:2379", "--advertise-client-urls=" + tlsClientURL(name)}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		})
	}
	ca := certstest.CA(t, "client ca")
	leaf := certstest.ClientLeaf(t, ca, "root")
	w.objs = append(w.objs, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: RequestedClientSecretName("demo"), Namespace: testNS, Labels: v1alpha1.ClusterLabels("demo")},
		Data:       map[string][]byte{"tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM, "ca.crt": ca.CertPEM},
	})
	return w
}

func TestTLSClusterIsDialedOverTLSWithAnIssuedCertificate(t *testing.T) {
	g := NewWithT(t)
	w := tlsWorld(t)
	res := w.run("members", "demo")
	g.Expect(res.code).To(Equal(ExitOK), res.err)
	g.Expect(res.out).To(ContainSubstring("demo-a"))
	var dial *etcd.DialSettings
	for _, c := range w.etcd.Calls {
		if c.Op == etcd.OpDial {
			d := c.Dial
			dial = &d
			g.Expect(c.Endpoints).To(Equal([]string{tlsClientURL("demo-a"), tlsClientURL("demo-b")}),
				"each member is named as its certificate names it")
		}
	}
	g.Expect(dial).NotTo(BeNil())
	g.Expect(dial.Addresses).To(Equal(tunnelAddresses(w, "demo-a", "demo-b")), "each name connects to its own member's tunnel")
	g.Expect(dial.TLS).NotTo(BeNil())
	g.Expect(dial.TLS.Certificates).To(HaveLen(1), "with the certificate the operator issued")
	g.Expect(dial.TLS.RootCAs).NotTo(BeNil())
}

// tunnelAddresses maps each member's advertised host:port to the local
// address of its tunnel.
func tunnelAddresses(w *world, members ...string) map[string]string {
	out := map[string]string{}
	for _, m := range members {
		out[strings.TrimPrefix(tlsClientURL(m), "https://")] = strings.TrimPrefix(w.endpoint(m), "http://")
	}
	return out
}

// status over TLS asks every member about itself by the name the client
// was dialled with (it once passed the tunnel's http:// URL, which a TLS
// client cannot reach, and every member showed as unreachable).
func TestTLSClusterStatusAsksEachMemberByName(t *testing.T) {
	g := NewWithT(t)
	w := tlsWorld(t)
	res := w.run("status", "demo")
	g.Expect(res.code).To(Equal(ExitOK), res.err)
	g.Expect(res.out).NotTo(ContainSubstring("unreachable"))
	var asked []string
	for _, c := range w.etcd.Calls {
		if c.Op == etcd.OpStatus {
			asked = append(asked, c.Endpoint)
		}
	}
	g.Expect(asked).To(ConsistOf(tlsClientURL("demo-a"), tlsClientURL("demo-b")))
}

// A member Pod that advertises no https client URL (none the operator
// renders) is named by its tunnel, as certificates the operator issues
// list 127.0.0.1; the others are still named by their URLs.
func TestTLSMemberWithoutAnAdvertisedURLIsNamedByItsTunnel(t *testing.T) {
	g := NewWithT(t)
	w := tlsWorld(t)
	for _, o := range w.objs {
		if p, ok := o.(*corev1.Pod); ok && p.Name == "demo-b" {
			p.Spec.Containers[0].Args = p.Spec.Containers[0].Args[:1]
		}
	}
	res := w.run("members", "demo")
	g.Expect(res.code).To(Equal(ExitOK), res.err)
	local := strings.TrimPrefix(w.endpoint("demo-b"), "http://")
	want := tunnelAddresses(w, "demo-a")
	want[local] = local
	for _, c := range w.etcd.Calls {
		if c.Op == etcd.OpDial {
			g.Expect(c.Endpoints).To(Equal([]string{tlsClientURL("demo-a"), "https://" + local}))
			g.Expect(c.Dial.Addresses).To(Equal(want))
		}
	}
}

func TestTLSClusterWithoutAnyCertificateSaysWhatToDo(t *testing.T) {
	g := NewWithT(t)
	w := tlsWorld(t)
	w.objs = w.objs[:len(w.objs)-1]
	w.funcs.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		return forbidden("secrets", obj.GetName())
	}
	res := w.run("members", "demo")
	g.Expect(res.code).To(Equal(ExitError))
	g.Expect(res.err).To(ContainSubstring("uses TLS: pass --cacert, --cert and --key"))
}

// With --cacert, --cert and --key the user's own certificate is used and
// nothing is asked of the operator.
func TestTLSClusterIsDialedWithTheUsersOwnCertificate(t *testing.T) {
	g := NewWithT(t)
	w := tlsWorld(t)
	w.objs = w.objs[:len(w.objs)-1]
	w.funcs.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		t.Errorf("created %s; the user's certificate needs nothing from the operator", obj.GetName())
		return nil
	}
	dir := certstest.SecretDir(t, certstest.CA(t, "user ca"), "alice")
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	g.Expect(err).NotTo(HaveOccurred())
	res := w.run("--cacert", filepath.Join(dir, "ca.crt"), "--cert", filepath.Join(dir, "tls.crt"), "--key", filepath.Join(dir, "tls.key"), "members", "demo")
	g.Expect(res.code).To(Equal(ExitOK), res.err)
	for _, c := range w.etcd.Calls {
		if c.Op == etcd.OpDial {
			g.Expect(c.Dial.TLS).NotTo(BeNil())
			g.Expect(c.Dial.TLS.Certificates).To(HaveLen(1))
			g.Expect(c.Dial.TLS.Certificates[0].Certificate[0]).To(Equal(pair.Certificate[0]), "the user's certificate")
		}
	}
}
