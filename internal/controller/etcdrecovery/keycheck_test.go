package etcdrecovery

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/component/backupjob"
)

// sealed is a succeeded EtcdSnapshot whose status records an encryption;
// its destination names the writer's key, a recipient that cannot decrypt.
func (f *fixture) sealed(snapName string) {
	f.t.Helper()
	ctx := context.Background()
	snap := &v1alpha1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: snapName, Namespace: ns},
		Spec: v1alpha1.EtcdSnapshotSpec{ClusterName: name, Destination: v1alpha1.SnapshotDestination{
			PersistentVolumeClaim: &v1alpha1.PVCDestination{ClaimName: "backups"},
			Encryption:            &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: "writer", Key: "recipient"}}}}}
	f.g.Expect(f.c.Create(ctx, snap)).To(Succeed())
	done := metav1.NewTime(f.r.Now().Add(-time.Hour))
	snap.Status = v1alpha1.EtcdSnapshotStatus{Phase: v1alpha1.SnapshotSucceeded, Revision: 25, CompletedAt: &done,
		Encryption: v1alpha1.EncryptionAge, KeyFingerprint: "sha256:" + strings.Repeat("a", 32)}
	f.g.Expect(f.c.Status().Update(ctx, snap)).To(Succeed())
}

func keyedSpec(snapName, secret string) v1alpha1.EtcdRecoverySpec {
	spec := snapshotSpec(snapName, 0, false)
	spec.Source.Snapshot.Encryption = &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: secret, Key: "age.key"}}
	return spec
}

func (f *fixture) keyJob(recName string) *batchv1.Job {
	j := &batchv1.Job{}
	err := f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: backupjob.RecoveryKeyCheckJobName(recName)}, j)
	if apierrors.IsNotFound(err) {
		return nil
	}
	f.g.Expect(err).NotTo(HaveOccurred())
	return j
}

// finishKeyCheck ends the key check Job with a result, as its agent would.
func (f *fixture) finishKeyCheck(recName string, res backup.Result) {
	f.t.Helper()
	ctx := context.Background()
	j := f.keyJob(recName)
	f.g.Expect(j).NotTo(BeNil())
	// The fake client gives Jobs no UID: an earlier check's Pod goes, as
	// the garbage collector would take it with its Job.
	var old corev1.PodList
	f.g.Expect(f.c.List(ctx, &old, client.InNamespace(ns), client.MatchingLabels{batchv1.ControllerUidLabel: string(j.UID)})).To(Succeed())
	for i := range old.Items {
		f.g.Expect(f.c.Delete(ctx, &old.Items[i])).To(Succeed())
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-p", Namespace: ns, Labels: map[string]string{batchv1.ControllerUidLabel: string(j.UID)}}}
	f.g.Expect(f.c.Create(ctx, p)).To(Succeed())
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: backupjob.ContainerName,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: string(res.Encode())}}}}
	f.g.Expect(f.c.Status().Update(ctx, p)).To(Succeed())
	cond := batchv1.JobComplete
	if res.Code != backup.CodeOK {
		cond = batchv1.JobFailed
	}
	j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue}}
	f.g.Expect(f.c.Status().Update(ctx, j)).To(Succeed())
}

func (f *fixture) memberNames() []string {
	var list v1alpha1.EtcdMemberList
	f.g.Expect(f.c.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, m := range list.Items {
		out = append(out, m.Name)
	}
	return out
}

func TestPlan_AnEncryptedSnapshotWithoutAKey(t *testing.T) {
	f := newFixture(t, "demo-a", "demo-b", "demo-c")
	f.lose(map[string]string{"demo-b": "DataDirLost", "demo-c": "DataDirLost"}, map[string][2]int64{"demo-a": {40, 30}})
	f.sealed("sealed")
	f.create("rec", snapshotSpec("sealed", 0, true))
	er := f.reconcile("rec")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRefused))
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.SnapshotEncryptedReason))
	f.g.Expect(f.keyJob("rec")).To(BeNil(), "no key, nothing to check")
}

// The key is checked by a Job before the plan is recorded: a wrong key
// refuses the recovery with nothing changed, the right one plans it.
func TestPlan_AnEncryptedSnapshotsKeyIsCheckedFirst(t *testing.T) {
	f := newFixture(t, "demo-a", "demo-b", "demo-c")
	f.lose(map[string]string{"demo-b": "DataDirLost", "demo-c": "DataDirLost"}, map[string][2]int64{"demo-a": {40, 30}})
	f.sealed("sealed")
	members := f.memberNames()

	f.create("wrong", keyedSpec("sealed", "other-key"))
	er := f.reconcile("wrong")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryPending))
	f.g.Expect(er.Status.Plan).To(BeNil())
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.RecoveryKeyCheckingReason))
	j := f.keyJob("wrong")
	f.g.Expect(j).NotTo(BeNil())
	f.g.Expect(metav1.IsControlledBy(j, er)).To(BeTrue(), "the check goes with its recovery")
	f.g.Expect(j.Labels).To(HaveKeyWithValue(v1alpha1.SnapshotLabel, "sealed"))
	f.g.Expect(j.Labels).To(HaveKeyWithValue(v1alpha1.ClusterLabel, name), "the operator's cache sees only labelled Jobs")
	pod := j.Spec.Template.Spec
	f.g.Expect(pod.Containers[0].Args).To(ContainElement("--encryption-key=other-key/age.key"))
	f.g.Expect(pod.Volumes).To(ContainElement(HaveField("VolumeSource.Secret.SecretName", "other-key")))
	for _, v := range pod.Volumes {
		f.g.Expect(v.Secret == nil || v.Secret.SecretName != "writer").To(BeTrue(), "the writer's key is not the reader's")
	}
	for _, e := range pod.Containers[0].Env {
		f.g.Expect(e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "other-key").To(BeTrue(),
			"the key is a file, never an environment variable")
	}

	// Still running: still pending, the same Job.
	er = f.reconcile("wrong")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryPending))

	f.finishKeyCheck("wrong", backup.ResultOf(&backup.WrongKeyError{Recorded: "sha256:" + strings.Repeat("a", 32), Given: "sha256:" + strings.Repeat("b", 32)}))
	er = f.reconcile("wrong")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRefused))
	f.g.Expect(er.Status.Plan).To(BeNil())
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.RecoveryKeyWrongReason))
	f.g.Expect(planned(er).Message).To(ContainSubstring("encrypted to the key sha256:" + strings.Repeat("a", 32)))
	f.g.Expect(recovered(er).Reason).To(Equal(v1alpha1.NotStartedReason))
	f.g.Expect(f.keyJob("wrong")).To(BeNil(), "its result is used")
	f.g.Expect(f.memberNames()).To(Equal(members))

	f.create("right", keyedSpec("sealed", "dr-key"))
	er = f.reconcile("right")
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.RecoveryKeyCheckingReason))
	f.finishKeyCheck("right", backup.Result{Code: backup.CodeOK})
	er = f.reconcile("right")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRunning))
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.PlanRecordedReason))
	f.g.Expect(er.Status.Plan.Snapshot).To(Equal("sealed"))
	f.g.Expect(f.keyJob("right")).To(BeNil())
}

func TestPlan_AKeyCheckThatCannotRead(t *testing.T) {
	for code, reason := range map[backup.Code]string{
		backup.CodeEncryptionKeyMissing: v1alpha1.RecoveryKeyMissingReason,
		backup.CodeEncryptionKeyInvalid: v1alpha1.RecoveryKeyInvalidReason,
		backup.CodeObjectNotFound:       v1alpha1.SnapshotUnreadableReason,
	} {
		t.Run(string(code), func(t *testing.T) {
			f := newFixture(t, "demo-a", "demo-b", "demo-c")
			f.lose(map[string]string{"demo-b": "DataDirLost", "demo-c": "DataDirLost"}, map[string][2]int64{"demo-a": {40, 30}})
			f.sealed("sealed")
			f.create("rec", keyedSpec("", "dr-key"))
			f.reconcile("rec")
			f.finishKeyCheck("rec", backup.Result{Code: code, Message: "as the agent found"})
			er := f.reconcile("rec")
			f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRefused))
			f.g.Expect(planned(er).Reason).To(Equal(reason))
			f.g.Expect(planned(er).Message).To(ContainSubstring("as the agent found"))
		})
	}
}
