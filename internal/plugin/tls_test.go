package plugin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// tlsWorld is a cluster whose members serve TLS, and the certificate the
// operator issued on request.
func tlsWorld(t *testing.T) *world {
	t.Helper()
	w := newWorld(t)
	w.objs = append(w.objs, &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: testNS},
		Spec: v1alpha1.EtcdClusterSpec{TLS: &v1alpha1.TLSSpec{}}})
	for _, name := range []string{"demo-a", "demo-b"} {
		ep := strings.Replace(w.endpoint(name), "http://", "https://", 1)
		w.members[name] = w.etcd.AddVoter(name, peerURL("demo", name), ep)
		w.objs = append(w.objs, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: v1alpha1.MemberLabels("demo", name)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd",
				Args: []string{"--listen-client-urls=https://0.0.0.0:2379"}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		})
	}
	ca, err := certs.NewCA("client ca", time.Now(), time.Hour*2)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := certs.Issue(ca, certs.LeafRequest{CommonName: "root", Client: true, Lifetime: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
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
			for _, ep := range c.Endpoints {
				g.Expect(ep).To(HavePrefix("https://127.0.0.1:"), "the tunnels are dialed over TLS")
			}
		}
	}
	g.Expect(dial).NotTo(BeNil())
	g.Expect(dial.TLS).NotTo(BeNil())
	g.Expect(dial.TLS.Certificates).To(HaveLen(1), "with the certificate the operator issued")
	g.Expect(dial.TLS.RootCAs).NotTo(BeNil())
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
	ca, err := certs.NewCA("user ca", time.Now(), 2*time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	leaf, err := certs.Issue(ca, certs.LeafRequest{CommonName: "alice", Client: true, Lifetime: time.Hour}, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	files := map[string][]byte{"ca.crt": ca.CertPEM, "tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM}
	for name, data := range files {
		g.Expect(os.WriteFile(filepath.Join(dir, name), data, 0o600)).To(Succeed())
	}
	res := w.run("--cacert", filepath.Join(dir, "ca.crt"), "--cert", filepath.Join(dir, "tls.crt"), "--key", filepath.Join(dir, "tls.key"), "members", "demo")
	g.Expect(res.code).To(Equal(ExitOK), res.err)
	for _, c := range w.etcd.Calls {
		if c.Op == etcd.OpDial {
			g.Expect(c.Dial.TLS).NotTo(BeNil())
			g.Expect(c.Dial.TLS.Certificates).To(HaveLen(1))
			g.Expect(c.Dial.TLS.Certificates[0].Certificate[0]).To(Equal(leaf.Cert.Raw), "the user's certificate")
		}
	}
}
