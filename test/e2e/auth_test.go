//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// authClient dials endpoint as user with password; clientv3 exchanges
// them for a token while dialing, so a refused password fails here.
func authClient(endpoint, user, password string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second,
		Username: user, Password: password, Logger: zap.NewNop()})
}

// TestAuth is issue 28's acceptance 5: authentication turned on for a
// running plaintext cluster, with root's password generated into a Secret
// the cluster owns; root with that password reads and writes, a wrong
// password and no identity are refused; the password is in no Event,
// status or command line; and the operator keeps managing the cluster,
// which takes the root role for every call it makes: scaling 3 → 5 → 3 and
// a member Pod deleted and brought back.
func TestAuth(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "auth")
	const name = "auth"
	cl := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.EtcdClusterSpec{
			Replicas:       ptr.To[int32](3),
			MemberTemplate: v1alpha1.MemberTemplate{Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("256Mi"))}},
		},
	}
	g.Expect(c.Create(ctx, cl)).To(Succeed())
	_, err = framework.WaitForClusterReady(ctx, c, ns, name, 5*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	svc, err := env.ClientServiceEndpoint(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	plain, err := framework.EtcdClient(svc)
	g.Expect(err).NotTo(HaveOccurred())
	defer plain.Close()
	_, err = plain.Put(ctx, "before-auth", "v")
	g.Expect(err).NotTo(HaveOccurred())

	// Turn it on for the running cluster.
	g.Expect(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cl)).To(Succeed())
	patch := client.MergeFrom(cl.DeepCopy())
	cl.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true}
	g.Expect(c.Patch(ctx, cl, patch)).To(Succeed())
	g.Expect(framework.WaitFor(ctx, 2*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cl); err != nil {
			return false, err
		}
		return cl.Status.Auth != nil && cl.Status.Auth.Enabled, nil
	})).To(Succeed(), "status.auth.enabled")
	g.Expect(cl.Status.Auth.RootSecretName).To(Equal(v1alpha1.GeneratedRootSecretName(name)))
	secret, err := env.Clientset.CoreV1().Secrets(ns).Get(ctx, cl.Status.Auth.RootSecretName, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(metav1.IsControlledBy(secret, cl)).To(BeTrue(), "the cluster owns the generated Secret")
	password := string(secret.Data[v1alpha1.RootPasswordKey])
	g.Expect(password).NotTo(BeEmpty())
	_, err = framework.WaitForClusterReady(ctx, c, ns, name, 2*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())

	// root with the right password works; the data is there.
	root, err := authClient(svc, "root", password)
	g.Expect(err).NotTo(HaveOccurred())
	defer root.Close()
	resp, err := root.Get(ctx, "before-auth")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Kvs).To(HaveLen(1))
	_, err = root.Put(ctx, "after-auth", "v")
	g.Expect(err).NotTo(HaveOccurred())
	// A wrong one is refused, and so is no identity at all.
	_, err = authClient(svc, "root", password+"-wrong")
	g.Expect(etcd.IsAuthFailed(err)).To(BeTrue(), "a wrong password: %v", err)
	_, err = plain.Put(ctx, "anonymous", "v")
	g.Expect(etcd.IsAuthRequired(err)).To(BeTrue(), "no identity: %v", err)

	expectPasswordNowhere(ctx, t, c, ns, name, password)

	// The operator keeps managing the cluster as root.
	scale(ctx, t, c, ns, name, 5)
	expectMembersAsRoot(ctx, t, root, 5)
	scale(ctx, t, c, ns, name, 3)
	expectMembersAsRoot(ctx, t, root, 3)

	// Self-heal: a member's Pod deleted comes back, and the cluster is
	// Ready again.
	pods, err := env.MemberPods(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	var victim *corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			victim = p
			break
		}
	}
	g.Expect(victim).NotTo(BeNil())
	g.Expect(env.Clientset.CoreV1().Pods(ns).Delete(ctx, victim.Name, metav1.DeleteOptions{})).To(Succeed())
	g.Expect(framework.WaitFor(ctx, 3*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		p, err := env.Clientset.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return p.UID != victim.UID && framework.PodReady(p), nil
	})).To(Succeed(), "member %s's Pod comes back", victim.Name)
	_, err = framework.WaitForClusterReady(ctx, c, ns, name, 3*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	expectMembersAsRoot(ctx, t, root, 3)
	resp, err = root.Get(ctx, "after-auth")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Kvs).To(HaveLen(1))
	expectPasswordNowhere(ctx, t, c, ns, name, password)
}

// expectMembersAsRoot checks etcd's own member list, as root: n voters,
// no learner.
func expectMembersAsRoot(ctx context.Context, t *testing.T, root *clientv3.Client, n int) {
	t.Helper()
	g := NewWithT(t)
	list, err := root.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Members).To(HaveLen(n))
	for _, m := range list.Members {
		g.Expect(m.IsLearner).To(BeFalse(), "member %s", m.Name)
	}
}

// expectPasswordNowhere: root's password is in no Event of the namespace,
// in no part of the cluster's or its members' status, and on no member
// Pod's command line or environment.
func expectPasswordNowhere(ctx context.Context, t *testing.T, c client.Client, ns, name, password string) {
	t.Helper()
	g := NewWithT(t)
	events, err := env.Clientset.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range events.Items {
		g.Expect(e.Note).NotTo(ContainSubstring(password), "Event %s", e.Name)
	}
	cl := &v1alpha1.EtcdCluster{}
	g.Expect(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cl)).To(Succeed())
	var members v1alpha1.EtcdMemberList
	g.Expect(c.List(ctx, &members, client.InNamespace(ns))).To(Succeed())
	pods, err := env.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	for what, obj := range map[string]any{"cluster": cl, "members": members.Items, "pods": pods.Items} {
		raw, err := json.Marshal(obj)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.Contains(string(raw), password)).To(BeFalse(), fmt.Sprintf("root's password in the %s", what))
	}
}

// TestAuthMutualTLS: a cluster created with mutual client TLS and
// authentication on. The operator turns it on and keeps managing the
// cluster as root by its client certificate alone (no password is ever
// exchanged); a client certificate naming root works, one naming a user
// etcd does not have is refused.
func TestAuthMutualTLS(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "auth-mtls")
	const name = "auth-mtls"
	cl := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.EtcdClusterSpec{
			Replicas:       ptr.To[int32](3),
			TLS:            &v1alpha1.TLSSpec{},
			Auth:           &v1alpha1.AuthSpec{Enabled: true},
			MemberTemplate: v1alpha1.MemberTemplate{Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("256Mi"))}},
		},
	}
	g.Expect(c.Create(ctx, cl)).To(Succeed())
	g.Expect(framework.WaitFor(ctx, 5*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cl); err != nil {
			return false, err
		}
		return cl.Status.Auth != nil && cl.Status.Auth.Enabled, nil
	})).To(Succeed(), "status.auth.enabled")
	_, err = framework.WaitForClusterReady(ctx, c, ns, name, 3*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())

	svc, err := env.ClientServiceEndpoint(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	root, err := framework.ClusterClient(ctx, c, ns, name, svc)
	g.Expect(err).NotTo(HaveOccurred())
	defer root.Close()
	_, err = root.Put(ctx, "by-certificate", "v")
	g.Expect(err).NotTo(HaveOccurred(), "a certificate naming root")

	nobody := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-nobody", Namespace: ns,
		Labels:      v1alpha1.ClusterLabels(name),
		Annotations: map[string]string{v1alpha1.IssueClientCertificateAnnotation: "nobody"}}}
	g.Expect(c.Create(ctx, nobody)).To(Succeed())
	m, err := framework.ReadClientSecret(ctx, c, ns, nobody.Name)
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := m.TLSConfig(framework.ClientServerName(ns, name), true)
	g.Expect(err).NotTo(HaveOccurred())
	other, err := framework.EtcdTLSClient(cfg, framework.HTTPS([]string{svc})...)
	g.Expect(err).NotTo(HaveOccurred())
	defer other.Close()
	_, err = other.Put(ctx, "by-nobody", "v")
	g.Expect(etcd.IsAuthFailed(err)).To(BeTrue(), "a certificate naming a user etcd does not have: %v", err)

	// A member Pod deleted comes back, with the operator acting by its
	// certificate.
	pods, err := env.MemberPods(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	var victim *corev1.Pod
	for _, p := range pods {
		victim = p
		break
	}
	g.Expect(env.Clientset.CoreV1().Pods(ns).Delete(ctx, victim.Name, metav1.DeleteOptions{})).To(Succeed())
	g.Expect(framework.WaitFor(ctx, 3*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		p, err := env.Clientset.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return p.UID != victim.UID && framework.PodReady(p), nil
	})).To(Succeed(), "member %s's Pod comes back", victim.Name)
	_, err = framework.WaitForClusterReady(ctx, c, ns, name, 3*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	expectMembersAsRoot(ctx, t, root, 3)
}
