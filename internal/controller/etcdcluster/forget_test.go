package etcdcluster

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/maintenance"
	"github.com/quorumctl/etcd-operator/internal/metrics"
	"github.com/quorumctl/etcd-operator/internal/remediation"
)

// seriesOf counts the series on the operator's registry that name the
// test cluster.
func seriesOf(g *WithT) int {
	families, err := ctrlmetrics.Registry.Gather()
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	n := 0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if hasLabel(m, metrics.LabelNamespace, testNS) && hasLabel(m, metrics.LabelCluster, testName) {
				n++
			}
		}
	}
	return n
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// Everything the operator keeps in memory about a cluster goes with it,
// whichever way the deletion reaches the controller: the object gone, or
// still there with a deletion timestamp while a finalizer holds it. One
// operator sees clusters come and go for as long as it runs.
func TestDeletingAClusterDropsItsState(t *testing.T) {
	for _, tc := range []struct {
		name string
		// held keeps the object, deleting, behind a finalizer.
		held bool
	}{{"gone", false}, {"being deleted", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.formed(3, "demo-a", "demo-b", "demo-c")
			if tc.held {
				cl := h.cluster()
				cl.Finalizers = []string{"test/hold"}
				h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
			}
			h.reconcile()

			// What passes leave behind, each put there the way its own
			// path puts it.
			s := &scope{cluster: h.cluster()}
			h.r.refuseRestore(s, v1alpha1.RestoreChecksumMismatchReason, "the snapshot does not match its checksum")
			mm := h.r.memos.get(s.cluster)
			a := h.member("demo-a")
			mm.expectRestart(a, "hash")
			mm.mu.Lock()
			mm.sightings[memberKey(a)] = &remediation.Sighting{}
			mm.mu.Unlock()
			mm.setRetryAt(memberKey(a), h.now.Add(time.Minute))
			mm.setRetryAt(compactKey, h.now.Add(time.Minute))
			mm.setDefragmentedAt(memberKey(a), 7)
			mm.setCompacted(7)
			mm.handOver("demo-a", "demo-b")
			mm.observeReach(true, 1)
			h.g.Expect(mm.unreachableStreak().Passes).To(Equal(1))
			// A defragmentation still running in the background.
			cancelled := make(chan struct{})
			mm.start(&maintJob{action: maintenance.Defragment, member: a.Name, key: memberKey(a)},
				func(ctx context.Context) (*etcd.EndpointStatus, error) {
					<-ctx.Done()
					close(cancelled)
					return nil, ctx.Err()
				}, func() {})
			metrics.SnapshotSucceeded(testNS, testName, h.now, 4096, time.Second)
			metrics.SnapshotFailed(testNS, testName, "CredentialsInvalid")
			h.g.Expect(h.r.memos.len()).To(Equal(1))
			h.g.Expect(seriesOf(h.g)).NotTo(BeZero(), "the cluster's series exist before")

			h.g.Expect(h.c.Delete(context.Background(), h.cluster())).To(Succeed())
			h.reconcile()

			h.g.Expect(h.r.memos.len()).To(BeZero(), "the memo, with its restore refusal and maintenance records")
			h.g.Eventually(cancelled).Should(BeClosed(), "the running maintenance call is cancelled")
			h.g.Expect(seriesOf(h.g)).To(BeZero(), "no series of the cluster, its snapshot series included")

			// A cluster re-created under the name inherits none of it.
			fresh := h.r.memos.get(s.cluster)
			h.g.Expect(fresh.lastRefusal()).To(BeNil())
			h.g.Expect(fresh.compactedAt()).To(BeZero())
			h.g.Expect(fresh.retryAt(compactKey)).To(BeZero())
			h.g.Expect(fresh.running()).To(BeNil())
			_, restarting := fresh.restartOf(a)
			h.g.Expect(restarting).To(BeFalse())
			h.g.Expect(fresh.unreachableStreak()).To(BeZero(), "nor its unreachable streak")
		})
	}
}

// Records of members that are gone are dropped while the cluster lives: a
// cluster whose members are replaced over months keeps no trace of each.
func TestMaintenanceRecordsOfGoneMembersAreDropped(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.reconcile()
	mm := h.r.memos.get(h.cluster())
	gone := "demo-x/old-uid"
	mm.setRetryAt(gone, h.now.Add(time.Minute))
	mm.setDefragmentedAt(gone, 7)
	mm.setRetryAt(compactKey, h.now.Add(time.Minute))
	h.reconcile()
	h.g.Expect(mm.retryAt(gone)).To(BeZero())
	h.g.Expect(mm.defragmentedAt(gone)).To(BeZero())
	h.g.Expect(mm.retryAt(compactKey)).NotTo(BeZero(), "the compaction's record is the cluster's, not a member's")
}
