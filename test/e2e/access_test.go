//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// memberPolicyMessage is how the chart's ValidatingAdmissionPolicy refuses
// a write of EtcdMember spec by anyone but the operator.
const memberPolicyMessage = "EtcdMember spec is written by the etcd operator only"

// TestTenantCannotWriteMemberSpec: a namespace user, even one granted
// patch on EtcdMembers, cannot change a member's spec (the chart's
// admission policy refuses it by name), while the aggregated edit role
// lets them manage EtcdClusters and only read members. The operator's own
// writes still pass: it replaces a member that lost its data (a new
// EtcdMember, its spec patched) and the cluster heals.
func TestTenantCannotWriteMemberSpec(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := newHealCluster(ctx, t, "tenant", func(c *v1alpha1.EtcdCluster) {
		c.Spec.Storage = v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: ptr.To(resource.MustParse("256Mi"))}
	})
	g := h.g
	admin := h.c
	editor, owner := "editor@"+h.ns, "owner@"+h.ns

	t.Log("editor holds Kubernetes' edit role, owner also patch and update on EtcdMembers")
	bind := func(name, kind, role, user string) {
		g.Expect(admin.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		})).To(Succeed())
	}
	g.Expect(admin.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "member-writer", Namespace: h.ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"etcdmembers"},
			Verbs: []string{"get", "list", "patch", "update"}}},
	})).To(Succeed())
	bind("editor-edit", "ClusterRole", "edit", editor)
	bind("owner-edit", "ClusterRole", "edit", owner)
	bind("owner-members", "Role", "member-writer", owner)
	as := func(user string) client.Client {
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
		c, err := client.New(cfg, client.Options{Scheme: admin.Scheme()})
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}
	asEditor, asOwner := as(editor), as(owner)

	t.Log("edit reads members and edits clusters (aggregated roles), once aggregation has caught up")
	var members v1alpha1.EtcdMemberList
	g.Eventually(func() error {
		return asEditor.List(ctx, &members, client.InNamespace(h.ns))
	}).WithTimeout(time.Minute).Should(Succeed())
	g.Expect(members.Items).To(HaveLen(3))
	cl := &v1alpha1.EtcdCluster{}
	g.Expect(asEditor.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: h.name}, cl)).To(Succeed())
	patch := client.MergeFrom(cl.DeepCopy())
	cl.Annotations = map[string]string{"team": "a"}
	g.Expect(asEditor.Patch(ctx, cl, patch)).To(Succeed())

	victim := h.pick(ctx, false)
	edit := func(c client.Client, mutate func(*v1alpha1.EtcdMember)) error {
		m := victim.DeepCopy()
		patch := client.MergeFrom(m.DeepCopy())
		mutate(m)
		return c.Patch(ctx, m, patch)
	}
	t.Log("edit alone may not patch a member at all")
	err := edit(asEditor, func(m *v1alpha1.EtcdMember) { m.Spec.ForceNewCluster = true })
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).NotTo(ContainSubstring(memberPolicyMessage), "RBAC refuses it before the policy")

	t.Log("patch on members does not reach their spec: the policy refuses it, and the CRD an identity field first")
	for what, refusal := range map[string]struct {
		mutate  func(*v1alpha1.EtcdMember)
		message string
	}{
		"forceNewCluster": {func(m *v1alpha1.EtcdMember) { m.Spec.ForceNewCluster = true }, memberPolicyMessage},
		"initialCluster":  {func(m *v1alpha1.EtcdMember) { m.Spec.InitialCluster = m.Name + "=http://198.51.100.1:2380" }, memberPolicyMessage},
		// The API server validates the object before admission policies run.
		"clientURL": {func(m *v1alpha1.EtcdMember) { m.Spec.ClientURL = "http://198.51.100.1:2379" }, "spec.clientURL cannot be changed once set"},
	} {
		err := edit(asOwner, refusal.mutate)
		g.Expect(err).To(HaveOccurred(), what)
		g.Expect(err.Error()).To(ContainSubstring(refusal.message), what)
	}
	g.Expect(edit(asOwner, func(m *v1alpha1.EtcdMember) { m.Labels["team"] = "a" })).To(Succeed(), "metadata stays writable")
	var still v1alpha1.EtcdMember
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(&victim), &still)).To(Succeed())
	g.Expect(still.Spec).To(Equal(victim.Spec), "no refused write reached the member")

	t.Log("the operator still heals the cluster: a new member replaces one whose data was lost")
	h.recover(ctx, victim, "PodLost", func() error {
		return env.Clientset.CoreV1().Pods(h.ns).Delete(ctx, victim.Name, metav1.DeleteOptions{})
	})
}

// TestWatchNamespacesScopeTheServiceAccount renders the chart as a second
// release watching one namespace and creates only its ServiceAccount and
// RBAC (no second operator runs, so nothing competes with the suite's):
// the real API server then lets that ServiceAccount create Pods in the
// watched namespace and in no other, read the kubelets' Leases only in
// kube-node-lease, and read nodes cluster-wide.
func TestWatchNamespacesScopeTheServiceAccount(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	release := env.CreateNamespace(t, "scoped-operator")
	watched := env.CreateNamespace(t, "scoped-watched")
	unwatched := env.CreateNamespace(t, "scoped-unwatched")
	const releaseName = "scoped-etcd-operator"

	objs := renderChartAs(ctx, t, releaseName, release, "--set", "watchNamespaces={"+watched+"}")
	admin, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	created := 0
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		default:
			continue
		}
		g.Expect(admin.Create(ctx, o)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
		created++
		o := o
		t.Cleanup(func() { _ = admin.Delete(context.Background(), o) })
	}
	g.Expect(created).To(BeNumerically(">", 4))

	sa := "system:serviceaccount:" + release + ":" + releaseName
	canI := func(args ...string) string {
		r := env.Kubectl(ctx, append([]string{"auth", "can-i", "--as", sa}, args...)...)
		// can-i exits 1 for "no"; its answer is on stdout either way.
		return strings.TrimSpace(r.Stdout)
	}
	g.Expect(canI("create", "pods", "-n", watched)).To(Equal("yes"))
	g.Expect(canI("create", "pods", "-n", unwatched)).To(Equal("no"), "a Pod in a namespace the operator does not watch")
	g.Expect(canI("create", "pods", "-n", release)).To(Equal("no"), "not even in its own namespace, which it does not watch")
	g.Expect(canI("list", "secrets", "--all-namespaces")).To(Equal("no"))
	g.Expect(canI("create", "etcdmembers.etcd.quorumctl.io", "-n", watched)).To(Equal("yes"))
	g.Expect(canI("patch", "etcdclusters.etcd.quorumctl.io", "--subresource=status", "-n", watched)).To(Equal("yes"))
	g.Expect(canI("patch", "etcdclusters.etcd.quorumctl.io", "--subresource=status", "-n", unwatched)).To(Equal("no"))
	g.Expect(canI("get", "leases.coordination.k8s.io", "-n", "kube-node-lease")).To(Equal("yes"))
	g.Expect(canI("get", "leases.coordination.k8s.io", "-n", unwatched)).To(Equal("no"))
	g.Expect(canI("list", "nodes")).To(Equal("yes"))
	g.Expect(canI("list", "storageclasses.storage.k8s.io")).To(Equal("yes"))
}

// TestOperatorScopedToAWatchedNamespace upgrades the suite's own release to
// watch one namespace, so no second operator competes with it: the chart
// then grants the operator's ServiceAccount its namespaced permissions
// there only, and the operator, with nothing more, brings a cluster in that
// namespace to Ready while the API server refuses it a Pod anywhere else.
// The release is rolled back afterwards. It changes what the operator
// watches, so it runs alone.
func TestOperatorScopedToAWatchedNamespace(t *testing.T) {
	framework.Serial(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
	watched := env.CreateNamespace(t, "only-watched")
	unwatched := env.CreateNamespace(t, "not-watched")

	helm := func(ctx context.Context, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, "go", append([]string{"tool",
			"-modfile=" + filepath.Join(env.RepoRoot, "hack", "tools", "helm", "go.mod"), "helm",
			"--kubeconfig", env.Kubeconfig, "--namespace", framework.OperatorNamespace()}, args...)...)
		cmd.Dir = env.RepoRoot
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "helm %v:\n%s", args, out)
	}
	t.Log("upgrade the release to watch one namespace")
	helm(ctx, "upgrade", "etcd-operator", filepath.Join(env.RepoRoot, "charts", "etcd-operator"), "--reuse-values",
		"--set", "watchNamespaces={"+watched+"}", "--wait", "--timeout", "5m")
	t.Cleanup(func() {
		// The previous revision: every namespace watched again. The test's
		// context is gone by now.
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		helm(ctx, "rollback", "etcd-operator", "0", "--wait", "--timeout", "5m")
		g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
	})

	sa := "system:serviceaccount:" + framework.OperatorNamespace() + ":etcd-operator"
	canI := func(args ...string) string {
		r := env.Kubectl(ctx, append([]string{"auth", "can-i", "--as", sa}, args...)...)
		return strings.TrimSpace(r.Stdout)
	}
	g.Expect(canI("create", "pods", "-n", watched)).To(Equal("yes"))
	g.Expect(canI("create", "pods", "-n", unwatched)).To(Equal("no"), "a Pod in a namespace the operator does not watch")
	g.Expect(canI("list", "secrets", "--all-namespaces")).To(Equal("no"))

	t.Log("the operator runs a cluster in the watched namespace with those grants alone")
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Create(ctx, &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "scoped", Namespace: watched},
		Spec: v1alpha1.EtcdClusterSpec{
			Replicas:       ptr.To[int32](3),
			MemberTemplate: v1alpha1.MemberTemplate{Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("256Mi"))}},
		},
	})).To(Succeed())
	_, err = framework.WaitForClusterReady(ctx, c, watched, "scoped", 5*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
}
