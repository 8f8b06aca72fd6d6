//go:build integration

package etcd_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/test/etcdproc"
)

// upgradedFrom35 starts a 3.5.35 cluster with a small snapshot count,
// writes keys, and rolls every member to 3.6.16.
func upgradedFrom35(t *testing.T, g *WithT) []*etcdproc.Member {
	members := etcdproc.StartCluster(t, etcdproc.Binary(t, "v3.5.35"), etcdproc.Options{Members: 3, Args: []string{"--snapshot-count=500"}})
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcdproc.ClientURLs(members), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < 100; i++ {
		_, err := cli.Put(ctx, fmt.Sprintf("k%03d", i), "v")
		g.Expect(err).NotTo(HaveOccurred())
	}
	for _, m := range members {
		m.Stop()
		g.Expect(m.RestartWith(etcdproc.Binary(t, "v3.6.16"))).To(Succeed())
		g.Expect(m.WaitReady(30*time.Second)).To(Succeed(), m.LogTail(20))
	}
	return members
}

// An etcd 3.7 member cannot replay log entries its cluster wrote while it
// ran 3.5; once every member has taken a raft snapshot past them, it can.
// AdvanceLog is how the operator gets there without waiting for writes.
func TestAdvanceLogLets37StartOnALogFrom35(t *testing.T) {
	g := NewWithT(t)
	v37 := etcdproc.Binary(t, "v3.7.3")

	t.Log("without it, the first 3.7 member dies replaying 3.5's entries")
	before := upgradedFrom35(t, g)
	before[0].Stop()
	g.Expect(before[0].RestartWith(v37)).To(Succeed())
	g.Eventually(before[0].Exited, 30*time.Second, 200*time.Millisecond).Should(BeTrue())
	g.Expect(before[0].LogTail(200)).To(ContainSubstring("unmarshal should never fail"))

	t.Log("with it, every member comes up on 3.7 with the data")
	members := upgradedFrom35(t, g)
	d, err := etcd.NewDialer().Dial(context.Background(), etcdproc.ClientURLs(members))
	g.Expect(err).NotTo(HaveOccurred())
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g.Expect(d.AdvanceLog(ctx, 501)).To(Succeed())
	for _, m := range members {
		m.Stop()
		g.Expect(m.RestartWith(v37)).To(Succeed())
		g.Expect(m.WaitReady(30*time.Second)).To(Succeed(), m.LogTail(30))
		v, err := m.Version()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.HasPrefix(v, "3.7.")).To(BeTrue(), v)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcdproc.ClientURLs(members), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	resp, err := cli.Get(ctx, "k", clientv3.WithPrefix(), clientv3.WithCountOnly())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Count).To(BeEquivalentTo(100))
}
