package etcdcluster

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/metrics"
)

// metricValue reads one series of the harness cluster from
// controller-runtime's registry; ok is false when the series does not exist.
func metricValue(t *testing.T, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{metrics.LabelNamespace: testNS, metrics.LabelCluster: testName}
	for k, v := range labels {
		want[k] = v
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue series
				}
			}
			return value(m), true
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	if m.GetGauge() != nil {
		return m.GetGauge().GetValue()
	}
	return m.GetCounter().GetValue()
}

func TestMetrics_FollowTheCluster(t *testing.T) {
	metrics.ForgetCluster(testNS, testName)
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.reconcile()
	g := h.g
	get := func(name string, labels map[string]string) float64 {
		v, ok := metricValue(t, name, labels)
		g.Expect(ok).To(BeTrue(), "%s%v is exported", name, labels)
		return v
	}
	g.Expect(get(metrics.DesiredMembersName, nil)).To(Equal(3.0))
	g.Expect(get(metrics.ReadyMembersName, nil)).To(Equal(3.0))
	g.Expect(get(metrics.VotingMembersName, nil)).To(Equal(3.0))
	g.Expect(get(metrics.LearnerMembersName, nil)).To(BeZero())
	g.Expect(get(metrics.ClusterDBSizeName, nil)).To(Equal(float64(1 << 20)))
	g.Expect(get(metrics.MemberDBSizeName, map[string]string{metrics.LabelMember: "demo-b"})).To(Equal(float64(1 << 20)))
	g.Expect(get(metrics.LeaderChangesName, nil)).To(BeZero())

	t.Log("a new leader is one change")
	h.etcd.SetLeader(h.etcd.Members()[1].ID)
	h.reconcile()
	g.Expect(get(metrics.LeaderChangesName, nil)).To(Equal(1.0))
	h.reconcile()
	g.Expect(get(metrics.LeaderChangesName, nil)).To(Equal(1.0))

	t.Log("an alarm is counted by its type, from zero")
	g.Expect(get(metrics.ClusterAlarmsName, map[string]string{metrics.LabelAlarm: etcd.AlarmNoSpace})).To(BeZero())
	h.etcd.RaiseAlarm(etcd.Alarm{MemberID: h.etcd.Members()[0].ID, Type: etcd.AlarmNoSpace})
	h.reconcile()
	g.Expect(get(metrics.ClusterAlarmsName, map[string]string{metrics.LabelAlarm: etcd.AlarmNoSpace})).To(Equal(1.0))
	g.Expect(get(metrics.ClusterAlarmsName, map[string]string{metrics.LabelAlarm: etcd.AlarmCorrupt})).To(BeZero())
	g.Expect(h.etcd.AlarmDisarm(context.Background(), etcd.Alarm{MemberID: h.etcd.Members()[0].ID, Type: etcd.AlarmNoSpace})).To(Succeed())
	h.settle()

	t.Log("a replaced member is counted by its reason")
	h.breakPod("demo-c", "Error", wipedFatal)
	h.reconcile()
	g.Expect(h.exists("demo-c")).To(BeFalse())
	g.Expect(get(metrics.MemberReplacementsName, map[string]string{metrics.LabelReason: "DataDirLost"})).To(Equal(1.0))
	g.Expect(get(metrics.MemberReplacementsName, map[string]string{metrics.LabelReason: "CrashLoop"})).To(BeZero())

	t.Log("the cluster's series go with it")
	g.Expect(h.c.Delete(context.Background(), h.cluster())).To(Succeed())
	h.reconcile()
	for _, name := range []string{
		metrics.DesiredMembersName, metrics.ReadyMembersName, metrics.LeaderChangesName,
		metrics.MemberDBSizeName, metrics.MemberReplacementsName, metrics.ClusterAlarmsName,
	} {
		_, ok := metricValue(t, name, nil)
		g.Expect(ok).To(BeFalse(), "%s is deleted", name)
	}
}
