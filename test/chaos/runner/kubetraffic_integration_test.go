//go:build integration

package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/test/chaos"
	"github.com/quorumctl/etcd-operator/test/etcdproc"
)

// TestKubeTrafficOnRealEtcd runs the Kubernetes-like writer and watchers
// against a real 3-member etcd of every pinned version, kills a member
// under them and brings it back, compacts as an epoch does, and checks
// every watch guarantee: none may break, the first watcher must have met
// the compaction and listed again, and both must reach the writer's last
// write. A write taken out of a watcher's real log must then be caught.
// Every member's HashKV at the end must agree, a 3.5 member answering
// without a hash revision included.
func TestKubeTrafficOnRealEtcd(t *testing.T) {
	for _, version := range etcdproc.Versions(t) {
		t.Run(version, func(t *testing.T) {
			g := NewWithT(t)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			members := etcdproc.StartCluster(t, etcdproc.Binary(t, version), etcdproc.Options{Members: 3})
			k, err := startKubeTraffic(etcdproc.ClientURLs(members), "kube/test/", 7)
			g.Expect(err).NotTo(HaveOccurred())
			acked := func(n int64) func() int64 {
				return func() int64 { return k.writer.lastAcked() - n }
			}
			g.Eventually(acked(0), time.Minute, 50*time.Millisecond).Should(BeNumerically(">", 0))
			first := k.writer.lastAcked()
			g.Eventually(acked(first), time.Minute, 50*time.Millisecond).Should(BeNumerically(">=", 100), "the writer makes progress")

			// Before any compaction etcd reports compact revision -1; the
			// hashes compare all the same.
			early := hashAll(ctx, members, first)
			g.Expect(early[0].CompactRevision).To(BeNumerically("==", -1))
			g.Expect(chaos.CompareHashes(early)).To(BeEmpty())

			// A member's watch streams break: the watchers on it go on
			// through another member.
			members[1].Kill()
			killed := k.writer.lastAcked()
			g.Eventually(acked(killed), time.Minute, 50*time.Millisecond).Should(BeNumerically(">=", 50), "the writer goes on with two members")
			g.Expect(members[1].Restart()).To(Succeed())
			g.Expect(members[1].WaitReady(time.Minute)).To(Succeed(), members[1].LogTail(30))

			rev, err := k.compact(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			after := k.writer.lastAcked()
			g.Eventually(acked(after), time.Minute, 50*time.Millisecond).Should(BeNumerically(">=", 50), "the writer goes on after the compaction")

			h, err := k.stop(ctx, true)
			g.Expect(err).NotTo(HaveOccurred(), "every watcher reached the writer's last write")
			events, violations := chaos.CheckWatches(h)
			t.Logf("%d writes acknowledged, %d events checked, compacted at %d", acknowledged(h), events, rev)
			g.Expect(violations).To(BeEmpty())
			g.Expect(events).To(BeNumerically(">=", 2*acknowledged(h)-50), "both watchers received nearly every write")
			g.Expect(h.Compactions).To(Equal([]int64{rev}))
			g.Expect(metCompaction(h.Watchers[0])).To(BeTrue(), "the held watcher met the compaction and listed again")
			for _, w := range h.Watchers {
				g.Expect(progressNotifications(w)).To(BeNumerically(">", 0), "%s got progress notifications", w.Name)
			}
			deletes := 0
			for _, w := range h.Writes {
				if w.Delete && w.Revision > 0 {
					deletes++
				}
			}
			g.Expect(deletes).To(BeNumerically(">", 0), "the writer deletes too")

			// The checker is given the real log with one event taken out.
			broken := h
			broken.Watchers = append([]chaos.WatcherLog(nil), h.Watchers...)
			recs := append([]chaos.WatchRecord(nil), h.Watchers[1].Records...)
			for i, r := range recs {
				if r.Kind == chaos.WatchResponse && len(r.Events) > 1 {
					recs[i].Events = r.Events[1:]
					break
				}
				if r.Kind == chaos.WatchResponse && len(r.Events) == 1 {
					recs = append(recs[:i], recs[i+1:]...)
					break
				}
			}
			broken.Watchers[1].Records = recs
			_, violations = chaos.CheckWatches(broken)
			g.Expect(violations).NotTo(BeEmpty())
			g.Expect(violations[0].Invariant).To(BeElementOf(chaos.InvWatchReliable, chaos.InvWatchResumable))

			hashes := hashAll(ctx, members, k.writer.lastAcked())
			g.Expect(hashes[0].CompactRevision).To(Equal(rev))
			if strings.HasPrefix(version, "v3.5.") {
				g.Expect(hashes[0].HashRevision).To(BeZero(), "etcd 3.5 answers no hash revision")
			}
			g.Expect(chaos.CompareHashes(hashes)).To(BeEmpty())
		})
	}
}

// metCompaction reports whether a watcher's watch ended on a compaction
// and the watcher listed again after it.
func metCompaction(w chaos.WatcherLog) bool {
	for i, r := range w.Records {
		if r.Kind == chaos.WatchEnd && r.Compacted {
			return i+1 < len(w.Records) && w.Records[i+1].Kind == chaos.WatchList
		}
	}
	return false
}

func progressNotifications(w chaos.WatcherLog) int {
	n := 0
	for _, r := range w.Records {
		if r.Progress {
			n++
		}
	}
	return n
}

// hashAll hashes every member at rev, as the runner does.
func hashAll(ctx context.Context, members []*etcdproc.Member, rev int64) []chaos.MemberHash {
	var hashes []chaos.MemberHash
	urls := map[string]string{}
	for _, m := range members {
		hashes = append(hashes, chaos.MemberHash{Member: m.Name, Revision: rev})
		urls[m.Name] = m.ClientURL
	}
	hashEach(ctx, hashes, func(_ context.Context, name string) (string, error) { return urls[name], nil })
	return hashes
}
