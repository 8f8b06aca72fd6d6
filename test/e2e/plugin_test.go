//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// TestKubectlPlugin runs kubectl etcd, found by kubectl on PATH as any plugin
// is, against a 3-member cluster, reaching members only through the API
// server's port-forward.
func TestKubectlPlugin(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "plugin")
	const name = "plug"
	g.Expect(c.Create(ctx, &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3)},
	})).To(Succeed())
	cl, err := framework.WaitForClusterReady(ctx, c, ns, name, 5*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())

	bin := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(bin, "kubectl-etcd"), "./cmd/kubectl-etcd")
	build.Dir = env.RepoRoot
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	plugin := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, env.KubectlPath, append([]string{"etcd"}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig, "PATH="+bin+":"+os.Getenv("PATH"))
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		t.Logf("kubectl etcd %s:\n%s%s", strings.Join(args, " "), stdout.String(), stderr.String())
		return stdout.String(), err
	}

	table, err := plugin("status", name, "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	// The LEADER column by its header, not by "yes": UPDATED says yes too.
	lines := strings.Split(table, "\n")
	col := -1
	for _, line := range lines {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "NAME" {
			col = slices.Index(f, "LEADER")
		}
	}
	g.Expect(col).To(BeNumerically(">", 0), "a LEADER column in:\n%s", table)
	leaders := 0
	for _, m := range cl.Status.Members {
		g.Expect(table).To(ContainSubstring(m.Name))
		for _, line := range lines {
			if f := strings.Fields(line); len(f) > col && f[0] == m.Name && f[col] == "yes" {
				leaders++
			}
		}
	}
	g.Expect(leaders).To(Equal(1), "exactly one leader in:\n%s", table)

	raw, err := plugin("status", name, "-n", ns, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var report struct {
		Clusters []struct {
			Name    string `json:"name"`
			Members []struct {
				Name      string `json:"name"`
				Leader    bool   `json:"leader"`
				Reachable bool   `json:"reachable"`
			} `json:"members"`
		} `json:"clusters"`
	}
	g.Expect(json.Unmarshal([]byte(raw), &report)).To(Succeed())
	g.Expect(report.Clusters).To(HaveLen(1))
	g.Expect(report.Clusters[0].Members).To(HaveLen(3))
	jsonLeaders := 0
	for _, m := range report.Clusters[0].Members {
		g.Expect(m.Reachable).To(BeTrue(), m.Name)
		if m.Leader {
			jsonLeaders++
		}
	}
	g.Expect(jsonLeaders).To(Equal(1))

	_, err = plugin("defrag", name, "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = plugin("alarms", "list", name, "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
}
