package etcdrecovery

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
)

// failKeyCheck ends the key check Job as the Job controller does at its
// deadline when the agent never ran: failed, and no result anywhere.
func (f *fixture) failKeyCheck(recName string) {
	f.t.Helper()
	j := f.keyJob(recName)
	f.g.Expect(j).NotTo(BeNil())
	j.Status.Conditions = []batchv1.JobCondition{deadline}
	f.g.Expect(f.c.Status().Update(context.Background(), j)).To(Succeed())
}

// keyCheckPod gives the key check Job one Pod in the state given, as the
// kubelet and the scheduler would.
func (f *fixture) keyCheckPod(recName string, status corev1.PodStatus) {
	f.t.Helper()
	ctx := context.Background()
	j := f.keyJob(recName)
	f.g.Expect(j).NotTo(BeNil())
	f.g.Expect(f.c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns))).To(Succeed())
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-p", Namespace: ns, UID: "key-check-pod",
		Labels: map[string]string{batchv1.ControllerUidLabel: string(j.UID)}}}
	f.g.Expect(f.c.Create(ctx, p)).To(Succeed())
	p.Status = status
	f.g.Expect(f.c.Status().Update(ctx, p)).To(Succeed())
}

// untouched is the invariant of every step before the key is known good:
// no plan, still pending, no member deleted, nothing for the cluster
// controller to act on, no Planned event.
func (f *fixture) untouched(er *v1alpha1.EtcdRecovery, members []string) {
	f.t.Helper()
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryPending))
	f.g.Expect(er.Status.Plan).To(BeNil())
	f.g.Expect(er.Status.StartedAt).To(BeNil())
	f.g.Expect(f.memberNames()).To(Equal(members))
	f.g.Expect(f.cluster().Status.Recovery).To(BeNil())
	for len(f.events.Events) > 0 {
		f.g.Expect(<-f.events.Events).NotTo(ContainSubstring("RecoveryPlanned"))
	}
}

// A key check Job that never ran its agent is no verdict on the key or
// the snapshot: the recovery stays pending, says why the check did not
// run, and checks again after a backoff, with nothing changed until a
// check finds the key good.
func TestPlan_AKeyCheckThatDidNotRunIsRetried(t *testing.T) {
	f := newFixture(t, "demo-a", "demo-b", "demo-c")
	now := time.Unix(1_700_000_000, 0)
	f.r.Now = func() time.Time { return now }
	f.lose(map[string]string{"demo-b": "DataDirLost", "demo-c": "DataDirLost"}, map[string][2]int64{"demo-a": {40, 30}})
	f.sealed("sealed")
	members := f.memberNames()
	f.create("rec", keyedSpec("sealed", "dr-key"))
	er := f.reconcile("rec")
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.RecoveryKeyCheckingReason))
	f.g.Expect(f.keyJob("rec").Annotations).To(HaveKeyWithValue(keyCheckAttemptAnnotation, "1"))

	// The Job reaches its deadline without its Pod ever running.
	f.failKeyCheck("rec")
	er = f.reconcile("rec")
	f.untouched(er, members)
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.RecoveryKeyCheckNotRunReason))
	f.g.Expect(planned(er).Message).To(ContainSubstring("check 1 of it did not run: its Job ended without the agent's result (DeadlineExceeded: Job was active longer than specified deadline)"))
	f.g.Expect(planned(er).Message).To(ContainSubstring("the check is started again at 2023-11-14T22:13:50Z"))
	f.g.Expect(er.Status.KeyCheck).To(Equal(&v1alpha1.RecoveryKeyCheckStatus{Snapshot: "sealed", Attempt: 1,
		NotRun: "its Job ended without the agent's result (DeadlineExceeded: Job was active longer than specified deadline)", RetryAt: metav1.NewTime(now.Add(30 * time.Second))}))
	f.g.Expect(f.keyJob("rec")).To(BeNil(), "the Job that did not run is replaced")

	// Not before the backoff.
	now = now.Add(29 * time.Second)
	er = f.reconcile("rec")
	f.untouched(er, members)
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.RecoveryKeyCheckNotRunReason))
	f.g.Expect(f.keyJob("rec")).To(BeNil())

	now = now.Add(time.Second)
	er = f.reconcile("rec")
	f.untouched(er, members)
	f.g.Expect(f.keyJob("rec").Annotations).To(HaveKeyWithValue(keyCheckAttemptAnnotation, "2"))

	// The second cannot pull its image: it cannot start, and is replaced
	// after twice the wait.
	f.keyCheckPod("rec", pending(waiting("ImagePullBackOff", `Back-off pulling image "operator:test"`)))
	er = f.reconcile("rec")
	f.untouched(er, members)
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.RecoveryKeyCheckNotRunReason))
	f.g.Expect(planned(er).Message).To(ContainSubstring(`check 2 of it did not run: its Pod cannot start: ImagePullBackOff: Back-off pulling image "operator:test"`))
	f.g.Expect(er.Status.KeyCheck.Attempt).To(Equal(int32(2)))
	f.g.Expect(er.Status.KeyCheck.RetryAt.Time).To(Equal(now.Add(time.Minute)))
	f.g.Expect(f.keyJob("rec")).To(BeNil())

	now = now.Add(time.Minute)
	er = f.reconcile("rec")
	f.untouched(er, members)
	f.g.Expect(f.keyJob("rec").Annotations).To(HaveKeyWithValue(keyCheckAttemptAnnotation, "3"))
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.RecoveryKeyCheckingReason))

	// The third runs: its verdict, and only that, plans the recovery.
	f.finishKeyCheck("rec", backup.Result{Code: backup.CodeOK})
	er = f.reconcile("rec")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRunning))
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.PlanRecordedReason))
	f.g.Expect(er.Status.Plan.Snapshot).To(Equal("sealed"))
}

// A Pod that waits for a node is held up, not gone: its Job is kept, as the
// scheduler may still place it, and the recovery says why it waits.
func TestPlan_AKeyCheckPodThatCannotBeScheduled(t *testing.T) {
	f := newFixture(t, "demo-a", "demo-b", "demo-c")
	f.lose(map[string]string{"demo-b": "DataDirLost", "demo-c": "DataDirLost"}, map[string][2]int64{"demo-a": {40, 30}})
	f.sealed("sealed")
	members := f.memberNames()
	f.create("rec", keyedSpec("sealed", "dr-key"))
	f.reconcile("rec")
	st := pending()
	st.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: 3 Insufficient memory."}}
	f.keyCheckPod("rec", st)
	er := f.reconcile("rec")
	f.untouched(er, members)
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.RecoveryKeyCheckNotRunReason))
	f.g.Expect(planned(er).Message).To(ContainSubstring("its Pod rec-key-check-p cannot be scheduled: 0/3 nodes are available: 3 Insufficient memory."))
	f.g.Expect(planned(er).Message).To(ContainSubstring("its Job is kept while its Pod may still start"))
	f.g.Expect(er.Status.KeyCheck).To(BeNil(), "nothing has failed yet")
	f.g.Expect(f.keyJob("rec")).NotTo(BeNil())

	// Scheduled after all (a node was added), the check runs and reports.
	f.finishKeyCheck("rec", backup.ResultOf(&backup.WrongKeyError{Recorded: "sha256:aa", Given: "sha256:bb"}))
	er = f.reconcile("rec")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRefused))
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.RecoveryKeyWrongReason))
}

// A verdict after checks that did not run is as final as a first one.
func TestPlan_AVerdictAfterARetryIsFinal(t *testing.T) {
	for code, reason := range map[backup.Code]string{
		backup.CodeEncryptionKeyWrong: v1alpha1.RecoveryKeyWrongReason,
		backup.CodeStorageError:       v1alpha1.SnapshotUnreadableReason,
	} {
		t.Run(string(code), func(t *testing.T) {
			f := newFixture(t, "demo-a", "demo-b", "demo-c")
			now := time.Unix(1_700_000_000, 0)
			f.r.Now = func() time.Time { return now }
			f.lose(map[string]string{"demo-b": "DataDirLost", "demo-c": "DataDirLost"}, map[string][2]int64{"demo-a": {40, 30}})
			f.sealed("sealed")
			members := f.memberNames()
			f.create("rec", keyedSpec("sealed", "dr-key"))
			f.reconcile("rec")
			f.failKeyCheck("rec")
			f.reconcile("rec")
			now = now.Add(time.Hour)
			f.reconcile("rec")
			f.finishKeyCheck("rec", backup.Result{Code: code, Message: "as the agent found"})
			er := f.reconcile("rec")
			f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRefused))
			f.g.Expect(planned(er).Reason).To(Equal(reason))
			f.g.Expect(planned(er).Message).To(ContainSubstring("as the agent found"))
			f.g.Expect(f.memberNames()).To(Equal(members))
			f.g.Expect(f.keyJob("rec")).To(BeNil())
			// A refusal is a record: nothing starts another check.
			now = now.Add(time.Hour)
			f.reconcile("rec")
			f.g.Expect(f.keyJob("rec")).To(BeNil())
		})
	}
}

// A volume that does not mount shows only in an Event about the Pod, which
// the API server is asked for: the recovery names it and keeps the Job.
func TestPlan_AKeyCheckPodWhoseVolumeDoesNotMount(t *testing.T) {
	f := newFixture(t, "demo-a", "demo-b", "demo-c")
	f.r.APIReader = f.c
	f.lose(map[string]string{"demo-b": "DataDirLost", "demo-c": "DataDirLost"}, map[string][2]int64{"demo-a": {40, 30}})
	f.sealed("sealed")
	members := f.memberNames()
	f.create("rec", keyedSpec("sealed", "dr-key"))
	f.reconcile("rec")
	f.keyCheckPod("rec", pending(waiting("ContainerCreating", "")))
	er := f.reconcile("rec")
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.RecoveryKeyCheckingReason), "a Pod being created is no failure")

	f.g.Expect(f.c.Create(context.Background(), &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "mount", Namespace: ns}, Type: corev1.EventTypeWarning, Reason: "FailedMount",
		Message:        `MountVolume.SetUp failed for volume "backups" : persistentvolumeclaim "backups" not found`,
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "rec-key-check-p", Namespace: ns, UID: "key-check-pod"},
	})).To(Succeed())
	er = f.reconcile("rec")
	f.untouched(er, members)
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.RecoveryKeyCheckNotRunReason))
	f.g.Expect(planned(er).Message).To(ContainSubstring(`its Pod rec-key-check-p has not started: FailedMount: MountVolume.SetUp failed for volume "backups" : persistentvolumeclaim "backups" not found`))
	f.g.Expect(f.keyJob("rec")).NotTo(BeNil())
}
