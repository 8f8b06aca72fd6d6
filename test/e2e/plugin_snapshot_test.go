//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
	"github.com/quorumctl/etcd-operator/test/localcluster"
)

// runPluginSplit runs the kubectl-etcd built into bin through kubectl, which
// finds it on PATH as it finds any plugin, keeping stdout (JSON) apart
// from stderr, which runPlugin combines.
func runPluginSplit(ctx context.Context, t *testing.T, bin string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, env.KubectlPath, append([]string{"etcd"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig, "PATH="+bin+":"+os.Getenv("PATH"))
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	t.Logf("kubectl etcd %s:\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
	return out.String(), errOut.String(), err
}

// TestPluginSnapshot takes a snapshot with kubectl etcd snapshot into the
// local cluster's S3 server, lists it with kubectl etcd snapshots, and has
// a snapshot into a bucket that does not exist reported as failed with its
// reason.
func TestPluginSnapshot(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	b := newBackupEnv(ctx, t, "plugin-snapshot")
	g := b.g
	b.cluster(ctx, "main", 1, "", nil)
	b.ready(ctx, "main")
	cli := b.etcd(ctx, "main")
	g.Expect(framework.PutKeys(ctx, cli, "plug", 100)).To(Succeed())
	last, err := cli.Get(ctx, "plug/0000")
	g.Expect(err).NotTo(HaveOccurred())
	cli.Close()
	bin := buildPlugin(ctx, t)
	plugin := func(args ...string) (string, string, error) { return runPluginSplit(ctx, t, bin, args...) }

	s3 := []string{"--s3-endpoint", localcluster.S3Endpoint(), "--s3-path-style", "--s3-insecure",
		"--s3-credentials-secret", framework.S3CredentialsSecret, "-n", b.ns}
	out, _, err := plugin(append([]string{"snapshot", "main", "--to", "s3://" + localcluster.S3Bucket + "/" + b.prefix, "--name", "by-plugin"}, s3...)...)
	g.Expect(err).NotTo(HaveOccurred())
	snap := &v1alpha1.EtcdSnapshot{}
	g.Expect(b.c.Get(ctx, types.NamespacedName{Namespace: b.ns, Name: "by-plugin"}, snap)).To(Succeed())
	g.Expect(snap.Status.Phase).To(Equal(v1alpha1.SnapshotSucceeded), "the command waits for the end")
	g.Expect(snap.Status.Revision).To(BeNumerically(">=", last.Header.Revision), "every key written is in it")
	g.Expect(out).To(ContainSubstring("EtcdSnapshot by-plugin succeeded"))
	g.Expect(out).To(ContainSubstring(snap.Status.Location))
	g.Expect(out).To(ContainSubstring(snap.Status.SHA256))
	keys, err := framework.ObjectKeys(ctx, b.bucket)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keys).To(ConsistOf(snap.Status.Key, backup.MetadataKey(snap.Status.Key)), "the snapshot and its metadata are in the bucket")

	_, stderr, err := plugin(append([]string{"snapshot", "main", "--to", "s3://no-such-bucket", "--name", "nowhere"}, s3...)...)
	g.Expect(err).To(HaveOccurred(), "a failed snapshot fails the command")
	g.Expect(stderr).To(ContainSubstring("EtcdSnapshot nowhere failed: " + v1alpha1.BucketNotFoundReason))

	raw, _, err := plugin("snapshots", "main", "-n", b.ns, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var rows []struct {
		Name     string `json:"name"`
		Phase    string `json:"phase"`
		Reason   string `json:"reason"`
		Revision int64  `json:"revision"`
		SHA256   string `json:"sha256"`
		Location string `json:"location"`
	}
	g.Expect(json.Unmarshal([]byte(raw), &rows)).To(Succeed())
	g.Expect(rows).To(HaveLen(2))
	byName := map[string]int{}
	for i, r := range rows {
		byName[r.Name] = i
	}
	g.Expect(byName).To(HaveKey("by-plugin"))
	g.Expect(byName).To(HaveKey("nowhere"))
	ok := rows[byName["by-plugin"]]
	g.Expect(ok.Phase).To(Equal(string(v1alpha1.SnapshotSucceeded)))
	g.Expect(ok.Revision).To(Equal(snap.Status.Revision))
	g.Expect(ok.SHA256).To(Equal(snap.Status.SHA256))
	g.Expect(ok.Location).To(Equal(snap.Status.Location))
	failed := rows[byName["nowhere"]]
	g.Expect(failed.Phase).To(Equal(string(v1alpha1.SnapshotFailed)))
	g.Expect(failed.Reason).To(Equal(v1alpha1.BucketNotFoundReason))
	g.Expect(byName["nowhere"]).To(Equal(0), "newest first")

	table, _, err := plugin("snapshots", "main", "-n", b.ns)
	g.Expect(err).NotTo(HaveOccurred())
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(table), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	g.Expect(lines).To(HaveLen(3), "a header and two rows:\n%s", table)
	g.Expect(lines[0]).To(HavePrefix("NAME PHASE REASON"))
	g.Expect(lines[1]).To(HavePrefix("nowhere Failed " + v1alpha1.BucketNotFoundReason))
	g.Expect(lines[2]).To(HavePrefix("by-plugin Succeeded " + v1alpha1.SnapshotSavedReason))
}
