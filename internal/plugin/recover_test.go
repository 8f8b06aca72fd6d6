package plugin

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

func init() { recoverPoll = time.Millisecond }

// operatorPlans plays the recovery controller: a created EtcdRecovery gets
// the status the operator would write, and each later read of it moves it
// one step on through then.
func (w *world) operatorPlans(first v1alpha1.EtcdRecoveryStatus, then ...v1alpha1.EtcdRecoveryStatus) *v1alpha1.EtcdRecovery {
	created := &v1alpha1.EtcdRecovery{}
	w.funcs.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if er, ok := obj.(*v1alpha1.EtcdRecovery); ok {
			er.Status = first
			defer func() { er.DeepCopyInto(created) }()
		}
		return c.Create(ctx, obj, opts...)
	}
	w.funcs.Get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		if er, ok := obj.(*v1alpha1.EtcdRecovery); ok && len(then) > 0 {
			er.Status, then = then[0], then[1:]
			return c.Update(ctx, er)
		}
		return nil
	}
	return created
}

func readyCluster(w *world, name string) {
	w.objs = append(w.objs, &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Generation: 1},
		Status: v1alpha1.EtcdClusterStatus{ReadyMembers: 3,
			Conditions: []metav1.Condition{{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.MembersReadyReason, ObservedGeneration: 1}}},
	})
}

func recoveryPlan() *v1alpha1.RecoveryPlan {
	return &v1alpha1.RecoveryPlan{
		Source: v1alpha1.RecoveryFromSurvivor, Survivor: "demo-a", SurvivorID: "00000000000000a1",
		Revision: 30, BestKnownRevision: 42, BestKnownMember: "demo-b", RevisionGap: 12,
		Removed:   []string{"demo-b", "demo-c"},
		Survivors: []v1alpha1.SurvivorReport{{Name: "demo-a", RaftIndex: 41, RaftAppliedIndex: 40, Revision: 30}},
		Keeps:     "the data of member demo-a",
		Loses:     "what only the others had",
		Forced:    []string{v1alpha1.SurvivorBehindReason},
	}
}

func withCondition(st v1alpha1.EtcdRecoveryStatus, t, reason, msg string) v1alpha1.EtcdRecoveryStatus {
	status := metav1.ConditionFalse
	if reason == v1alpha1.ClusterRestoredReason || reason == v1alpha1.PlanRecordedReason {
		status = metav1.ConditionTrue
	}
	st.Conditions = append(append([]metav1.Condition{}, st.Conditions...), metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg})
	return st
}

func TestRecover_PrintsThePlanAndWaitsUntilReady(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	readyCluster(w, "demo")
	running := v1alpha1.EtcdRecoveryStatus{Phase: v1alpha1.RecoveryRunning, Plan: recoveryPlan()}
	created := w.operatorPlans(v1alpha1.EtcdRecoveryStatus{}, running,
		withCondition(running, v1alpha1.RecoveredCondition, v1alpha1.RecoveryInProgressReason, "EtcdRecovery: stopping member demo-b"),
		withCondition(running, v1alpha1.RecoveredCondition, v1alpha1.RecoveryInProgressReason, "EtcdRecovery: restarting demo-a with --force-new-cluster"),
		withCondition(v1alpha1.EtcdRecoveryStatus{Phase: v1alpha1.RecoverySucceeded, Plan: recoveryPlan()},
			v1alpha1.RecoveredCondition, v1alpha1.ClusterRestoredReason, "member demo-a answers as a one-member cluster"))
	r := w.run("recover", "demo", "--from-survivor", "--member", "demo-a", "--force")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(created.Spec).To(Equal(v1alpha1.EtcdRecoverySpec{ClusterName: "demo", Force: true,
		Source: v1alpha1.RecoverySource{Survivor: &v1alpha1.SurvivorSource{Member: "demo-a"}}}))
	g.Expect(created.Labels).To(HaveKeyWithValue(v1alpha1.ClusterLabel, "demo"))
	g.Expect(r.out).To(ContainSubstring("Created EtcdRecovery demo-recover-"))
	g.Expect(r.out).To(ContainSubstring("from:      member demo-a (00000000000000a1), revision 30"))
	g.Expect(r.out).To(ContainSubstring("best:      revision 42, on demo-b (gap 12)"))
	g.Expect(r.out).To(ContainSubstring("replaces:  demo-b, demo-c"))
	g.Expect(r.out).To(ContainSubstring("loses:     what only the others had"))
	g.Expect(r.out).To(ContainSubstring("forced:    SurvivorBehind"))
	g.Expect(r.out).To(ContainSubstring("stopping member demo-b"))
	g.Expect(r.out).To(ContainSubstring("member demo-a answers as a one-member cluster"))
	g.Expect(r.out).To(ContainSubstring("EtcdCluster demo is Ready with 3 members."))
}

func TestRecover_ReportsTheRefusal(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	readyCluster(w, "demo")
	w.operatorPlans(v1alpha1.EtcdRecoveryStatus{}, withCondition(v1alpha1.EtcdRecoveryStatus{Phase: v1alpha1.RecoveryRefused},
		v1alpha1.RecoveryPlannedCondition, v1alpha1.QuorumReachableReason, "3 of 3 voters answer with a leader, a quorum"))
	r := w.run("recover", "demo", "--from-survivor")
	g.Expect(r.code).To(Equal(ExitError))
	g.Expect(r.err).To(ContainSubstring("the operator refused EtcdRecovery demo-recover-"))
	g.Expect(r.err).To(ContainSubstring("(QuorumReachable): 3 of 3 voters answer with a leader, a quorum"))
}

func TestRecover_ReportsAFailure(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	readyCluster(w, "demo")
	w.operatorPlans(v1alpha1.EtcdRecoveryStatus{Phase: v1alpha1.RecoveryRunning, Plan: recoveryPlan()},
		withCondition(v1alpha1.EtcdRecoveryStatus{Phase: v1alpha1.RecoveryFailed}, v1alpha1.RecoveredCondition,
			v1alpha1.RecoveryFailedReason, "survivor demo-a cannot start on its data"))
	r := w.run("recover", "demo", "--from-survivor")
	g.Expect(r.code).To(Equal(ExitError))
	g.Expect(r.err).To(ContainSubstring("failed: survivor demo-a cannot start on its data"))
}

func TestRecover_WithoutWaiting(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	readyCluster(w, "demo")
	created := w.operatorPlans(v1alpha1.EtcdRecoveryStatus{Phase: v1alpha1.RecoveryRunning, Plan: &v1alpha1.RecoveryPlan{
		Source: v1alpha1.RecoveryFromSnapshot, Snapshot: "nightly", Revision: 7, Keeps: "k", Loses: "l"}})
	r := w.run("recover", "demo", "--from-snapshot", "--snapshot", "nightly", "--max-age", "2h", "--wait=false")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(created.Spec.Source.Snapshot).To(Equal(&v1alpha1.SnapshotSource{SnapshotName: "nightly", MaxAge: &metav1.Duration{Duration: 2 * time.Hour}}))
	g.Expect(r.out).To(ContainSubstring("from:      EtcdSnapshot nightly, revision 7"))
	g.Expect(r.out).To(ContainSubstring("Follow it with: kubectl get etcdrecovery demo-recover-"))
}

func TestRecover_NamesTheKeyOfAnEncryptedSnapshot(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	readyCluster(w, "demo")
	created := w.operatorPlans(v1alpha1.EtcdRecoveryStatus{Phase: v1alpha1.RecoveryRunning, Plan: &v1alpha1.RecoveryPlan{
		Source: v1alpha1.RecoveryFromSnapshot, Snapshot: "sealed", Revision: 7, Keeps: "k", Loses: "l"}})
	r := w.run("recover", "demo", "--from-snapshot", "--snapshot", "sealed", "--encryption-key", "dr-keys/age.key", "--wait=false")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(created.Spec.Source.Snapshot.Encryption).To(Equal(&v1alpha1.SnapshotEncryption{
		SecretRef: v1alpha1.SecretKeyReference{Name: "dr-keys", Key: "age.key"}}))
}

func TestRecover_BadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"recover", "demo"}, ExitUsage, "exactly one of --from-survivor or --from-snapshot"},
		{[]string{"recover", "demo", "--from-survivor", "--from-snapshot"}, ExitUsage, "exactly one of --from-survivor or --from-snapshot"},
		{[]string{"recover", "demo", "--from-snapshot", "--member", "x"}, ExitUsage, "--member names a survivor"},
		{[]string{"recover", "demo", "--from-survivor", "--snapshot", "s"}, ExitUsage, "--snapshot, --max-age and --encryption-key go with --from-snapshot"},
		{[]string{"recover", "demo", "--from-survivor", "--encryption-key", "k/age.key"}, ExitUsage, "go with --from-snapshot"},
		{[]string{"recover", "demo", "--from-snapshot", "--encryption-key", "age.key"}, ExitUsage, "--encryption-key is SECRET/KEY"},
		{[]string{"recover", "nope", "--from-survivor"}, ExitError, "EtcdCluster nope not found in namespace ns1"},
	} {
		t.Run(tc.msg, func(t *testing.T) {
			g := NewWithT(t)
			w := newWorld(t)
			readyCluster(w, "demo")
			r := w.run(tc.args...)
			g.Expect(r.code).To(Equal(tc.code))
			g.Expect(r.err).To(ContainSubstring(tc.msg))
		})
	}
}

func TestRecover_NamesAMissingPermission(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	readyCluster(w, "demo")
	w.funcs.Create = func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
		return forbidden(etcdRecoveryResource, "")
	}
	r := w.run("recover", "demo", "--from-survivor")
	g.Expect(r.code).To(Equal(ExitError))
	g.Expect(r.err).To(ContainSubstring(`RBAC must allow verb "create" on resource "etcdrecoveries.etcd.quorumctl.io"`))
}
