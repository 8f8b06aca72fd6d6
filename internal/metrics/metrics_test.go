package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

func newRegistered(t *testing.T, reasons ...string) (*Recorder, *prometheus.Registry) {
	t.Helper()
	r := New(reasons...)
	reg := prometheus.NewPedanticRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	return r, reg
}

func observation(leader uint64, sizes map[string]int64) ClusterObservation {
	return ClusterObservation{
		Namespace: "demo", Cluster: "example", UID: "uid-1",
		Desired: 3, Ready: 2, Voting: 2, Learners: 1,
		LeaderID: leader, MemberDBSizes: sizes, Alarms: map[string]int{"NOSPACE": 2},
	}
}

func TestObserveClusterSetsGauges(t *testing.T) {
	r, reg := newRegistered(t, "DataDirLost")
	r.ObserveCluster(observation(1, map[string]int64{"example-a": 100, "example-b": 300, "example-c": 200}))

	expected := `
# HELP etcd_operator_cluster_desired_members Members the EtcdCluster's spec asks for (spec.replicas).
# TYPE etcd_operator_cluster_desired_members gauge
etcd_operator_cluster_desired_members{cluster="example",namespace="demo"} 3
# HELP etcd_operator_cluster_ready_members Members whose Pod is ready and that etcd lists as started (status.readyMembers).
# TYPE etcd_operator_cluster_ready_members gauge
etcd_operator_cluster_ready_members{cluster="example",namespace="demo"} 2
# HELP etcd_operator_cluster_voting_members Members that are voters in etcd.
# TYPE etcd_operator_cluster_voting_members gauge
etcd_operator_cluster_voting_members{cluster="example",namespace="demo"} 2
# HELP etcd_operator_cluster_learner_members Members that are learners in etcd.
# TYPE etcd_operator_cluster_learner_members gauge
etcd_operator_cluster_learner_members{cluster="example",namespace="demo"} 1
# HELP etcd_operator_cluster_quorum_lost 1 while the cluster's quorum is lost for good (the QuorumLost condition): too few voters are left for it to come back without an EtcdRecovery; 0 otherwise.
# TYPE etcd_operator_cluster_quorum_lost gauge
etcd_operator_cluster_quorum_lost{cluster="example",namespace="demo"} 0
# HELP etcd_operator_cluster_leader_changes_total Times the operator saw a different etcd leader than at its previous look at the cluster.
# TYPE etcd_operator_cluster_leader_changes_total counter
etcd_operator_cluster_leader_changes_total{cluster="example",namespace="demo"} 0
# HELP etcd_operator_cluster_db_size_bytes Largest etcd database size, in bytes, any member reported.
# TYPE etcd_operator_cluster_db_size_bytes gauge
etcd_operator_cluster_db_size_bytes{cluster="example",namespace="demo"} 300
# HELP etcd_operator_member_db_size_bytes Size of the member's etcd database in bytes, as it reported it.
# TYPE etcd_operator_member_db_size_bytes gauge
etcd_operator_member_db_size_bytes{cluster="example",member="example-a",namespace="demo"} 100
etcd_operator_member_db_size_bytes{cluster="example",member="example-b",namespace="demo"} 300
etcd_operator_member_db_size_bytes{cluster="example",member="example-c",namespace="demo"} 200
# HELP etcd_operator_cluster_alarms Active etcd alarms of the cluster, by type; a NOSPACE alarm means etcd refuses writes.
# TYPE etcd_operator_cluster_alarms gauge
etcd_operator_cluster_alarms{alarm="CORRUPT",cluster="example",namespace="demo"} 0
etcd_operator_cluster_alarms{alarm="NOSPACE",cluster="example",namespace="demo"} 2
# HELP etcd_operator_member_replacements_total Members self-heal replaced, by the reason it gave.
# TYPE etcd_operator_member_replacements_total counter
etcd_operator_member_replacements_total{cluster="example",namespace="demo",reason="DataDirLost"} 0
# HELP etcd_operator_cluster_reconcile_errors_total Reconcile passes of the EtcdCluster that ended in an error (and were retried with backoff).
# TYPE etcd_operator_cluster_reconcile_errors_total counter
etcd_operator_cluster_reconcile_errors_total{cluster="example",namespace="demo"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected)); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestObserveReconcile(t *testing.T) {
	g := NewWithT(t)
	r, reg := newRegistered(t)
	r.ObserveReconcile("demo", "example", "uid-1", 30*time.Millisecond, nil)
	r.ObserveReconcile("demo", "example", "uid-1", 3*time.Second, errors.New("etcd did not answer"))
	r.ObserveReconcile("demo", "other", "uid-2", time.Millisecond, nil)
	g.Expect(testutil.ToFloat64(r.reconcileErrors.WithLabelValues("demo", "example"))).To(BeEquivalentTo(1))
	g.Expect(testutil.ToFloat64(r.reconcileErrors.WithLabelValues("demo", "other"))).To(BeZero())
	g.Expect(testutil.CollectAndCount(r.reconcileDuration)).To(Equal(2), "one histogram per cluster")
	expected := `
# HELP etcd_operator_cluster_reconcile_duration_seconds How long reconcile passes of the EtcdCluster took, in seconds, including the etcd calls they made.
# TYPE etcd_operator_cluster_reconcile_duration_seconds histogram
etcd_operator_cluster_reconcile_duration_seconds_bucket{cluster="example",namespace="demo",le="0.005"} 0
etcd_operator_cluster_reconcile_duration_seconds_bucket{cluster="example",namespace="demo",le="0.01"} 0
etcd_operator_cluster_reconcile_duration_seconds_bucket{cluster="example",namespace="demo",le="0.025"} 0
etcd_operator_cluster_reconcile_duration_seconds_bucket{cluster="example",namespace="demo",le="0.05"} 1
etcd_operator_cluster_reconcile_duration_seconds_bucket{cluster="example",namespace="demo",le="0.1"} 1
etcd_operator_cluster_reconcile_duration_seconds_bucket{cluster="example",namespace="demo",le="0.25"} 1
etcd_operator_cluster_reconcile_duration_seconds_bucket{cluster="example",namespace="demo",le="0.5"} 1
etcd_operator_cluster_reconcile_duration_seconds_bucket{cluster="example",namespace="demo",le="1"} 1
etcd_operator_cluster_reconcile_duration_seconds_bucket{cluster="example",namespace="demo",le="2.5"} 1
etcd_operator_cluster_reconcile_duration_seconds_bucket{cluster="example",namespace="demo",le="5"} 2
etcd_operator_cluster_reconcile_duration_seconds_bucket{cluster="example",namespace="demo",le="10"} 2
etcd_operator_cluster_reconcile_duration_seconds_bucket{cluster="example",namespace="demo",le="+Inf"} 2
etcd_operator_cluster_reconcile_duration_seconds_sum{cluster="example",namespace="demo"} 3.03
etcd_operator_cluster_reconcile_duration_seconds_count{cluster="example",namespace="demo"} 2
`
	r.ForgetCluster("demo", "other")
	g.Expect(testutil.GatherAndCompare(reg, strings.NewReader(expected), ReconcileDurationName)).To(Succeed())
	g.Expect(testutil.CollectAndCount(r.reconcileErrors)).To(Equal(1), "a forgotten cluster's series go")
}

func TestLeaderChanges(t *testing.T) {
	g := NewWithT(t)
	r, _ := newRegistered(t)
	changes := func() float64 { return testutil.ToFloat64(r.leaderChanges.WithLabelValues("demo", "example")) }

	r.ObserveCluster(observation(1, nil))
	g.Expect(changes()).To(BeZero(), "the first leader seen is no change")
	r.ObserveCluster(observation(1, nil))
	g.Expect(changes()).To(BeZero())
	r.ObserveCluster(observation(2, nil))
	g.Expect(changes()).To(Equal(1.0))
	r.ObserveCluster(observation(0, nil))
	g.Expect(changes()).To(Equal(1.0), "an unknown leader is no change")
	r.ObserveCluster(observation(2, nil))
	g.Expect(changes()).To(Equal(1.0), "2, unknown, 2 is no change")
	r.ObserveCluster(observation(0, nil))
	r.ObserveCluster(observation(3, nil))
	g.Expect(changes()).To(Equal(2.0), "2, unknown, 3 is one change")

	other := observation(7, nil)
	other.Cluster = "other"
	r.ObserveCluster(other)
	other.LeaderID = 8
	r.ObserveCluster(other)
	g.Expect(testutil.ToFloat64(r.leaderChanges.WithLabelValues("demo", "other"))).To(Equal(1.0))
	g.Expect(changes()).To(Equal(2.0), "clusters are counted apart")
}

func TestMemberDBSizeFollowsTheMembers(t *testing.T) {
	g := NewWithT(t)
	r, reg := newRegistered(t)
	r.ObserveCluster(observation(1, map[string]int64{"example-a": 100, "example-b": 300}))
	r.ObserveCluster(observation(1, map[string]int64{"example-a": 150, "example-c": 50}))

	g.Expect(testutil.GatherAndCount(reg, MemberDBSizeName)).To(Equal(2))
	g.Expect(testutil.ToFloat64(r.memberDBSize.WithLabelValues("demo", "example", "example-a"))).To(Equal(150.0))
	g.Expect(testutil.ToFloat64(r.clusterDBSize.WithLabelValues("demo", "example"))).To(Equal(150.0),
		"the largest of the members that answered this pass")

	r.ObserveCluster(observation(1, nil))
	g.Expect(testutil.GatherAndCount(reg, MemberDBSizeName)).To(BeZero())
	g.Expect(testutil.GatherAndCount(reg, ClusterDBSizeName)).To(BeZero(), "no member answered: no size")
	g.Expect(testutil.GatherAndCount(reg, DesiredMembersName)).To(Equal(1))
}

func TestMemberReplacedCountsEachMemberOnce(t *testing.T) {
	g := NewWithT(t)
	r, reg := newRegistered(t, "DataDirLost", "CrashLoop")
	count := func(reason string) float64 {
		return testutil.ToFloat64(r.replacements.WithLabelValues("demo", "example", reason))
	}

	r.MemberReplaced("demo", "example", "member-uid-1", "DataDirLost")
	g.Expect(count("DataDirLost")).To(Equal(1.0))
	g.Expect(count("CrashLoop")).To(BeZero(), "known reasons start at 0")
	r.MemberReplaced("demo", "example", "member-uid-1", "DataDirLost")
	g.Expect(count("DataDirLost")).To(Equal(1.0), "a stale pass deleting the same member again is not counted")
	r.MemberReplaced("demo", "example", "member-uid-2", "CrashLoop")
	g.Expect(count("CrashLoop")).To(Equal(1.0))

	// The first observation after a replacement (the status is written at
	// the end of the pass) keeps the count.
	r.ObserveCluster(observation(1, nil))
	g.Expect(count("DataDirLost")).To(Equal(1.0))
	g.Expect(testutil.GatherAndCount(reg, MemberReplacementsName)).To(Equal(2))
}

func TestForgetClusterDeletesItsSeriesOnly(t *testing.T) {
	g := NewWithT(t)
	r, reg := newRegistered(t, "DataDirLost")
	r.ObserveCluster(observation(1, map[string]int64{"example-a": 100}))
	r.ObserveCluster(observation(2, map[string]int64{"example-a": 100}))
	r.MemberReplaced("demo", "example", "member-uid-1", "CrashLoop")
	other := observation(1, map[string]int64{"other-a": 10})
	other.Namespace = "elsewhere"
	r.ObserveCluster(other)

	r.ForgetCluster("demo", "example")
	for _, name := range []string{
		DesiredMembersName, ReadyMembersName, VotingMembersName, LearnerMembersName,
		LeaderChangesName, ClusterDBSizeName, MemberDBSizeName,
	} {
		g.Expect(testutil.GatherAndCount(reg, name)).To(Equal(1), "%s: only the other cluster's series", name)
	}
	g.Expect(testutil.GatherAndCount(reg, MemberReplacementsName)).To(Equal(1))

	// Seen again (re-created): it starts from nothing.
	r.ObserveCluster(observation(5, nil))
	g.Expect(testutil.ToFloat64(r.leaderChanges.WithLabelValues("demo", "example"))).To(BeZero())
	g.Expect(testutil.ToFloat64(r.replacements.WithLabelValues("demo", "example", "CrashLoop"))).To(BeZero())
}

func TestRecreatedClusterStartsAfresh(t *testing.T) {
	g := NewWithT(t)
	r, _ := newRegistered(t)
	r.ObserveCluster(observation(1, nil))
	r.ObserveCluster(observation(2, nil))
	g.Expect(testutil.ToFloat64(r.leaderChanges.WithLabelValues("demo", "example"))).To(Equal(1.0))

	// Deleted and re-created while the operator did not see it gone.
	again := observation(9, nil)
	again.UID = "uid-2"
	r.ObserveCluster(again)
	g.Expect(testutil.ToFloat64(r.leaderChanges.WithLabelValues("demo", "example"))).To(BeZero(),
		"a new cluster's first leader is no change")
}

func TestDefaultIsOnControllerRuntimesRegistry(t *testing.T) {
	g := NewWithT(t)
	ObserveCluster(ClusterObservation{Namespace: "registry-test", Cluster: "c", UID: "u", Desired: 1, Ready: 1, Voting: 1})
	defer ForgetCluster("registry-test", "c")
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	g.Expect(names).To(HaveKey(ReadyMembersName))
	g.Expect(names).To(HaveKey(LeaderChangesName))
	g.Expect(names).To(HaveKey(MemberReplacementsName), "known reasons are created at 0")
	g.Expect(ReplacementReasons).To(ContainElement("DataDirLost"))
}

func TestObserveClusterQuorumLost(t *testing.T) {
	g := NewWithT(t)
	r, _ := newRegistered(t)
	o := observation(0, nil)
	o.QuorumLost = true
	r.ObserveCluster(o)
	g.Expect(testutil.ToFloat64(r.quorumLost.WithLabelValues("demo", "example"))).To(Equal(1.0))
	o.QuorumLost = false
	r.ObserveCluster(o)
	g.Expect(testutil.ToFloat64(r.quorumLost.WithLabelValues("demo", "example"))).To(Equal(0.0))
	r.ForgetCluster("demo", "example")
	g.Expect(testutil.CollectAndCount(r.quorumLost)).To(BeZero(), "a deleted cluster leaves no series")
}
