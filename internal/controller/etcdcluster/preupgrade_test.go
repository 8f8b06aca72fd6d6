package etcdcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

var preUpgradeMembers = []string{"demo-a", "demo-b", "demo-c"}

// withSnapshotBeforeUpgrade forms a 3-member cluster that asks for a
// snapshot before every upgrade, to the given bucket.
func withSnapshotBeforeUpgrade(t *testing.T, bucket string) *harness {
	h := newHarness(t)
	h.formed(3, preUpgradeMembers...)
	h.setDestination(bucket)
	h.reconcile()
	return h
}

func (h *harness) setDestination(bucket string) {
	h.t.Helper()
	cl := h.cluster()
	cl.Spec.Rollout.SnapshotBeforeUpgrade = &v1alpha1.PreUpgradeSnapshotSpec{Destination: v1alpha1.SnapshotDestination{
		S3: &v1alpha1.S3Destination{Bucket: bucket, CredentialsSecretName: "s3"},
	}}
	cl.Generation++
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
}

func (h *harness) snapshots() []v1alpha1.EtcdSnapshot {
	h.t.Helper()
	var list v1alpha1.EtcdSnapshotList
	h.g.Expect(h.c.List(context.Background(), &list, client.InNamespace(testNS))).To(Succeed())
	return list.Items
}

// endSnapshot plays the snapshot controller recording the snapshot's end.
func (h *harness) endSnapshot(name string, phase v1alpha1.SnapshotPhase, reason, message string) {
	h.t.Helper()
	s := &v1alpha1.EtcdSnapshot{}
	h.g.Expect(h.c.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: name}, s)).To(Succeed())
	s.Status.Phase = phase
	status := metav1.ConditionTrue
	if phase == v1alpha1.SnapshotFailed {
		status = metav1.ConditionFalse
	}
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: v1alpha1.SnapshotSucceededCondition, Status: status, Reason: reason, Message: message})
	h.g.Expect(h.c.Update(context.Background(), s)).To(Succeed())
}

func (h *harness) versions() []string {
	var out []string
	for _, n := range preUpgradeMembers {
		if h.exists(n) {
			out = append(out, h.version(n))
		}
	}
	return out
}

func TestPreUpgradeSnapshot_TheUpgradeWaitsForItThenRolls(t *testing.T) {
	h := withSnapshotBeforeUpgrade(t, "backups")
	old := h.version("demo-a")
	h.g.Expect(h.snapshots()).To(BeEmpty(), "no upgrade, no snapshot")
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Version = "3.6.17" })
	gen := h.cluster().Generation
	for i := 0; i < 3; i++ {
		h.reconcile()
	}
	snaps := h.snapshots()
	h.g.Expect(snaps).To(HaveLen(1), "one snapshot, however many passes ask")
	snap := snaps[0]
	h.g.Expect(snap.Name).To(Equal(fmt.Sprintf("demo-preupgrade-3-6-17-g%d", gen)))
	h.g.Expect(metav1.IsControlledBy(&snap, h.cluster())).To(BeTrue(), "owned by the cluster")
	h.g.Expect(snap.Spec.ClusterName).To(Equal(testName))
	h.g.Expect(snap.Spec.Destination.S3.Bucket).To(Equal("backups"))
	h.g.Expect(snap.Labels).To(HaveKeyWithValue(v1alpha1.PreUpgradeLabel, "3.6.17"))
	h.g.Expect(h.versions()).To(Equal([]string{old, old, old}), "no member moves before the snapshot")
	p := h.condition(v1alpha1.ProgressingCondition)
	h.g.Expect(p.Reason).To(Equal(v1alpha1.PreUpgradeSnapshotPendingReason))
	h.g.Expect(p.Message).To(ContainSubstring(snap.Name))
	h.g.Expect(h.cluster().Status.PreUpgradeSnapshot).To(Equal(&v1alpha1.PreUpgradeSnapshotStatus{
		Version: "3.6.17", Name: snap.Name, Generation: gen, Phase: v1alpha1.SnapshotPending}))
	h.g.Expect(strings.Join(h.drainEvents(), "\n")).To(ContainSubstring("PreUpgradeSnapshot"))

	h.endSnapshot(snap.Name, v1alpha1.SnapshotSucceeded, v1alpha1.SnapshotSavedReason, "stored")
	for i := 0; i < 5 && !slices.Contains(h.versions(), "3.6.17"); i++ {
		h.reconcile()
	}
	h.g.Expect(h.versions()).To(ContainElement("3.6.17"), "the first member rolls once the snapshot succeeded")
	h.g.Expect(h.cluster().Status.PreUpgradeSnapshot.Phase).To(Equal(v1alpha1.SnapshotSucceeded))
	h.g.Expect(h.snapshots()).To(HaveLen(1))
}

func TestPreUpgradeSnapshot_AFailedSnapshotStopsTheUpgradeUntilTheSpecChanges(t *testing.T) {
	h := withSnapshotBeforeUpgrade(t, "no-such-bucket")
	old := h.version("demo-a")
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Version = "3.6.17" })
	h.reconcile()
	first := h.snapshots()[0].Name
	h.endSnapshot(first, v1alpha1.SnapshotFailed, v1alpha1.BucketNotFoundReason, "bucket no-such-bucket does not exist")
	h.drainEvents()
	for i := 0; i < 3; i++ {
		h.reconcile()
	}
	h.g.Expect(h.versions()).To(Equal([]string{old, old, old}), "nothing changes")
	h.g.Expect(h.snapshots()).To(HaveLen(1), "a failed snapshot is not retried without an edit")
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.PreUpgradeSnapshotFailedReason))
	h.g.Expect(ready.Message).To(ContainSubstring("BucketNotFound: bucket no-such-bucket does not exist"))
	stalled := h.condition(v1alpha1.StalledCondition)
	h.g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(stalled.Reason).To(Equal(v1alpha1.PreUpgradeSnapshotFailedReason))
	h.g.Expect(strings.Join(h.drainEvents(), "\n")).To(ContainSubstring("Warning PreUpgradeSnapshotFailed"), "announced once, as a Warning")

	t.Log("fixing the destination takes a new snapshot")
	h.setDestination("backups")
	h.reconcile()
	snaps := h.snapshots()
	h.g.Expect(snaps).To(HaveLen(2))
	second := h.cluster().Status.PreUpgradeSnapshot.Name
	h.g.Expect(second).NotTo(Equal(first))
	for _, s := range snaps {
		if s.Name == second {
			h.g.Expect(s.Spec.Destination.S3.Bucket).To(Equal("backups"))
		}
	}
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Reason).To(Equal(v1alpha1.PreUpgradeSnapshotPendingReason))
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionFalse))
	h.g.Expect(h.versions()).To(Equal([]string{old, old, old}))
}

func TestPreUpgradeSnapshot_SelfHealGoesOnWhileItWaits(t *testing.T) {
	h := withSnapshotBeforeUpgrade(t, "backups")
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Version = "3.6.17" })
	h.reconcile()
	h.g.Expect(h.snapshots()).To(HaveLen(1))
	h.breakPod("demo-a", "Error", wipedFatal)
	h.reconcile()
	h.g.Expect(h.exists("demo-a")).To(BeFalse(), "a broken member is replaced while the upgrade waits")
	h.g.Expect(h.condition(v1alpha1.MembersHealthyCondition).Reason).To(Equal(v1alpha1.ReplacingMemberReason))
}

func TestPreUpgradeSnapshot_NotForAChangeOfResources(t *testing.T) {
	h := withSnapshotBeforeUpgrade(t, "backups")
	old := h.version("demo-a")
	h.editTemplate(func(t *v1alpha1.MemberTemplate) {
		t.Options = &v1alpha1.EtcdOptions{SnapshotCount: ptr.To[int64](5000)}
	})
	for i := 0; i < 3; i++ {
		h.reconcile()
	}
	h.g.Expect(h.snapshots()).To(BeEmpty())
	h.g.Expect(h.versions()).To(Equal([]string{old, old, old}))
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Reason).NotTo(Equal(v1alpha1.PreUpgradeSnapshotPendingReason))
	rolled := 0
	for _, n := range preUpgradeMembers {
		if o := h.member(n).Spec.Options; o != nil && o.SnapshotCount != nil {
			rolled++
		}
	}
	h.g.Expect(rolled).To(BeNumerically(">", 0), "the rollout goes on without a snapshot")
}
