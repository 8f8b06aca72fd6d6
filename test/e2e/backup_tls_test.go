//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// tlsCluster creates a cluster with operator-managed peer and mutual client
// TLS (the default of tls: {}).
func (b *backupEnv) tlsCluster(ctx context.Context, name string, restore *v1alpha1.RestoreSpec) {
	cl := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns},
		Spec: v1alpha1.EtcdClusterSpec{
			Replicas:       ptr.To[int32](3),
			MemberTemplate: v1alpha1.MemberTemplate{Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("1Gi"))}},
			TLS:            &v1alpha1.TLSSpec{},
		},
	}
	if restore != nil {
		cl.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Restore: restore}
	}
	b.g.Expect(b.c.Create(ctx, cl)).To(Succeed())
}

// adminClient dials the cluster's members over https with the
// administrators' certificate.
func (b *backupEnv) adminClient(ctx context.Context, cluster string, endpoints ...string) *clientv3.Client {
	m, err := framework.ReadClientSecret(ctx, b.c, b.ns, v1alpha1.AdminClientSecretName(cluster))
	b.g.Expect(err).NotTo(HaveOccurred())
	cfg, err := m.TLSConfig(framework.ClientServerName(b.ns, cluster), true)
	b.g.Expect(err).NotTo(HaveOccurred())
	cli, err := framework.EtcdTLSClient(cfg, framework.HTTPS(endpoints)...)
	b.g.Expect(err).NotTo(HaveOccurred())
	return cli
}

// TestBackupOfATLSCluster: the snapshot Job reaches a mutual-TLS cluster
// with the operator's client certificate, and a new TLS cluster restored
// from it has every key on every member, served under its own CA.
func TestBackupOfATLSCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	b := newBackupEnv(ctx, t, "backup-tls")
	g := b.g
	const keys = 1000
	b.tlsCluster(ctx, "source", nil)
	source := b.ready(ctx, "source")
	svc, err := env.ClientServiceEndpoint(ctx, b.ns, "source")
	g.Expect(err).NotTo(HaveOccurred())
	cli := b.adminClient(ctx, "source", svc)
	defer cli.Close()
	g.Expect(framework.PutKeys(ctx, cli, "tls-backup", keys)).To(Succeed())

	snap := b.snapshot(ctx, "snap", "source", framework.S3Destination(b.prefix))
	g.Expect(snap.Status.Phase).To(Equal(v1alpha1.SnapshotSucceeded), "%+v", succeeded(snap))
	g.Expect(snap.Status.ClusterID).To(Equal(source.Status.ClusterID))

	b.tlsCluster(ctx, "restored", &v1alpha1.RestoreSpec{SnapshotName: "snap"})
	restored := b.ready(ctx, "restored")
	g.Expect(restored.Status.RestoredFrom).NotTo(BeNil())
	g.Expect(restored.Status.RestoredFrom.SHA256).To(Equal(snap.Status.SHA256))
	eps, err := env.MemberEndpoints(ctx, b.ns, "restored")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(eps).To(HaveLen(3))
	for _, ep := range eps {
		rcli := b.adminClient(ctx, "restored", ep)
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		resp, err := rcli.Get(rctx, "tls-backup/", clientv3.WithPrefix(), clientv3.WithSerializable(), clientv3.WithCountOnly())
		rcancel()
		rcli.Close()
		g.Expect(err).NotTo(HaveOccurred(), "member %s over TLS with the restored cluster's own certificate", ep)
		g.Expect(resp.Count).To(Equal(int64(keys)), "member %s has every key", ep)
	}
}
