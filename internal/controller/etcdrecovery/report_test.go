package etcdrecovery

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// metricsByURL answers SelfReport from a table, as members' metrics
// endpoints would; a URL not in it does not answer.
type metricsByURL map[string]etcd.SelfReport

func (m metricsByURL) SelfReport(_ context.Context, url string) (etcd.SelfReport, error) {
	if r, ok := m[url]; ok {
		return r, nil
	}
	return etcd.SelfReport{}, &etcd.CallError{Op: etcd.OpMetrics, Endpoint: url, Err: errors.New("connection refused")}
}

func metricsURL(member string) string {
	u, _ := etcd.MetricsURLFor(clientURL(member), v1alpha1.MetricsPort)
	return u
}

// Two survivors of five; the one behind was restarted without a quorum, so
// its Status never answers and only its metrics endpoint says where it is.
func TestPlan_ASurvivorBehindAnotherThatOnlyItsMetricsReport(t *testing.T) {
	f := newFixture(t, "demo-a", "demo-b", "demo-c", "demo-d", "demo-e")
	f.lose(map[string]string{"demo-a": "", "demo-c": "DataDirLost", "demo-d": "DataDirLost", "demo-e": "DataDirLost"},
		map[string][2]int64{"demo-b": {55, 42}})
	reports := metricsByURL{metricsURL("demo-a"): {MemberID: f.ids["demo-a"], AppliedIndex: 40, CommittedIndex: 40, Revision: 30}}
	f.r.Metrics = reports

	f.create("named", survivorSpec("demo-a", false))
	er := f.reconcile("named")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRefused))
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.SurvivorBehindReason))
	f.g.Expect(planned(er).Message).To(ContainSubstring("member demo-a is behind member demo-b (applied index 40 and revision 30 against 55 and 42)"))
	f.g.Expect(er.Status.Plan).To(BeNil())

	f.create("best", survivorSpec("", false))
	er = f.reconcile("best")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRunning))
	f.g.Expect(er.Status.Plan.Survivor).To(Equal("demo-b"))
	f.g.Expect(er.Status.Plan.Survivors).To(HaveLen(2), "the reported member is among the survivors")
	f.g.Expect(f.etcd.Calls).NotTo(ContainElement(HaveField("Op", BeElementOf(etcd.OpMemberRemove, etcd.OpMemberAddAsLearner))))
}

// A report is the member's only if it carries the member's ID: another
// process on the address is not a survivor.
func TestPlan_AReportWithAnotherMemberIDIsNotTheMembers(t *testing.T) {
	f := newFixture(t, "demo-a", "demo-b", "demo-c")
	f.lose(map[string]string{"demo-a": "", "demo-c": "DataDirLost"}, map[string][2]int64{"demo-b": {55, 42}})
	f.r.Metrics = metricsByURL{metricsURL("demo-a"): {MemberID: 0xdead, AppliedIndex: 90, Revision: 80}}
	f.create("named", survivorSpec("demo-a", false))
	er := f.reconcile("named")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryPending))
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.SurvivorNotAnsweringReason))
}

// A named survivor that answers on neither endpoint, and is not judged
// gone, keeps the recovery pending with a named reason, and is planned as
// soon as it answers.
func TestPlan_ANamedSurvivorThatDoesNotAnswerYet(t *testing.T) {
	f := newFixture(t, "demo-a", "demo-b", "demo-c", "demo-d", "demo-e")
	f.lose(map[string]string{"demo-a": "", "demo-c": "DataDirLost", "demo-d": "DataDirLost", "demo-e": "DataDirLost"},
		map[string][2]int64{"demo-b": {55, 42}})
	reports := metricsByURL{}
	f.r.Metrics = reports
	f.create("named", survivorSpec("demo-a", false))
	er := f.reconcile("named")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryPending))
	f.g.Expect(planned(er).Reason).To(Equal(v1alpha1.SurvivorNotAnsweringReason))
	f.g.Expect(planned(er).Message).To(ContainSubstring("member demo-a of EtcdCluster demo answers neither on its client nor on its metrics endpoint"))
	f.g.Expect(recovered(er).Reason).To(Equal(v1alpha1.NotStartedReason))
	f.g.Expect(er.Status.Plan).To(BeNil())
	f.g.Expect(f.events.Events).To(Receive(ContainSubstring(v1alpha1.SurvivorNotAnsweringReason)))
	er = f.reconcile("named")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryPending))
	f.g.Expect(f.events.Events).NotTo(Receive(), "the wait is announced once")

	reports[metricsURL("demo-a")] = etcd.SelfReport{MemberID: f.ids["demo-a"], AppliedIndex: 60, CommittedIndex: 60, Revision: 45}
	er = f.reconcile("named")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRunning))
	f.g.Expect(er.Status.Plan.Survivor).To(Equal("demo-a"), "ahead of demo-b, so no guard holds it")
}

// With etcd's authentication on and no client certificate, every dial
// exchanges root's password for a token through raft, which a cluster
// without a quorum cannot do: the dial fails, and the survivors are judged
// from their metrics alone.
func TestPlan_SurvivorsFromMetricsWhenThePasswordDialFails(t *testing.T) {
	f := newFixture(t, "demo-a", "demo-b", "demo-c", "demo-d", "demo-e")
	f.lose(map[string]string{"demo-a": "", "demo-b": "", "demo-c": "DataDirLost", "demo-d": "DataDirLost", "demo-e": "DataDirLost"}, nil)
	f.etcd.SetHook(etcd.OpDial, func(etcdfake.Call) error { return context.DeadlineExceeded })
	f.r.Metrics = metricsByURL{
		metricsURL("demo-a"): {MemberID: f.ids["demo-a"], AppliedIndex: 40, CommittedIndex: 40, Revision: 30},
		metricsURL("demo-b"): {MemberID: f.ids["demo-b"], AppliedIndex: 55, CommittedIndex: 55, Revision: 42},
	}
	f.create("best", survivorSpec("", false))
	er := f.reconcile("best")
	f.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRunning), "%+v", er.Status)
	f.g.Expect(er.Status.Plan.Survivor).To(Equal("demo-b"))
}
