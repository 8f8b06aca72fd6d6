//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

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
