//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// TestSnapshotBeforeUpgrade: spec.rollout.snapshotBeforeUpgrade on the
// local cluster's S3 server. An upgrade takes the snapshot first and
// restarts its first member only after the snapshot has completed; with a
// destination nobody answers on, the upgrade does not start, says why, and
// starts once the destination is fixed.
func TestSnapshotBeforeUpgrade(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	t.Cleanup(cancel)

	t.Run("the snapshot completes before the first member restarts", func(t *testing.T) {
		t.Parallel()
		b := newBackupEnv(ctx, t, "preupgrade")
		g := b.g
		b.upgradeCluster(ctx, "main", 3, framework.S3Destination(b.prefix))
		before := b.ready(ctx, "main")
		pods := b.memberPods(ctx, "main")

		b.setVersion(ctx, "main", "3.6.16")
		cl, err := framework.WaitForClusterReady(ctx, b.c, b.ns, "main", 10*time.Minute)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cl.Status.UpdatedMembers).To(BeEquivalentTo(3))
		g.Expect(cl.Status.CurrentVersion).To(Equal("3.6.16"))
		g.Expect(ids(cl)).To(Equal(ids(before)), "the same members, restarted in place")

		rec := cl.Status.PreUpgradeSnapshot
		g.Expect(rec).NotTo(BeNil(), "status names the snapshot")
		g.Expect(rec.Version).To(Equal("3.6.16"))
		g.Expect(rec.Phase).To(Equal(v1alpha1.SnapshotSucceeded))
		snap := &v1alpha1.EtcdSnapshot{}
		g.Expect(b.c.Get(ctx, types.NamespacedName{Namespace: b.ns, Name: rec.Name}, snap)).To(Succeed())
		g.Expect(snap.Status.Phase).To(Equal(v1alpha1.SnapshotSucceeded))
		g.Expect(metav1.IsControlledBy(snap, cl)).To(BeTrue(), "owned by the cluster")
		g.Expect(snap.Status.EtcdVersion).To(Equal("3.5.35"), "taken before any member moved")
		g.Expect(snap.Status.CompletedAt).NotTo(BeNil())
		keys, err := framework.ObjectKeys(ctx, b.bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(keys).To(ContainElement(snap.Status.Key), "the snapshot is in the bucket")

		var list v1alpha1.EtcdSnapshotList
		g.Expect(b.c.List(ctx, &list, client.InNamespace(b.ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1), "one snapshot for the upgrade")

		// Times from two clocks on one machine: the operator's, which
		// wrote completedAt (to the second), and the API server's, which
		// stamped the restarted Pods. The restart has to come at or after
		// the second the snapshot completed in.
		completed := snap.Status.CompletedAt.Time
		after := b.memberPods(ctx, "main")
		first := time.Time{}
		for name, p := range after {
			g.Expect(p.UID).NotTo(Equal(pods[name].UID), "%s was restarted by the upgrade", name)
			if first.IsZero() || p.CreationTimestamp.Before(&metav1.Time{Time: first}) {
				first = p.CreationTimestamp.Time
			}
		}
		t.Logf("snapshot %s completed at %s; first member Pod re-created at %s", snap.Name, completed.Format(time.RFC3339), first.Format(time.RFC3339))
		g.Expect(first).NotTo(BeTemporally("<", completed), "no member Pod was re-created before the snapshot completed")
		r := &rollCluster{t: t, g: g, c: b.c, ns: b.ns, name: "main"}
		evs := r.rolloutEvents(ctx, "3.6.16")
		g.Expect(evs).NotTo(BeEmpty())
		for _, e := range evs {
			if e.Reason == "MemberUpdating" {
				g.Expect(eventTime(e)).NotTo(BeTemporally("<", completed), "the first restart came after the snapshot: %s", e.Note)
				break
			}
		}
	})

	t.Run("an unreachable destination stops the upgrade before it starts", func(t *testing.T) {
		t.Parallel()
		b := newBackupEnv(ctx, t, "preupgrade-fail")
		g := b.g
		// Nothing listens on port 1 of a name that does not resolve.
		dest := framework.S3Destination(b.prefix)
		dest.S3.Endpoint = "http://no-such-s3.invalid:1"
		b.upgradeCluster(ctx, "main", 1, dest)
		b.ready(ctx, "main")
		pods := b.memberPods(ctx, "main")

		b.setVersion(ctx, "main", "3.6.16")
		cl, err := framework.WaitForClusterCondition(ctx, b.c, b.ns, "main", v1alpha1.StalledCondition,
			metav1.ConditionTrue, v1alpha1.PreUpgradeSnapshotFailedReason, 10*time.Minute)
		g.Expect(err).NotTo(HaveOccurred())
		ready := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ReadyCondition)
		g.Expect(ready.Reason).To(Equal(v1alpha1.PreUpgradeSnapshotFailedReason))
		g.Expect(ready.Message).To(ContainSubstring(cl.Status.PreUpgradeSnapshot.Name), "the condition names the snapshot")
		t.Logf("Ready: %s", ready.Message)
		g.Expect(cl.Status.PreUpgradeSnapshot.Phase).To(Equal(v1alpha1.SnapshotFailed))
		g.Expect(cl.Status.CurrentVersion).To(Equal("3.5.35"), "the version is unchanged")
		for _, m := range cl.Status.Members {
			g.Expect(m.Version).To(Equal("3.5.35"), "%s still runs the old version", m.Name)
		}
		var members v1alpha1.EtcdMemberList
		g.Expect(b.c.List(ctx, &members, client.InNamespace(b.ns), client.MatchingLabels{v1alpha1.ClusterLabel: "main"})).To(Succeed())
		for _, m := range members.Items {
			g.Expect(m.Spec.Version).To(Equal("3.5.35"), "%s was not given the new version", m.Name)
			g.Expect(m.Status.RestartApproved).To(BeEmpty(), "%s: no restart was approved", m.Name)
		}
		now := b.memberPods(ctx, "main")
		for name, p := range now {
			g.Expect(p.UID).To(Equal(pods[name].UID), "%s was not restarted", name)
		}
		events, err := env.Clientset.EventsV1().Events(b.ns).List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		warned := false
		for _, e := range events.Items {
			warned = warned || e.Regarding.Kind == "EtcdCluster" && e.Reason == v1alpha1.PreUpgradeSnapshotFailedReason && e.Type == corev1.EventTypeWarning
		}
		g.Expect(warned).To(BeTrue(), "a Warning Event says the upgrade stopped")

		t.Log("fixing the destination takes a new snapshot, and the upgrade goes on")
		b.editCluster(ctx, "main", func(c *v1alpha1.EtcdCluster) {
			c.Spec.Rollout.SnapshotBeforeUpgrade.Destination = framework.S3Destination(b.prefix)
		})
		cl, err = framework.WaitForClusterReady(ctx, b.c, b.ns, "main", 10*time.Minute)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cl.Status.CurrentVersion).To(Equal("3.6.16"))
		g.Expect(cl.Status.PreUpgradeSnapshot.Phase).To(Equal(v1alpha1.SnapshotSucceeded))
		g.Expect(strings.HasPrefix(cl.Status.PreUpgradeSnapshot.Name, "main-preupgrade-3-6-16-")).To(BeTrue())
	})
}

// upgradeCluster creates a cluster on 3.5.35 that snapshots to dest before
// every upgrade.
func (b *backupEnv) upgradeCluster(ctx context.Context, name string, replicas int32, dest v1alpha1.SnapshotDestination) {
	b.cluster(ctx, name, replicas, "3.5.35", nil)
	b.editCluster(ctx, name, func(c *v1alpha1.EtcdCluster) {
		c.Spec.Rollout.SnapshotBeforeUpgrade = &v1alpha1.PreUpgradeSnapshotSpec{Destination: dest}
	})
}

func (b *backupEnv) setVersion(ctx context.Context, name, version string) {
	b.editCluster(ctx, name, func(c *v1alpha1.EtcdCluster) { c.Spec.Version = version })
}

func (b *backupEnv) editCluster(ctx context.Context, name string, change func(*v1alpha1.EtcdCluster)) {
	cl := &v1alpha1.EtcdCluster{}
	b.g.Expect(b.c.Get(ctx, types.NamespacedName{Namespace: b.ns, Name: name}, cl)).To(Succeed())
	patch := client.MergeFrom(cl.DeepCopy())
	change(cl)
	b.g.Expect(b.c.Patch(ctx, cl, patch)).To(Succeed())
}

func (b *backupEnv) memberPods(ctx context.Context, cluster string) map[string]*corev1.Pod {
	pods, err := env.MemberPods(ctx, b.ns, cluster)
	b.g.Expect(err).NotTo(HaveOccurred())
	return pods
}
