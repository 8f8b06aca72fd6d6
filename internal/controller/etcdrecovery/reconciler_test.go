package etcdrecovery

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

const (
	ns     = "ns"
	name   = "demo"
	domain = "cluster.local"
)

type fixture struct {
	t      *testing.T
	g      *WithT
	c      client.Client
	etcd   *etcdfake.Fake
	r      *Reconciler
	events *events.FakeRecorder
	ids    map[string]uint64
}

// newFixture builds a formed cluster of the named voters, all healthy.
func newFixture(t *testing.T, members ...string) *fixture {
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	_ = corev1.AddToScheme(scheme)
	_ = batchv1.AddToScheme(scheme)
	f := &fixture{t: t, g: NewWithT(t), etcd: etcdfake.New(), events: events.NewFakeRecorder(50), ids: map[string]uint64{}}
	cluster := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: "cluster-uid"},
		Spec:       v1alpha1.EtcdClusterSpec{Replicas: ptr.To(int32(len(members)))},
		Status:     v1alpha1.EtcdClusterStatus{ClusterID: etcd.FormatMemberID(etcdfake.DefaultClusterID)},
	}
	objs := []client.Object{cluster}
	for _, n := range members {
		em := f.etcd.AddVoter(n, v1alpha1.PeerURL(n, name, ns, domain), v1alpha1.ClientURL(n, name, ns, domain))
		f.ids[n] = em.ID
		objs = append(objs, &v1alpha1.EtcdMember{
			ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns, Labels: v1alpha1.ClusterLabels(name),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "EtcdCluster",
					Name: name, UID: cluster.UID, Controller: ptr.To(true)}}},
			Spec:   v1alpha1.EtcdMemberSpec{ClusterName: name, InitialCluster: "x", ClusterToken: "t"},
			Status: v1alpha1.EtcdMemberStatus{MemberID: em.IDString(), Role: v1alpha1.MemberRoleVoter},
		})
	}
	f.c = fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.EtcdCluster{}, &v1alpha1.EtcdRecovery{}, &v1alpha1.EtcdSnapshot{}).
		WithIndex(&corev1.Event{}, eventInvolvedUID, func(o client.Object) []string {
			return []string{string(o.(*corev1.Event).InvolvedObject.UID)}
		}).Build()
	f.r = &Reconciler{Client: f.c, Dialer: f.etcd, ClusterDomain: domain, Recorder: f.events, OperatorImage: "operator:test",
		Now: func() time.Time { return time.Unix(1_700_000_000, 0) }}
	return f
}

func clientURL(member string) string { return v1alpha1.ClientURL(member, name, ns, domain) }

// lose makes the named members unreachable, judged gone with the verdict
// given (none for ""), and leaves the others answering without a leader at
// the raft index and revision given.
func (f *fixture) lose(verdicts map[string]string, left map[string][2]int64) {
	f.t.Helper()
	f.etcd.SetLeader(0)
	cl := f.cluster()
	cl.Status.QuorumLoss = &v1alpha1.QuorumLoss{Voters: int32(len(verdicts) + len(left))}
	for n, v := range verdicts {
		f.etcd.SetEndpointError(clientURL(n), etcdfake.ErrUnreachable)
		cl.Status.QuorumLoss.Gone = append(cl.Status.QuorumLoss.Gone, v1alpha1.GoneMember{Name: n, Reason: v, Detail: "etcd exited"})
	}
	for n, at := range left {
		f.etcd.SetStatus(clientURL(n), etcd.EndpointStatus{MemberID: f.ids[n], ClusterID: etcdfake.DefaultClusterID,
			RaftIndex: uint64(at[0]) + 1, RaftAppliedIndex: uint64(at[0]), Revision: at[1]})
	}
	f.g.Expect(f.c.Status().Update(context.Background(), cl)).To(Succeed())
}

func (f *fixture) cluster() *v1alpha1.EtcdCluster {
	cl := &v1alpha1.EtcdCluster{}
	f.g.Expect(f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, cl)).To(Succeed())
	return cl
}

func (f *fixture) create(recName string, spec v1alpha1.EtcdRecoverySpec) {
	f.t.Helper()
	er := &v1alpha1.EtcdRecovery{ObjectMeta: metav1.ObjectMeta{Name: recName, Namespace: ns, UID: types.UID("uid-" + recName)}, Spec: spec}
	f.g.Expect(f.c.Create(context.Background(), er)).To(Succeed())
}

func (f *fixture) reconcile(recName string) *v1alpha1.EtcdRecovery {
	f.t.Helper()
	_, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: recName}})
	f.g.Expect(err).NotTo(HaveOccurred())
	return f.get(recName)
}

func (f *fixture) get(recName string) *v1alpha1.EtcdRecovery {
	er := &v1alpha1.EtcdRecovery{}
	f.g.Expect(f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: recName}, er)).To(Succeed())
	return er
}

func survivorSpec(member string, force bool) v1alpha1.EtcdRecoverySpec {
	return v1alpha1.EtcdRecoverySpec{ClusterName: name, Force: force,
		Source: v1alpha1.RecoverySource{Survivor: &v1alpha1.SurvivorSource{Member: member}}}
}

func planned(er *v1alpha1.EtcdRecovery) metav1.Condition {
	return *meta.FindStatusCondition(er.Status.Conditions, v1alpha1.RecoveryPlannedCondition)
}

func recovered(er *v1alpha1.EtcdRecovery) metav1.Condition {
	return *meta.FindStatusCondition(er.Status.Conditions, v1alpha1.RecoveredCondition)
}

func TestPlan_RefusedWhileAQuorumAnswers(t *testing.T) {
	f := newFixture(t, "demo-a", "demo-b", "demo-c")
	f.create("rec", survivorSpec("", true))
	er := f.reconcile("rec")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRefused))
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.QuorumReachableReason))
	f.g.Expect(planned(er).Message).To(ContainSubstring("3 of 3 voters answer with a leader, a quorum: EtcdCluster demo needs no recovery"))
	f.g.Expect(recovered(er).Reason).To(Equal(v1alpha1.NotStartedReason))
	f.g.Expect(er.Status.Plan).To(BeNil())
	f.g.Expect(f.events.Events).To(Receive(ContainSubstring("QuorumReachable")))

	// A finished recovery is a record: nothing changes it again.
	f.lose(map[string]string{"demo-b": "DataDirLost", "demo-c": "DataDirLost"}, map[string][2]int64{"demo-a": {10, 5}})
	er = f.reconcile("rec")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRefused))
}

func TestPlan_RecordsThePlanBeforeAnythingChanges(t *testing.T) {
	f := newFixture(t, "demo-a", "demo-b", "demo-c")
	f.lose(map[string]string{"demo-b": "DataDirLost", "demo-c": "DataCorrupt"}, map[string][2]int64{"demo-a": {40, 30}})
	f.create("rec", survivorSpec("", false))
	er := f.reconcile("rec")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRunning))
	f.g.Expect(er.Status.StartedAt).NotTo(BeNil())
	p := er.Status.Plan
	f.g.Expect(p).NotTo(BeNil())
	f.g.Expect(p.Survivor).To(Equal("demo-a"))
	f.g.Expect(p.SurvivorID).To(Equal(etcd.FormatMemberID(f.ids["demo-a"])))
	f.g.Expect(p.Revision).To(Equal(int64(30)))
	f.g.Expect(p.Removed).To(Equal([]string{"demo-b", "demo-c"}))
	f.g.Expect(p.Loses).To(ContainSubstring("any write after revision 30 that only demo-b, demo-c had"))
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.PlanRecordedReason))
	f.g.Expect(recovered(er).Reason).To(Equal(v1alpha1.RecoveryInProgressReason))
	f.g.Expect(er.OwnerReferences).To(ContainElement(HaveField("UID", types.UID("cluster-uid"))), "it goes with its cluster")
	f.g.Expect(f.events.Events).To(Receive(ContainSubstring("RecoveryPlanned")))
	f.g.Expect(f.etcd.Calls).NotTo(ContainElement(HaveField("Op", BeElementOf(etcd.OpMemberRemove, etcd.OpMemberAddAsLearner))),
		"planning only asks")
}

// Two survivors of five, one behind the other: the one behind is refused by
// name, and the one ahead is taken when none is named.
func TestPlan_ASurvivorBehindAnother(t *testing.T) {
	f := newFixture(t, "demo-a", "demo-b", "demo-c", "demo-d", "demo-e")
	f.lose(map[string]string{"demo-c": "DataDirLost", "demo-d": "DataDirLost", "demo-e": "NodeLost"},
		map[string][2]int64{"demo-a": {40, 30}, "demo-b": {55, 42}})
	f.create("named", survivorSpec("demo-a", false))
	er := f.reconcile("named")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRefused))
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.SurvivorBehindReason))
	f.g.Expect(planned(er).Message).To(ContainSubstring("member demo-a is behind member demo-b (applied index 40 and revision 30 against 55 and 42)"))

	f.create("best", survivorSpec("", false))
	er = f.reconcile("best")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRunning))
	f.g.Expect(er.Status.Plan.Survivor).To(Equal("demo-b"))
	f.g.Expect(er.Status.Plan.Removed).To(Equal([]string{"demo-a", "demo-c", "demo-d", "demo-e"}))
}

func TestPlan_Refusals(t *testing.T) {
	gone := map[string]string{"demo-b": "DataDirLost", "demo-c": "DataDirLost"}
	left := map[string][2]int64{"demo-a": {10, 5}}
	cases := []struct {
		name   string
		setup  func(f *fixture)
		spec   v1alpha1.EtcdRecoverySpec
		reason string
		msg    string
	}{
		{"no such cluster", nil, v1alpha1.EtcdRecoverySpec{ClusterName: "nope", Source: v1alpha1.RecoverySource{Survivor: &v1alpha1.SurvivorSource{}}},
			v1alpha1.ClusterNotFoundReason, "no EtcdCluster nope in namespace ns"},
		{"memory", func(f *fixture) {
			cl := f.cluster()
			cl.Spec.Storage.Medium = v1alpha1.StorageMediumMemory
			f.g.Expect(f.c.Update(context.Background(), cl)).To(Succeed())
		}, survivorSpec("", false), v1alpha1.MemoryStorageReason, "recover from a snapshot (source.snapshot) instead"},
		{"a snapshot without the operator's image", func(f *fixture) { f.r.OperatorImage = "" },
			v1alpha1.EtcdRecoverySpec{ClusterName: name, Source: v1alpha1.RecoverySource{Snapshot: &v1alpha1.SnapshotSource{}}},
			v1alpha1.SnapshotRecoveryUnavailableReason, "the operator was started without --operator-image"},
		{"no snapshot", nil, v1alpha1.EtcdRecoverySpec{ClusterName: name, Source: v1alpha1.RecoverySource{Snapshot: &v1alpha1.SnapshotSource{}}},
			v1alpha1.SnapshotNotFoundReason, "EtcdCluster demo has no successful EtcdSnapshot to recover from"},
		{"a member only unreachable", func(f *fixture) {
			cl := f.cluster()
			cl.Status.QuorumLoss.Gone = cl.Status.QuorumLoss.Gone[:0]
			f.g.Expect(f.c.Status().Update(context.Background(), cl)).To(Succeed())
		}, survivorSpec("", false), v1alpha1.MembersNotJudgedGoneReason, "self-heal has not judged them gone"},
		{"a named member that is gone", nil, survivorSpec("demo-b", false), v1alpha1.SurvivorNotFoundReason,
			"member demo-b does not answer on its own endpoint (DataDirLost: etcd exited)"},
		{"another recovery running", func(f *fixture) {
			f.create("first", survivorSpec("", false))
			f.reconcile("first")
		}, survivorSpec("", false), v1alpha1.AnotherRecoveryReason, "is being recovered by EtcdRecovery first"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "demo-a", "demo-b", "demo-c")
			f.lose(gone, left)
			if tc.setup != nil {
				tc.setup(f)
			}
			f.create("rec", tc.spec)
			er := f.reconcile("rec")
			f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRefused))
			f.g.Expect(planned(er).Reason).To(Equal(tc.reason))
			f.g.Expect(planned(er).Message).To(ContainSubstring(tc.msg))
			f.g.Expect(er.Status.Plan).To(BeNil())
		})
	}
}

// A running recovery reports what the cluster controller does, from the
// cluster's status.recovery, to its end.
func TestFollow(t *testing.T) {
	f := newFixture(t, "demo-a", "demo-b", "demo-c")
	f.lose(map[string]string{"demo-b": "DataDirLost", "demo-c": "DataDirLost"}, map[string][2]int64{"demo-a": {10, 5}})
	f.create("rec", survivorSpec("", false))
	er := f.reconcile("rec")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRunning))
	er = f.reconcile("rec")
	f.g.Expect(recovered(er).Message).To(ContainSubstring("waiting for the EtcdCluster controller to take the recovery up"))

	cl := f.cluster()
	cl.Status.Recovery = &v1alpha1.ClusterRecovery{Name: "rec", UID: er.UID, Source: v1alpha1.RecoveryFromSurvivor, Survivor: "demo-a"}
	meta.SetStatusCondition(&cl.Status.Conditions, metav1.Condition{Type: v1alpha1.ProgressingCondition, Status: metav1.ConditionTrue,
		Reason: v1alpha1.RecoveringReason, Message: "EtcdRecovery rec: stopping member demo-b"})
	f.g.Expect(f.c.Status().Update(context.Background(), cl)).To(Succeed())
	er = f.reconcile("rec")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRunning))
	f.g.Expect(recovered(er).Message).To(Equal("EtcdRecovery rec: stopping member demo-b"))

	cl = f.cluster()
	now := metav1.NewTime(time.Unix(1_700_000_100, 0))
	cl.Status.Recovery.RestoredAt = &now
	f.g.Expect(f.c.Status().Update(context.Background(), cl)).To(Succeed())
	er = f.reconcile("rec")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoverySucceeded))
	f.g.Expect(er.Status.CompletedAt.Time).To(BeTemporally("==", now.Time))
	f.g.Expect(recovered(er).Status).To(Equal(metav1.ConditionTrue))
	f.g.Expect(recovered(er).Message).To(ContainSubstring("member demo-a answers as a one-member cluster (cluster ID fa4ec1a5fa4ec1a5); it grows back to 3 members"))
}

func TestFollow_Failures(t *testing.T) {
	f := newFixture(t, "demo-a", "demo-b", "demo-c")
	f.lose(map[string]string{"demo-b": "DataDirLost", "demo-c": "DataDirLost"}, map[string][2]int64{"demo-a": {10, 5}})
	f.create("rec", survivorSpec("", false))
	f.reconcile("rec")
	f.create("late", survivorSpec("", false))
	// Planned before the first one's status was seen, as a stale cache
	// can have it.
	late := f.get("late")
	late.Status.Phase = v1alpha1.RecoveryRunning
	late.Status.Plan = &v1alpha1.RecoveryPlan{Source: v1alpha1.RecoveryFromSurvivor, Survivor: "demo-a"}
	f.g.Expect(f.c.Status().Update(context.Background(), late)).To(Succeed())

	cl := f.cluster()
	cl.Status.Recovery = &v1alpha1.ClusterRecovery{Name: "rec", UID: "uid-rec", Source: v1alpha1.RecoveryFromSurvivor, Survivor: "demo-a"}
	f.g.Expect(f.c.Status().Update(context.Background(), cl)).To(Succeed())
	er := f.reconcile("late")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryFailed))
	f.g.Expect(recovered(er).Message).To(ContainSubstring("is being recovered by EtcdRecovery rec, taken up first"))

	cl = f.cluster()
	cl.Status.Recovery.Failed = "survivor demo-a was deleted during the recovery; recover from a snapshot"
	f.g.Expect(f.c.Status().Update(context.Background(), cl)).To(Succeed())
	er = f.reconcile("rec")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryFailed))
	f.g.Expect(recovered(er).Reason).To(Equal(v1alpha1.RecoveryFailedReason))
	f.g.Expect(recovered(er).Message).To(Equal(cl.Status.Recovery.Failed))
	f.g.Expect(er.Status.CompletedAt).NotTo(BeNil())
}

// snapshot adds an EtcdSnapshot of the cluster that completed ago, at rev.
func (f *fixture) snapshot(snapName string, ago time.Duration, rev int64, phase v1alpha1.SnapshotPhase) {
	f.t.Helper()
	ctx := context.Background()
	snap := &v1alpha1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: snapName, Namespace: ns},
		Spec: v1alpha1.EtcdSnapshotSpec{ClusterName: name,
			Destination: v1alpha1.SnapshotDestination{PersistentVolumeClaim: &v1alpha1.PVCDestination{ClaimName: "backups"}}}}
	f.g.Expect(f.c.Create(ctx, snap)).To(Succeed())
	done := metav1.NewTime(f.r.Now().Add(-ago))
	snap.Status = v1alpha1.EtcdSnapshotStatus{Phase: phase, Revision: rev, CompletedAt: &done}
	f.g.Expect(f.c.Status().Update(ctx, snap)).To(Succeed())
}

func snapshotSpec(snapName string, maxAge time.Duration, force bool) v1alpha1.EtcdRecoverySpec {
	src := &v1alpha1.SnapshotSource{SnapshotName: snapName}
	if maxAge > 0 {
		src.MaxAge = &metav1.Duration{Duration: maxAge}
	}
	return v1alpha1.EtcdRecoverySpec{ClusterName: name, Force: force, Source: v1alpha1.RecoverySource{Snapshot: src}}
}

func TestPlan_FromASnapshot(t *testing.T) {
	f := newFixture(t, "demo-a", "demo-b", "demo-c")
	f.lose(map[string]string{"demo-b": "DataDirLost", "demo-c": "DataDirLost"}, map[string][2]int64{"demo-a": {40, 30}})
	f.snapshot("nightly", 6*time.Hour, 12, v1alpha1.SnapshotSucceeded)
	f.snapshot("hourly", 20*time.Minute, 25, v1alpha1.SnapshotSucceeded)
	f.snapshot("now", time.Minute, 29, v1alpha1.SnapshotFailed)

	f.create("latest", snapshotSpec("", time.Hour, false))
	er := f.reconcile("latest")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRunning))
	p := er.Status.Plan
	f.g.Expect(p.Source).To(Equal(v1alpha1.RecoveryFromSnapshot))
	f.g.Expect(p.Snapshot).To(Equal("hourly"), "the latest that succeeded")
	f.g.Expect(p.Revision).To(Equal(int64(25)))
	f.g.Expect(p.BestKnownRevision).To(Equal(int64(30)))
	f.g.Expect(p.BestKnownMember).To(Equal("demo-a"))
	f.g.Expect(p.RevisionGap).To(Equal(int64(5)))
	f.g.Expect(p.Removed).To(Equal([]string{"demo-a", "demo-b", "demo-c"}))
	f.g.Expect(p.Loses).To(ContainSubstring("new cluster ID in place of fa4ec1a5fa4ec1a5"))

	// One at a time: the first is running.
	f.create("old", snapshotSpec("nightly", time.Hour, false))
	er = f.reconcile("old")
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.AnotherRecoveryReason))
}

func TestPlan_ASnapshotTooOld(t *testing.T) {
	f := newFixture(t, "demo-a", "demo-b", "demo-c")
	f.lose(map[string]string{"demo-b": "DataDirLost", "demo-c": "DataDirLost"}, map[string][2]int64{"demo-a": {40, 30}})
	f.snapshot("nightly", 6*time.Hour, 12, v1alpha1.SnapshotSucceeded)
	f.create("old", snapshotSpec("nightly", time.Hour, false))
	er := f.reconcile("old")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRefused))
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.SnapshotTooOldReason))
	f.g.Expect(planned(er).Message).To(ContainSubstring("EtcdSnapshot nightly completed 6h0m0s ago, longer than maxAge 1h0m0s"))

	f.create("forced", snapshotSpec("nightly", time.Hour, true))
	er = f.reconcile("forced")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRunning))
	f.g.Expect(er.Status.Plan.Forced).To(Equal([]string{v1alpha1.SnapshotTooOldReason}))
}
