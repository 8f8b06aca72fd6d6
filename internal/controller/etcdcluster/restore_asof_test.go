package etcdcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
)

// scheduled creates a snapshot of schedule "nightly" that ended at completed.
func (h *harness) scheduled(name string, phase v1alpha1.SnapshotPhase, completed time.Time) {
	ctx := context.Background()
	s := &v1alpha1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS,
		Labels: map[string]string{v1alpha1.ScheduleLabel: "nightly"}},
		Spec: v1alpha1.EtcdSnapshotSpec{ClusterName: "old", Destination: restoreDest}}
	h.g.Expect(h.c.Create(ctx, s)).To(Succeed())
	s.Status.Phase, s.Status.SHA256 = phase, strings.Repeat("5", 64)
	if phase.Terminal() {
		s.Status.CompletedAt = &metav1.Time{Time: completed}
	}
	h.g.Expect(h.c.Status().Update(ctx, s)).To(Succeed())
}

func asOf(before time.Time) *v1alpha1.RestoreSpec {
	return &v1alpha1.RestoreSpec{FromSchedule: &v1alpha1.RestoreFromSchedule{Name: "nightly", Before: before.UTC().Format(time.RFC3339)}}
}

var asOfBase = time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)

func hour(n int) time.Time { return asOfBase.Add(time.Duration(n) * time.Hour) }

func TestRestoreAsOfChoosesAndLatches(t *testing.T) {
	h := newRestoreHarness(t, asOf(hour(3)))
	h.scheduled("nightly-1", v1alpha1.SnapshotSucceeded, hour(1))
	h.scheduled("nightly-2", v1alpha1.SnapshotSucceeded, hour(2))
	h.scheduled("nightly-4", v1alpha1.SnapshotSucceeded, hour(4))
	h.scheduled("nightly-25", v1alpha1.SnapshotFailed, hour(2).Add(30*time.Minute))
	h.scheduled("other", v1alpha1.SnapshotSucceeded, hour(2).Add(45*time.Minute))
	// "other" has no schedule label: only the schedule's own count.
	other := &v1alpha1.EtcdSnapshot{}
	h.g.Expect(h.c.Get(context.Background(), keyOfName("other"), other)).To(Succeed())
	other.Labels = nil
	h.g.Expect(h.c.Update(context.Background(), other)).To(Succeed())

	h.reconcile()
	ch := h.cluster().Status.RestoreChoice
	h.g.Expect(ch).NotTo(BeNil())
	h.g.Expect(ch.SnapshotName).To(Equal("nightly-2"), "the newest success completed before the time")
	h.g.Expect(ch.SnapshotCompletedAt.Time).To(BeTemporally("==", hour(2)))
	h.g.Expect(ch.Schedule).To(Equal("nightly"))
	h.g.Expect(ch.Before).To(Equal(hour(3).Format(time.RFC3339)))
	h.g.Expect(h.checkJob()).To(BeNil(), "the check waits for the choice to be recorded")
	h.g.Expect(<-h.events.Events).To(And(ContainSubstring("Normal"), ContainSubstring("RestoreSnapshotChosen"), ContainSubstring("nightly-2")))

	h.reconcile()
	h.g.Expect(h.checkJob().Spec.Template.Spec.Containers[0].Args).To(ContainElement("--key=" + testNS + "/old/nightly-2.db"))

	// A snapshot that would be chosen now changes nothing.
	h.scheduled("nightly-3", v1alpha1.SnapshotSucceeded, hour(2).Add(50*time.Minute))
	h.reconcile()
	h.g.Expect(h.cluster().Status.RestoreChoice.SnapshotName).To(Equal("nightly-2"), "latched")
	h.g.Expect(h.checkJob().Spec.Template.Spec.Containers[0].Args).To(ContainElement("--key=" + testNS + "/old/nightly-2.db"))

	h.finishCheck(backup.Result{Code: backup.CodeOK, Metadata: goodMetadata("3.6.16")})
	h.reconcile()
	seeds := h.seedMembers()
	h.g.Expect(seeds).To(HaveLen(1))
	h.g.Expect(seeds[0].Spec.Restore.Key).To(Equal(testNS + "/old/nightly-2.db"))
	h.g.Expect(h.cluster().Status.RestoredFrom.SnapshotName).To(Equal("nightly-2"))
}

func TestRestoreAsOfRefusesWhenNoneIsBefore(t *testing.T) {
	h := newRestoreHarness(t, asOf(hour(1)))
	h.scheduled("nightly-2", v1alpha1.SnapshotSucceeded, hour(2))
	h.scheduled("nightly-0", v1alpha1.SnapshotRunning, time.Time{})
	h.reconcile()
	for _, c := range []string{v1alpha1.AvailableCondition, v1alpha1.ReadyCondition} {
		h.g.Expect(h.condition(c).Status).To(Equal(metav1.ConditionFalse))
		h.g.Expect(h.condition(c).Reason).To(Equal(v1alpha1.RestoreNoSnapshotBeforeReason), c)
	}
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Message).To(ContainSubstring("earliest of its 1 completed at 2026-12-07T03:00:00Z"))
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(h.cluster().Status.RestoreChoice).To(BeNil())
	h.g.Expect(h.checkJob()).To(BeNil())
	h.g.Expect(h.seedMembers()).To(BeEmpty(), "the seed never starts")
	h.g.Expect(h.events.Events).To(HaveLen(1))
	h.g.Expect(<-h.events.Events).To(And(ContainSubstring("Warning"), ContainSubstring(v1alpha1.RestoreNoSnapshotBeforeReason)))

	// It clears by itself once a snapshot qualifies.
	h.scheduled("nightly-05", v1alpha1.SnapshotSucceeded, hour(0).Add(30*time.Minute))
	h.now = h.now.Add(restoreRecheckAfter)
	h.reconcile()
	h.g.Expect(h.cluster().Status.RestoreChoice.SnapshotName).To(Equal("nightly-05"))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.RestoreCheckingReason))
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionFalse))
}

func TestRestoreAsOfNeverTakesAnotherWhenTheChosenIsGone(t *testing.T) {
	h := newRestoreHarness(t, asOf(hour(3)))
	h.scheduled("nightly-1", v1alpha1.SnapshotSucceeded, hour(1))
	h.scheduled("nightly-2", v1alpha1.SnapshotSucceeded, hour(2))
	h.reconcile()
	h.g.Expect(h.cluster().Status.RestoreChoice.SnapshotName).To(Equal("nightly-2"))
	gone := &v1alpha1.EtcdSnapshot{}
	h.g.Expect(h.c.Get(context.Background(), keyOfName("nightly-2"), gone)).To(Succeed())
	h.g.Expect(h.c.Delete(context.Background(), gone)).To(Succeed())
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.RestoreSnapshotNotFoundReason))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Message).To(ContainSubstring("chosen from schedule nightly"))
	h.g.Expect(h.cluster().Status.RestoreChoice.SnapshotName).To(Equal("nightly-2"), "nightly-1 is not taken in its place")
	h.g.Expect(h.checkJob()).To(BeNil())
}

func keyOfName(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: testNS, Name: name}
}
