//go:build integration

package tlsproc_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/agent"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/certs/certstest"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/test/etcdproc"
)

// saveThroughMain runs snapshot save as the snapshot Job does, into a
// volume, and returns its result and the volume.
func saveThroughMain(ctx context.Context, t *testing.T, endpoints []string, tlsArgs agent.EtcdTLSArgs) (backup.Result, string) {
	t.Helper()
	mount := t.TempDir()
	termination := filepath.Join(t.TempDir(), "termination-log")
	a := agent.SaveArgs{Namespace: "ns", Cluster: "c", Snapshot: "snap", Endpoints: endpoints, EtcdTLS: tlsArgs,
		StorageArgs: agent.StorageArgs{Destination: v1alpha1.SnapshotDestination{PersistentVolumeClaim: &v1alpha1.PVCDestination{ClaimName: "x"}},
			Key: backup.SnapshotKey("ns", "c", "snap"), PVCMount: mount}}
	agent.Main(ctx, append(a.Args(), "--termination-log="+termination), agent.Env{Stdout: io.Discard, Stderr: io.Discard,
		Getenv: func(string) string { return "" }})
	raw, err := os.ReadFile(termination)
	if err != nil {
		t.Fatal(err)
	}
	res, err := backup.ParseResult(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	return res, mount
}

func writeKeys(ctx context.Context, t *testing.T, cfg clientv3.Config, n int) int64 {
	t.Helper()
	cfg.DialTimeout, cfg.Logger = 5*time.Second, zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	var rev int64
	for i := range n {
		resp, err := cli.Put(ctx, fmt.Sprintf("snap/%04d", i), strings.Repeat("v", 100))
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	return rev
}

// TestSnapshotAgentOverMutualTLS: on a mutual-TLS cluster the agent with
// the operator's client certificate, mounted as the snapshot Job mounts it,
// takes a snapshot; without TLS it cannot.
func TestSnapshotAgentOverMutualTLS(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startTLSCluster(t, true)
	asOperator := certstest.ClientConfig([]*certs.KeyPair{c.clientCA}, &c.operator)
	rev := writeKeys(ctx, t, clientv3.Config{Endpoints: etcdproc.ClientURLs(c.members), TLS: asOperator}, 200)

	var operator agent.EtcdTLSArgs
	operator.InDir(certstest.SecretDir(t, c.clientCA, "root"))
	res, mount := saveThroughMain(ctx, t, etcdproc.ClientURLs(c.members), operator)
	g.Expect(res.Code).To(Equal(backup.CodeOK), "%+v", res)
	g.Expect(res.Metadata.Revision).To(BeNumerically(">=", rev))
	g.Expect(res.Metadata.DBSizeBytes).To(BeNumerically(">", 200*100))
	st, err := os.Stat(filepath.Join(mount, res.Metadata.Key))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Size()).To(Equal(res.Metadata.SizeBytes))

	var plain agent.EtcdTLSArgs
	res, _ = saveThroughMain(ctx, t, etcdproc.ClientURLs(c.members), plain)
	g.Expect(res.Code).NotTo(Equal(backup.CodeOK), "no TLS, no snapshot")
}

// TestSnapshotAgentWithRootPassword: on a plaintext cluster with etcd's
// authentication on, the agent with root's password in a file, mounted as
// the snapshot Job mounts it, takes a snapshot; without it, or with a
// wrong one, it cannot.
func TestSnapshotAgentWithRootPassword(t *testing.T) {
	g := NewWithT(t)
	members := etcdproc.StartCluster(t, etcdproc.Binary(t, ""), etcdproc.Options{Members: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	eps := etcdproc.ClientURLs(members)
	op, err := authDial(t, eps)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(op.EnableAuth(ctx, etcd.AuthSetup{RootPassword: rootPassword})).To(Succeed())
	rev := writeKeys(ctx, t, clientv3.Config{Endpoints: eps, Username: "root", Password: rootPassword}, 100)

	dir := t.TempDir()
	file := filepath.Join(dir, "password")
	g.Expect(os.WriteFile(file, []byte(rootPassword), 0o400)).To(Succeed())
	res, _ := saveThroughMain(ctx, t, eps, agent.EtcdTLSArgs{PasswordFile: file})
	g.Expect(res.Code).To(Equal(backup.CodeOK), "%+v", res)
	g.Expect(res.Metadata.Revision).To(BeNumerically(">=", rev))

	res, _ = saveThroughMain(ctx, t, eps, agent.EtcdTLSArgs{})
	g.Expect(res.Code).NotTo(Equal(backup.CodeOK), "no identity, no snapshot")
	wrong := filepath.Join(dir, "wrong")
	g.Expect(os.WriteFile(wrong, []byte("guessed"), 0o400)).To(Succeed())
	res, _ = saveThroughMain(ctx, t, eps, agent.EtcdTLSArgs{PasswordFile: wrong})
	g.Expect(res.Code).NotTo(Equal(backup.CodeOK), "a wrong password, no snapshot")
	g.Expect(res.Message).NotTo(ContainSubstring("guessed"))
}
