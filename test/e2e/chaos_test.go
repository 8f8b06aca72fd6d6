//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/test/chaos/runner"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// TestChaosShort runs the short chaos schedule: faults one after another,
// two at once on the 5-member cluster, in an order drawn from a printed
// seed, under the linearizability checker's clients, with every
// acknowledged write looked up in etcd's history, Kubernetes-like watches
// checked for every watch guarantee and the members' HashKV compared after
// each step, after a self-test that the run catches a stale
// read a live member serves. With CHAOS_PLANT_STALE_READ=1 that read counts
// and the test must fail. It is not parallel: it kills the operator and
// scales it to zero, which every other test would notice, so it runs with
// the other serial tests, before the parallel ones start.
func TestChaosShort(t *testing.T) {
	// It stops nodes and the operator.
	framework.Serial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	g := NewWithT(t)
	g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
	seed, err := runner.SeedFromEnv()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "chaos-short")
	artifacts := filepath.Join(env.RepoRoot, ".cache", "artifacts", "chaos-short", fmt.Sprint(seed))
	cfg := runner.ShortConfig(seed, ns, artifacts)
	cfg.Logf = t.Logf
	// CHAOS_PLANT_STALE_READ=1 shows the run fails on the self-test's read.
	cfg.PlantInRun = runner.PlantInRunFromEnv()
	rep, err := runner.Run(ctx, env, cfg)
	if rep != nil {
		t.Logf("\n%s", rep.Table())
	}
	g.Expect(err).NotTo(HaveOccurred(), "seed %d; artifacts in %s", seed, artifacts)
	g.Expect(rep.Passed()).To(BeTrue())
	g.Expect(rep.SelfTest).NotTo(BeNil())
	g.Expect(rep.SelfTest.Caught).To(BeTrue(), "the checker caught the planted stale read")
	g.Expect(rep.Violations).To(BeZero())
	g.Expect(rep.LostWrites).To(BeZero())
	g.Expect(rep.FaultsTotal).To(BeNumerically(">=", 25))
	g.Expect(rep.KindsSeen).To(BeNumerically(">=", 8))
	g.Expect(rep.Overlaps).To(BeNumerically(">=", 1), "two members of the 5-member cluster were faulted at once")
	// How many epochs end recovered depends on the faults drawn; each of
	// them must have been hashed and compacted.
	g.Expect(rep.RecoveredEpochs).To(BeNumerically(">=", 1), "some steps ended with the cluster recovered")
	g.Expect(rep.HashChecks).To(Equal(rep.RecoveredEpochs), "the members' HashKV was compared after every recovered step")
	g.Expect(rep.WritesChecked).To(BeNumerically(">", 1000), "acknowledged writes were found in etcd's history")
	g.Expect(rep.Acknowledged).To(BeNumerically(">", 1000), "writes went on throughout")
	g.Expect(rep.WatchViolations).To(BeZero())
	g.Expect(rep.WatchEvents).To(BeNumerically(">", 1000), "the Kubernetes-like watchers' events were checked")
	g.Expect(rep.WatchCompactions).To(BeNumerically(">=", rep.RecoveredEpochs), "a watcher met a compaction after every recovered step")
}
