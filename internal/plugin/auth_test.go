package plugin

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// authWorld is one plaintext cluster with etcd's authentication on.
func authWorld(t *testing.T, secret *corev1.Secret) *world {
	w := newWorld(t)
	w.objs = append(w.objs, &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: testNS},
		Spec: v1alpha1.EtcdClusterSpec{Auth: &v1alpha1.AuthSpec{Enabled: true}}})
	w.voter("demo", "demo-a")
	w.voter("demo", "demo-b")
	w.etcd.SetAuth(map[string]string{"root": "roots-pw"})
	if secret != nil {
		w.objs = append(w.objs, secret)
	}
	return w
}

func rootSecret(pw string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "demo-etcd-root", Namespace: testNS},
		Data: map[string][]byte{"password": []byte(pw)}}
}

// kubectl etcd reads root's password from the cluster's root Secret and
// authenticates with it; it never prints it.
func TestPluginAuthenticatesAsRoot(t *testing.T) {
	g := NewWithT(t)
	w := authWorld(t, rootSecret("roots-pw"))
	r := w.run("status", "demo", "-n", testNS)
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out + r.err).NotTo(ContainSubstring("roots-pw"))
	dialed := false
	for _, c := range w.etcd.Calls {
		if c.Op == etcd.OpDial {
			dialed = true
			g.Expect(c.Dial.Credentials).To(Equal(etcd.Credentials{User: "root", Password: "roots-pw"}))
		}
	}
	g.Expect(dialed).To(BeTrue())
}

// A wrong password, a missing Secret and a Secret the user may not read
// each fail with a message that says what to do, and none repeats a
// password.
func TestPluginAuthFailures(t *testing.T) {
	g := NewWithT(t)
	r := authWorld(t, rootSecret("guessed")).run("status", "demo", "-n", testNS)
	g.Expect(r.code).NotTo(Equal(ExitOK))
	g.Expect(r.err).To(ContainSubstring("authentication failed"))
	g.Expect(r.err).NotTo(ContainSubstring("guessed"))

	r = authWorld(t, nil).run("status", "demo", "-n", testNS)
	g.Expect(r.code).NotTo(Equal(ExitOK))
	g.Expect(r.err).To(ContainSubstring("Secret ns1/demo-etcd-root with root's password does not exist"))

	w := authWorld(t, rootSecret("roots-pw"))
	w.funcs = interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*corev1.Secret); ok {
			return forbidden("secrets", key.Name)
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	r = w.run("status", "demo", "-n", testNS)
	g.Expect(r.code).NotTo(Equal(ExitOK))
	g.Expect(r.err).To(ContainSubstring(`"get"`))
	g.Expect(r.err).To(ContainSubstring("root's password"))
}
