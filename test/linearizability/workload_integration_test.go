//go:build integration

package linearizability_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quorumctl/etcd-operator/test/etcdproc"
	"github.com/quorumctl/etcd-operator/test/linearizability"
)

// minHistory is how long the history of a healthy cluster runs at least.
const minHistory = 10 * time.Second

// TestWorkloadOnRealEtcd runs the workload against a real 3-member etcd,
// kills the leader under it and brings it back, and checks that the history
// is linearizable: the writes cut off by the kill are of unknown outcome and
// must be accepted whichever way they went.
func TestWorkloadOnRealEtcd(t *testing.T) {
	g := NewWithT(t)
	members := etcdproc.StartCluster(t, etcdproc.Binary(t, ""), etcdproc.Options{Members: 3})

	w, err := linearizability.Start(linearizability.Config{
		Endpoints:          etcdproc.ClientURLs(members),
		ClientsPerEndpoint: 2,
		Interval:           10 * time.Millisecond,
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	h := w.History()

	g.Eventually(func() int { return len(h.Ops()) }, time.Minute, 50*time.Millisecond).
		Should(BeNumerically(">=", 200), "the workload makes progress")

	leader := leaderOf(t, members)
	leader.Kill()
	killedAt := h.Now()
	g.Eventually(func() bool {
		return hasOp(h, func(op linearizability.Op) bool {
			return op.Endpoint == leader.ClientURL && op.Call >= killedAt && op.Output.Unknown
		})
	}, time.Minute, 50*time.Millisecond).Should(BeTrue(), "a write to the killed leader has an unknown outcome")
	g.Eventually(func() bool {
		return hasOp(h, func(op linearizability.Op) bool {
			return op.Endpoint != leader.ClientURL && op.Call >= killedAt && op.Input.Kind == linearizability.KindPut && !op.Output.Unknown
		})
	}, time.Minute, 50*time.Millisecond).Should(BeTrue(), "the two other members elect a leader and take writes")

	g.Expect(leader.Restart()).To(Succeed())
	g.Expect(leader.WaitReady(time.Minute)).To(Succeed(), leader.LogTail(30))
	restartedAt := h.Now()
	g.Eventually(func() bool {
		return hasOp(h, func(op linearizability.Op) bool {
			return op.Endpoint == leader.ClientURL && op.Call >= restartedAt && !op.Output.Unknown
		})
	}, time.Minute, 50*time.Millisecond).Should(BeTrue(), "the restarted member's clients are answered again")
	g.Eventually(h.Now, 2*minHistory, 100*time.Millisecond).Should(BeNumerically(">=", minHistory))

	report, err := w.Stop().Check(linearizability.CheckOptions{
		VisualizationPath: filepath.Join(t.ArtifactDir(), "history.html"),
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("report: %s", report)
	g.Expect(report.Err()).NotTo(HaveOccurred())
	g.Expect(report.Unknown).To(BeNumerically(">=", 1))
	g.Expect(report.Acknowledged).To(BeNumerically(">", 0))
	for _, k := range linearizability.Kinds {
		g.Expect(report.ByKind[k]).To(BeNumerically(">", 0), "some %s calls were checked", k)
	}
	g.Expect(report.LongestWriteOutage).To(BeNumerically(">", 0))
}

// TestCheckerCatchesSplitBrain mixes a fourth, independent etcd into the
// endpoints, as if one member had split off into a cluster of its own. Its
// clients read and write a state the others never see, so reads miss
// acknowledged writes: the checker must say so and leave the visualization.
func TestCheckerCatchesSplitBrain(t *testing.T) {
	g := NewWithT(t)
	bin := etcdproc.Binary(t, "")
	members := etcdproc.StartCluster(t, bin, etcdproc.Options{Members: 3, Token: "main"})
	rogue := etcdproc.StartCluster(t, bin, etcdproc.Options{Members: 1, Token: "rogue"})[0]

	w, err := linearizability.Start(linearizability.Config{
		Endpoints:          append(etcdproc.ClientURLs(members), rogue.ClientURL),
		ClientsPerEndpoint: 2,
		Interval:           10 * time.Millisecond,
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	h := w.History()
	acked := func(onRogue bool) int {
		n := 0
		for _, op := range h.Ops() {
			if (op.Endpoint == rogue.ClientURL) == onRogue && op.Input.Kind == linearizability.KindPut && !op.Output.Unknown {
				n++
			}
		}
		return n
	}
	g.Eventually(func() int { return acked(true) }, time.Minute, 50*time.Millisecond).Should(BeNumerically(">=", 50))
	g.Eventually(func() int { return acked(false) }, time.Minute, 50*time.Millisecond).Should(BeNumerically(">=", 50))

	path := filepath.Join(t.ArtifactDir(), "history.html")
	report, err := w.Stop().Check(linearizability.CheckOptions{VisualizationPath: path})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("report: %s", report)
	g.Expect(report.Result).To(Equal(porcupine.Illegal))
	g.Expect(report.Err()).To(MatchError(ContainSubstring("not linearizable")))
	info, err := os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Size()).To(BeNumerically(">", 0))
}

func hasOp(h *linearizability.History, match func(linearizability.Op) bool) bool {
	for _, op := range h.Ops() {
		if match(op) {
			return true
		}
	}
	return false
}

// leaderOf asks each member whether it leads.
func leaderOf(t *testing.T, members []*etcdproc.Member) *etcdproc.Member {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   etcdproc.ClientURLs(members),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("failed to create a client: %v", err)
	}
	defer func() { _ = cli.Close() }()
	for _, m := range members {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := cli.Status(ctx, m.ClientURL)
		cancel()
		if err != nil {
			t.Fatalf("failed to get the status of %s: %v", m.Name, err)
		}
		if st.Header.MemberId == st.Leader {
			return m
		}
	}
	t.Fatal("no member leads")
	return nil
}
