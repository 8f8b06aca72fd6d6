package etcdcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/metrics"
)

// loseQuorum wipes the data dirs of the named members, as the e2e fault
// does: they crash on start with etcd's discovery failure, and the member
// left answers on its own endpoint without a leader.
func (h *harness) loseQuorum(survivor string, wiped ...string) {
	h.t.Helper()
	for _, n := range wiped {
		h.breakPod(n, "Error", wipedFatal)
	}
	h.etcd.SetLeader(0)
	h.setPodReady(survivor, false)
}

func (h *harness) quorumLost() metav1.Condition { return h.condition(v1alpha1.QuorumLostCondition) }

func (h *harness) eventsWith(s string) []string {
	var out []string
	for _, e := range h.drainEvents() {
		if strings.Contains(e, s) {
			out = append(out, e)
		}
	}
	return out
}

func TestQuorumLost_ReportedWhenTheMissingMembersAreGone(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.reconcile()
	g := h.quorumLost()
	h.g.Expect(g.Status).To(Equal(metav1.ConditionFalse))
	h.g.Expect(g.Reason).To(Equal(v1alpha1.QuorumHeldReason))
	h.g.Expect(h.cluster().Status.QuorumLoss).To(BeNil())
	h.drainEvents()

	h.loseQuorum("demo-a", "demo-b", "demo-c")
	h.reconcile()
	g = h.quorumLost()
	h.g.Expect(g.Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(g.Reason).To(Equal(v1alpha1.MembersGoneReason))
	h.g.Expect(g.Message).To(And(
		ContainSubstring("0 of 3 voters answer with a leader; a quorum needs 2"),
		ContainSubstring("gone: demo-b (DataDirLost: etcd exited with code 1"),
		ContainSubstring("demo-c (DataDirLost"),
		ContainSubstring("left: demo-a (raft index 1, applied 1, revision 1)"),
		ContainSubstring("kubectl etcd recover demo"),
	))
	ql := h.cluster().Status.QuorumLoss
	h.g.Expect(ql).NotTo(BeNil())
	h.g.Expect(ql.Voters).To(BeEquivalentTo(3))
	h.g.Expect(ql.LostAt).NotTo(BeNil())
	h.g.Expect(ql.Gone).To(HaveLen(2))
	h.g.Expect(ql.Gone[0]).To(HaveField("Reason", "DataDirLost"))
	h.g.Expect(ql.Survivors).To(Equal([]v1alpha1.SurvivorReport{{
		Name: "demo-a", ID: h.member("demo-a").Status.MemberID, RaftIndex: 1, RaftAppliedIndex: 1, Revision: 1,
	}}))
	h.g.Expect(h.members()).To(HaveLen(3), "nothing is changed")
	h.g.Expect(h.condition(v1alpha1.MembersHealthyCondition).Reason).To(Equal(v1alpha1.QuorumGateHoldingReason))
	lost, ok := metricValue(t, metrics.QuorumLostName, nil)
	h.g.Expect(ok).To(BeTrue())
	h.g.Expect(lost).To(Equal(1.0))
	h.g.Expect(h.eventsWith("QuorumLost")).To(HaveLen(1))

	lostAt := *ql.LostAt
	h.now = h.now.Add(time.Minute)
	h.reconcile()
	h.g.Expect(h.eventsWith("QuorumLost")).To(BeEmpty(), "once per loss")
	h.g.Expect(h.cluster().Status.QuorumLoss.LostAt.Time).To(BeTemporally("==", lostAt.Time), "first seen, not last")
	h.g.Expect(h.members()).To(HaveLen(3))
}

func TestQuorumLost_TransientWhileAMissingMemberHasNoVerdict(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.loseQuorum("demo-a", "demo-b")
	// demo-c only does not answer: a partition, a slow node.
	h.etcd.SetEndpointError(clientURL("demo-c"), errUnreachable())
	h.setPodReady("demo-c", false)
	h.reconcile()
	g := h.quorumLost()
	h.g.Expect(g.Status).To(Equal(metav1.ConditionFalse))
	h.g.Expect(g.Reason).To(Equal(v1alpha1.MembersUnreachableReason))
	h.g.Expect(g.Message).To(ContainSubstring("demo-c (does not answer)"))
	h.g.Expect(h.cluster().Status.QuorumLoss.LostAt).To(BeNil())
	h.g.Expect(h.eventsWith("QuorumLost")).To(BeEmpty())
	lost, _ := metricValue(t, metrics.QuorumLostName, nil)
	h.g.Expect(lost).To(BeZero())
}

func TestQuorumLost_WhenNothingAnswersAtAll(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.loseQuorum("demo-a", "demo-a", "demo-b", "demo-c")
	h.reconcile()
	g := h.quorumLost()
	h.g.Expect(g.Status).To(Equal(metav1.ConditionTrue), "each is judged from its Pod alone")
	h.g.Expect(g.Message).To(ContainSubstring("no member is left"))
	h.g.Expect(h.cluster().Status.QuorumLoss.Gone).To(HaveLen(3))
}

// running marks an EtcdRecovery planned and running, as the recovery
// controller does.
func (h *harness) running(name, survivor string) *v1alpha1.EtcdRecovery {
	h.t.Helper()
	er := &v1alpha1.EtcdRecovery{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID("uid-" + name)},
		Spec: v1alpha1.EtcdRecoverySpec{ClusterName: testName,
			Source: v1alpha1.RecoverySource{Survivor: &v1alpha1.SurvivorSource{}}},
	}
	h.g.Expect(h.c.Create(context.Background(), er)).To(Succeed())
	er.Status.Phase = v1alpha1.RecoveryRunning
	er.Status.Plan = &v1alpha1.RecoveryPlan{Source: v1alpha1.RecoveryFromSurvivor, Survivor: survivor,
		SurvivorID: h.member(survivor).Status.MemberID, Loses: "what only the others had"}
	h.g.Expect(h.c.Status().Update(context.Background(), er)).To(Succeed())
	return er
}

func (h *harness) finish(er *v1alpha1.EtcdRecovery, phase v1alpha1.RecoveryPhase) {
	h.t.Helper()
	got := &v1alpha1.EtcdRecovery{}
	h.g.Expect(h.c.Get(context.Background(), client.ObjectKeyFromObject(er), got)).To(Succeed())
	got.Status.Phase = phase
	h.g.Expect(h.c.Status().Update(context.Background(), got)).To(Succeed())
}

// forceOnRestart plays the member controller and etcd: the survivor's Pod is
// re-created to read the flag from its ConfigMap, and etcd, restarted with
// --force-new-cluster, makes it the only member and the leader.
func (h *harness) forceOnRestart(name string) {
	h.t.Helper()
	ctx := context.Background()
	m := h.member(name)
	h.g.Expect(m.Spec.ForceNewCluster).To(BeTrue())
	m.Status.ForceNewCluster = true
	h.g.Expect(h.c.Status().Update(ctx, m)).To(Succeed())
	h.g.Expect(h.c.Delete(ctx, h.pod(name))).To(Succeed())
	h.readyPod(name)
	p := h.pod(name)
	p.Annotations = map[string]string{pod.ForceNewClusterAnnotation: "true"}
	p.Labels[v1alpha1.RoleLabel] = v1alpha1.RoleLabelVoter
	h.g.Expect(h.c.Update(ctx, p)).To(Succeed())
	id, err := etcd.ParseMemberID(m.Status.MemberID)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.etcd.ForceNewCluster(id)
}

// syncForceStatus plays the member controller syncing the ConfigMap.
func (h *harness) syncForceStatus(name string) {
	h.t.Helper()
	m := h.member(name)
	m.Status.ForceNewCluster = m.Spec.ForceNewCluster
	h.g.Expect(h.c.Status().Update(context.Background(), m)).To(Succeed())
}

func (h *harness) liveMemberNames() []string {
	var out []string
	for _, m := range h.members() {
		out = append(out, m.Name)
	}
	return out
}

// restartOperator drops everything the controller keeps in memory, as a
// new operator Pod starts with nothing.
func (h *harness) restartOperator() {
	h.r = &Reconciler{Client: h.c, APIReader: h.c, Dialer: h.etcd, ClusterDomain: testDomain, Recorder: h.events,
		Now: func() time.Time { return h.now }, NetworkPolicy: testNetworkPolicy}
}

// Every step is re-derived from what is observed: each pass below runs
// twice, once on a restarted operator, and must not do more than once what
// it does.
func TestRecovery_FromASurvivor(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.withFinalizers()
	clusterID := h.cluster().Status.ClusterID
	h.loseQuorum("demo-a", "demo-b", "demo-c")
	h.reconcile()
	twice := func() {
		h.reconcile()
		h.restartOperator()
		h.reconcile()
	}
	er := h.running("rec", "demo-a")

	h.reconcile()
	rec := h.cluster().Status.Recovery
	h.g.Expect(rec).NotTo(BeNil())
	h.g.Expect(rec).To(HaveField("Name", "rec"))
	h.g.Expect(rec).To(HaveField("Survivor", "demo-a"))
	h.g.Expect(rec.Active()).To(BeTrue())
	h.g.Expect(h.members()).To(HaveLen(3), "status.recovery is written before any member goes")
	h.g.Expect(h.quorumLost().Reason).To(Equal(v1alpha1.RecoveringReason))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.RecoveringReason))

	// Stop the others, one per pass; their finalizers release without etcd.
	for range 2 {
		twice()
		h.runFinalizers()
	}
	h.g.Expect(h.liveMemberNames()).To(Equal([]string{"demo-a"}))
	h.g.Expect(h.etcd.Removed).To(BeEmpty(), "no MemberRemove without a quorum")

	// Their Pods must be gone before the survivor forces.
	twice()
	h.g.Expect(h.member("demo-a").Spec.ForceNewCluster).To(BeFalse())
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Message).To(ContainSubstring("waiting for demo-b, demo-c to stop"))
	h.collectGarbage()

	twice()
	h.g.Expect(h.member("demo-a").Spec.ForceNewCluster).To(BeTrue())
	h.syncForceStatus("demo-a")
	twice()
	h.g.Expect(h.member("demo-a").Spec.ForceNewCluster).To(BeTrue(), "kept until it answers alone")
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Message).To(ContainSubstring("waiting for demo-a to answer alone"))

	h.forceOnRestart("demo-a")
	twice()
	h.g.Expect(h.member("demo-a").Spec.ForceNewCluster).To(BeFalse(), "cleared before anything else")
	h.g.Expect(h.cluster().Status.Recovery.RestoredAt).To(BeNil(), "not until its ConfigMap no longer forces")
	h.g.Expect(h.members()).To(HaveLen(1), "no member is added while a restart could still force")
	h.syncForceStatus("demo-a")

	twice()
	rec = h.cluster().Status.Recovery
	h.g.Expect(rec.RestoredAt).NotTo(BeNil())
	h.g.Expect(h.eventsWith("ClusterRecovered")).NotTo(BeEmpty())
	h.g.Expect(h.quorumLost().Reason).To(Equal(v1alpha1.QuorumHeldReason))

	// The cluster grows back through learners, as in a scale-up, before the
	// recovery controller has even recorded the outcome.
	twice()
	// One learner at a time, or two side by side from etcd 3.6.
	h.g.Expect(len(h.members())).To(BeNumerically(">=", 2))
	h.g.Expect(h.etcd.AddedLearners).NotTo(BeEmpty())
	for _, n := range h.liveMemberNames() {
		if n == "demo-a" || h.member(n).Pending() {
			continue
		}
		h.g.Expect(strings.Split(h.member(n).Spec.InitialCluster, ",")).To(ContainElements(
			n+"="+peerURL(n), "demo-a="+peerURL("demo-a")), "it joins the survivor's cluster")
	}

	h.finish(er, v1alpha1.RecoverySucceeded)
	h.reconcile()
	h.g.Expect(h.cluster().Status.Recovery).To(BeNil(), "forgotten once its EtcdRecovery has recorded the outcome")
	h.g.Expect(h.cluster().Status.ClusterID).To(Equal(clusterID))
	h.g.Expect(h.etcd.Removed).To(BeEmpty())
}

// Members on their way out, held by their finalizers with their Pods still
// there, are waited for: the survivor never forces while another member of
// the old cluster may be running.
func TestRecovery_WaitsForLeavingMembers(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.withFinalizers()
	h.loseQuorum("demo-a", "demo-b", "demo-c")
	h.running("rec", "demo-a")
	for range 3 {
		h.reconcile()
	}
	h.g.Expect(h.liveMemberNames()).To(ConsistOf("demo-a", "demo-b", "demo-c"), "deleting, held by their finalizers")
	for range 3 {
		h.reconcile()
	}
	h.g.Expect(h.member("demo-a").Spec.ForceNewCluster).To(BeFalse())
}

// A Pod on a node that is gone cannot run, and is not waited for.
func TestRecovery_DoesNotWaitForAPodOnALostNode(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.node("node-a", corev1.ConditionTrue, h.now)
	h.placeOn("demo-a", "node-a")
	h.node("node-b", corev1.ConditionUnknown, h.now.Add(-time.Hour))
	h.placeOn("demo-b", "node-b")
	h.node("node-c", corev1.ConditionUnknown, h.now.Add(-time.Hour))
	h.placeOn("demo-c", "node-c")
	h.loseQuorum("demo-a", "demo-b", "demo-c")
	h.reconcile()
	h.g.Expect(h.quorumLost().Status).To(Equal(metav1.ConditionTrue))
	h.running("rec", "demo-a")
	for range 4 {
		h.reconcile()
	}
	h.g.Expect(h.liveMemberNames()).To(Equal([]string{"demo-a"}))
	h.g.Expect(h.hasPod("demo-b")).To(BeTrue(), "stuck on its lost node")
	h.reconcile()
	h.g.Expect(h.member("demo-a").Spec.ForceNewCluster).To(BeTrue())
}

func TestRecovery_NotStartedWhileAQuorumAnswers(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.running("rec", "demo-a")
	h.reconcile()
	rec := h.cluster().Status.Recovery
	h.g.Expect(rec).NotTo(BeNil())
	h.g.Expect(rec.Failed).To(ContainSubstring("a quorum of voters answered again before the recovery began; nothing was changed"))
	for range 3 {
		h.reconcile()
	}
	h.g.Expect(h.members()).To(HaveLen(3))
	h.g.Expect(h.member("demo-a").Spec.ForceNewCluster).To(BeFalse())
}

func TestRecovery_FailsWhenTheSurvivorIsDeleted(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.loseQuorum("demo-a", "demo-b", "demo-c")
	h.running("rec", "demo-a")
	h.reconcile()
	h.g.Expect(h.c.Delete(context.Background(), h.member("demo-a"))).To(Succeed())
	h.reconcile()
	h.g.Expect(h.cluster().Status.Recovery.Failed).To(ContainSubstring("survivor demo-a was deleted during the recovery"))
	h.g.Expect(h.cluster().Status.Recovery.Active()).To(BeFalse())
}

// The survivor's own data turns out bad when it restarts: the recovery
// stops there and says to use a snapshot.
func TestRecovery_FailsWhenTheSurvivorCannotStart(t *testing.T) {
	h := newHarness(t)
	h.formed(1, "demo-a")
	h.loseQuorum("demo-a")
	m := h.member("demo-a")
	m.Spec.ForceNewCluster = true
	h.g.Expect(h.c.Update(context.Background(), m)).To(Succeed())
	cl := h.cluster()
	cl.Status.Recovery = &v1alpha1.ClusterRecovery{Name: "rec", Source: v1alpha1.RecoveryFromSurvivor, Survivor: "demo-a", StartedAt: metav1.NewTime(h.now)}
	h.g.Expect(h.c.Status().Update(context.Background(), cl)).To(Succeed())
	p := h.pod("demo-a")
	p.Annotations = map[string]string{pod.ForceNewClusterAnnotation: "true"}
	h.g.Expect(h.c.Update(context.Background(), p)).To(Succeed())
	h.breakPod("demo-a", "Error", `{"level":"fatal","msg":"failed to open database","error":"invalid database"}`)
	h.reconcile()
	h.g.Expect(h.cluster().Status.Recovery.Failed).To(ContainSubstring("survivor demo-a cannot start on its data with --force-new-cluster (DataCorrupt"))
	h.g.Expect(h.cluster().Status.Recovery.Failed).To(ContainSubstring("recover from a snapshot"))
}

// --force-new-cluster outside an active recovery is cleared before anything
// else: the flag must never outlive the recovery that set it.
func TestRecovery_AStrayFlagIsCleared(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	m := h.member("demo-b")
	m.Spec.ForceNewCluster = true
	h.g.Expect(h.c.Update(context.Background(), m)).To(Succeed())
	h.reconcile()
	h.g.Expect(h.member("demo-b").Spec.ForceNewCluster).To(BeFalse())
}

func TestRecovery_Automatic(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	cl := h.cluster()
	cl.Spec.DisasterRecovery = v1alpha1.DisasterRecoverySpec{Automatic: v1alpha1.AutomaticFromSurvivor, AfterSeconds: ptr.To[int32](60)}
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
	h.loseQuorum("demo-a", "demo-b", "demo-c")
	recoveries := func() []v1alpha1.EtcdRecovery {
		var list v1alpha1.EtcdRecoveryList
		h.g.Expect(h.c.List(context.Background(), &list, client.InNamespace(testNS))).To(Succeed())
		return list.Items
	}
	h.reconcile()
	lostAt := h.cluster().Status.QuorumLoss.LostAt.Time
	h.now = h.now.Add(59 * time.Second)
	h.reconcile()
	h.g.Expect(recoveries()).To(BeEmpty(), "not before afterSeconds")

	h.now = h.now.Add(2 * time.Second)
	h.reconcile()
	h.g.Expect(recoveries()).To(HaveLen(1))
	er := recoveries()[0]
	h.g.Expect(er.Name).To(Equal(fmt.Sprintf("demo-auto-%d", lostAt.Unix())))
	h.g.Expect(er.Spec.ClusterName).To(Equal(testName))
	h.g.Expect(er.Spec.Source.Survivor).NotTo(BeNil())
	h.g.Expect(er.Spec.Force).To(BeFalse(), "an automatic recovery is never forced")
	h.g.Expect(h.eventsWith("AutomaticRecovery")).To(HaveLen(1))

	h.reconcile()
	h.g.Expect(recoveries()).To(HaveLen(1), "one per loss while it is pending")
	h.finish(&er, v1alpha1.RecoveryRefused)
	h.reconcile()
	h.g.Expect(recoveries()).To(HaveLen(1), "a refused one is not retried for the same loss")
	h.g.Expect(h.members()).To(HaveLen(3))
}

func TestRecovery_NoAutomaticRecoveryByDefault(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.loseQuorum("demo-a", "demo-b", "demo-c")
	h.reconcile()
	h.now = h.now.Add(24 * time.Hour)
	h.reconcile()
	var list v1alpha1.EtcdRecoveryList
	h.g.Expect(h.c.List(context.Background(), &list, client.InNamespace(testNS))).To(Succeed())
	h.g.Expect(list.Items).To(BeEmpty())
	h.g.Expect(h.etcd.Calls).NotTo(ContainElement(HaveField("Op", etcd.OpMemberRemove)))
}

// metricsByURL answers SelfReport from a table; a URL not in it does not
// answer.
type metricsByURL map[string]etcd.SelfReport

func (m metricsByURL) SelfReport(_ context.Context, url string) (etcd.SelfReport, error) {
	if r, ok := m[url]; ok {
		return r, nil
	}
	return etcd.SelfReport{}, &etcd.CallError{Op: etcd.OpMetrics, Endpoint: url, Err: errUnreachable()}
}

// Two survivors of five: demo-a was restarted while the quorum was lost, so
// it serves no client request and only its metrics say how far it got;
// both are reported with their indexes, for a recovery to compare.
func TestQuorumLost_ASurvivorThatOnlyItsMetricsReport(t *testing.T) {
	h := newHarness(t)
	h.formed(5, "demo-a", "demo-b", "demo-c", "demo-d", "demo-e")
	h.loseQuorum("demo-b", "demo-c", "demo-d", "demo-e")
	h.etcd.SetEndpointError(clientURL("demo-a"), errUnreachable())
	h.setPodReady("demo-a", false)
	url, err := etcd.MetricsURLFor(clientURL("demo-a"), v1alpha1.MetricsPort)
	h.g.Expect(err).NotTo(HaveOccurred())
	id, err := etcd.ParseMemberID(h.member("demo-a").Status.MemberID)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.r.Metrics = metricsByURL{url: {MemberID: id, AppliedIndex: 1, CommittedIndex: 1, Revision: 1}}
	h.reconcile()
	g := h.quorumLost()
	h.g.Expect(g.Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(g.Reason).To(Equal(v1alpha1.MembersGoneReason))
	h.g.Expect(g.Message).To(ContainSubstring("demo-a (raft index 1, applied 1, revision 1; read from its metrics, as it serves no clients without a quorum)"))
	names := []string{}
	for _, s := range h.cluster().Status.QuorumLoss.Survivors {
		names = append(names, s.Name)
	}
	h.g.Expect(names).To(ConsistOf("demo-a", "demo-b"))
	h.g.Expect(h.members()).To(HaveLen(5), "nothing is changed")

	// A report with another member's ID is not demo-a's.
	h.r.Metrics = metricsByURL{url: {MemberID: id + 1, AppliedIndex: 9, Revision: 9}}
	h.reconcile()
	h.g.Expect(h.quorumLost().Message).NotTo(ContainSubstring("read from its metrics"))
	h.g.Expect(h.cluster().Status.QuorumLoss.Survivors).To(HaveLen(1))
}
