package etcdcluster

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
	"github.com/quorumctl/etcd-operator/internal/remediation"
)

const mib = int64(1) << 20

var (
	// fragmentedUsage has 200 MiB of its 300 MiB file free.
	fragmentedUsage = etcdfake.Usage{DBSize: 300 * mib, InUse: 100 * mib, Quota: 2 << 30}
	// fullUsage is a member of a 256 MiB quota that raised NOSPACE, with a
	// third of it history a compaction frees.
	fullUsage = etcdfake.Usage{DBSize: 256 * mib, InUse: 256 * mib, Quota: 256 * mib}
)

// settle waits for the maintenance call in flight to return.
func (h *harness) settle() {
	h.t.Helper()
	mm := h.r.memos.get(h.cluster())
	h.g.Eventually(mm.running).WithTimeout(5 * time.Second).WithPolling(time.Millisecond).Should(BeNil())
}

// maintenanceEvents are the Events of the defragmentations and recoveries.
func (h *harness) maintenanceEvents() []string {
	var out []string
	for _, e := range h.drainEvents() {
		for _, r := range []string{"Defragment", "LeaderMoved", "NoSpace", "Compact", "CorruptAlarm"} {
			if strings.Contains(e, r) {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

// defragmentEverything runs passes until nothing is running and nothing is
// due, and returns the endpoints in the order they were defragmented.
func (h *harness) defragmentEverything() []string {
	h.t.Helper()
	for i := 0; i < 30; i++ {
		h.reconcile()
		h.settle()
		if c := h.condition(v1alpha1.MaintenanceCondition); c.Status == metav1.ConditionFalse {
			return h.etcd.Defragmented
		}
	}
	h.t.Fatalf("maintenance did not finish: %+v", h.condition(v1alpha1.MaintenanceCondition))
	return nil
}

func TestMaintenance_DefragmentsFollowersFirstAndTheLeaderLastAfterAHandoff(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	b, _ := h.etcdMember(peerURL("demo-b"))
	h.etcd.SetLeader(b.ID)
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		h.etcd.SetUsage(clientURL(n), fragmentedUsage)
	}

	done := h.defragmentEverything()
	h.g.Expect(done).To(Equal([]string{clientURL("demo-a"), clientURL("demo-c"), clientURL("demo-b")}),
		"followers by name, the leader last")
	a, _ := h.etcdMember(peerURL("demo-a"))
	h.g.Expect(h.etcd.MovedLeader).To(Equal([]uint64{a.ID}), "leadership moved away once, to a member already done")
	events := h.maintenanceEvents()
	h.g.Expect(events).To(HaveLen(7))
	h.g.Expect(events[0]).To(ContainSubstring("MemberDefragmenting Defragmenting member demo-a (follower): 200.0 MiB of its 300.0 MiB database is free (67%)"))
	h.g.Expect(events[1]).To(ContainSubstring("MemberDefragmented Defragmented member demo-a (follower) in 0s: 200.0 MiB reclaimed, database 300.0 MiB -> 100.0 MiB (100.0 MiB in use)"))
	h.g.Expect(events[2]).To(ContainSubstring("Defragmenting member demo-c (follower)"))
	h.g.Expect(events[4]).To(ContainSubstring("LeaderMoved Moved leadership from demo-b to demo-a before defragmenting it"))
	h.g.Expect(events[5]).To(ContainSubstring("Defragmenting member demo-b (the leader, until it handed over to demo-a)"))
	h.g.Expect(events[6]).To(ContainSubstring("Defragmented member demo-b (the leader, until it handed over to demo-a)"))
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		m := h.member(n)
		h.g.Expect(m.Status.Maintenance).To(BeNil(), "%s's record is cleared", n)
		h.g.Expect(m.Status.LastDefragTime).NotTo(BeNil())
		h.g.Expect(h.etcd.UsageOf(clientURL(n)).DBSize).To(Equal(100 * mib))
	}
	cl := h.cluster()
	h.g.Expect(cl.Status.Maintenance.LastDefragTime.Time).To(BeTemporally("==", h.now))
	idle := h.condition(v1alpha1.MaintenanceCondition)
	h.g.Expect(idle.Reason).To(Equal(v1alpha1.MaintenanceIdleReason))
	h.g.Expect(idle.Message).To(Equal("no member is due for defragmentation; one is when 25% of its database file, and at least 64.0 MiB, is free, " +
		"or when the file reaches 80% of its quota; last defragmentation 2023-11-14T22:13:20Z"))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
}

func TestMaintenance_OneMemberAtATimeMarkedWhileItRuns(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	for _, n := range []string{"demo-b", "demo-c"} {
		h.etcd.SetUsage(clientURL(n), fragmentedUsage)
	}
	release := make(chan struct{})
	h.etcd.SetHook(etcd.OpDefragment, func(etcdfake.Call) error { <-release; return nil })
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	h.reconcile()
	h.g.Expect(h.member("demo-b").Status.Maintenance).To(HaveField("Kind", v1alpha1.MemberMaintenanceDefragment),
		"the member is marked before its defragmentation starts")
	running := h.condition(v1alpha1.MaintenanceCondition)
	h.g.Expect(running.Reason).To(Equal(v1alpha1.DefragmentingReason))
	h.g.Expect(running.Message).To(HavePrefix("defragmenting demo-b (follower; since 22:13:20): 200.0 MiB of its 300.0 MiB database is free"))

	t.Log("the member stops answering while it rewrites its file: nothing else moves, and self-heal waits")
	h.setPodReady("demo-b", false)
	h.etcd.SetEndpointError(clientURL("demo-b"), etcdfake.ErrUnreachable)
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Version = "3.6.17" })
	for i := 0; i < 5; i++ {
		h.now = h.now.Add(time.Minute)
		h.reconcile()
	}
	h.g.Expect(h.etcd.Calls).To(ContainElement(HaveField("Op", etcd.OpDefragment)))
	var defrags int
	for _, c := range h.etcd.Calls {
		if c.Op == etcd.OpDefragment {
			defrags++
		}
	}
	h.g.Expect(defrags).To(Equal(1), "one member at a time")
	h.g.Expect(h.members()).To(HaveLen(3), "a member being defragmented is not replaced, however long it is silent")
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		h.g.Expect(h.version(n)).To(Equal(v1alpha1.DefaultEtcdVersion), "the rollout waits for the defragmentation")
	}
	h.g.Expect(h.condition(v1alpha1.MembersHealthyCondition).Status).To(Equal(metav1.ConditionTrue))

	t.Log("it returns: the record goes, and the next member waits for a fresh look at the first")
	close(release)
	h.settle()
	h.setPodReady("demo-b", true)
	h.etcd.SetEndpointError(clientURL("demo-b"), nil)
	h.reconcile()
	h.g.Expect(h.member("demo-b").Status.Maintenance).To(BeNil())
	h.g.Expect(h.member("demo-c").Status.Maintenance).To(BeNil())
	h.reconcile()
	h.g.Expect(h.version("demo-b")).To(Equal("3.6.17"), "the rollout goes first once the call is done; defragmentation waits for it")
	h.g.Expect(h.condition(v1alpha1.MaintenanceCondition).Message).To(ContainSubstring("waiting for the rollout (0 of 3 members updated)"))
}

func TestMaintenance_AMarkOutlivesTheOperator(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	m := h.member("demo-c")
	m.Status.Maintenance = &v1alpha1.MemberMaintenance{Kind: v1alpha1.MemberMaintenanceDefragment, Since: metav1.NewTime(h.now)}
	h.g.Expect(h.c.Status().Update(t.Context(), m)).To(Succeed())
	p := h.pod("demo-c")
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(h.now)}}
	p.Status.ContainerStatuses[0].Ready = false
	p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(h.now.Add(-time.Hour))
	h.g.Expect(h.c.Status().Update(t.Context(), p)).To(Succeed())
	h.etcd.SetEndpointError(clientURL("demo-c"), etcdfake.ErrUnreachable)

	t.Log("a new process, no call in flight: the record keeps self-heal patient")
	h.now = h.now.Add(5 * time.Minute)
	h.reconcile()
	h.g.Expect(h.members()).To(HaveLen(3))
	h.g.Expect(h.condition(v1alpha1.MaintenanceCondition).Message).To(Equal("waiting for demo-c, whose defragmentation was interrupted, to answer again"))

	t.Log("past maintenanceTimeout the record no longer counts: the silent member is judged as any other")
	h.now = h.now.Add(maintenanceTimeout)
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeFalse())
	h.g.Expect(h.drainEvents()).To(ContainElement(ContainSubstring(string(remediation.Unresponsive))))
}

func TestMaintenance_ARecordIsClearedOnceTheMemberAnswers(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	m := h.member("demo-c")
	m.Status.Maintenance = &v1alpha1.MemberMaintenance{Kind: v1alpha1.MemberMaintenanceDefragment, Since: metav1.NewTime(h.now)}
	h.g.Expect(h.c.Status().Update(t.Context(), m)).To(Succeed())
	h.reconcile()
	h.g.Expect(h.member("demo-c").Status.Maintenance).To(BeNil())
}

func TestMaintenance_WaitsForItsWindow(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	cl := h.cluster()
	cl.Spec.Maintenance.Defrag.Schedule = "0 2 * * *"
	cl.Spec.Maintenance.Defrag.Window = &metav1.Duration{Duration: 30 * time.Minute}
	h.g.Expect(h.c.Update(t.Context(), cl)).To(Succeed())
	h.etcd.SetUsage(clientURL("demo-b"), fragmentedUsage)

	h.reconcile() // 22:13 UTC
	h.g.Expect(h.etcd.Defragmented).To(BeEmpty())
	due := h.condition(v1alpha1.MaintenanceCondition)
	h.g.Expect(due.Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(due.Reason).To(Equal(v1alpha1.DefragDueReason))
	h.g.Expect(due.Message).To(HaveSuffix(`it starts within 30m0s of each tick of "0 2 * * *", next at 2023-11-15T02:00:00Z`))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue), "due is not unready")

	h.now = time.Date(2023, 11, 15, 2, 10, 0, 0, time.UTC)
	h.reconcile()
	h.settle()
	h.g.Expect(h.etcd.Defragmented).To(Equal([]string{clientURL("demo-b")}))
}

func TestMaintenance_BadScheduleStopsRoutineDefragmentation(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	cl := h.cluster()
	cl.Spec.Maintenance.Defrag.Schedule = "61 * * * *"
	h.g.Expect(h.c.Update(t.Context(), cl)).To(Succeed())
	h.etcd.SetUsage(clientURL("demo-b"), fragmentedUsage)
	h.reconcile()
	h.g.Expect(h.etcd.Defragmented).To(BeEmpty())
	c := h.condition(v1alpha1.MaintenanceCondition)
	h.g.Expect(c.Reason).To(Equal(v1alpha1.InvalidDefragScheduleReason))
	h.g.Expect(c.Message).To(HavePrefix(`spec.maintenance.defrag.schedule: failed to parse schedule "61 * * * *": `))
	h.g.Expect(h.maintenanceEvents()).To(BeEmpty())
	h.g.Expect(h.drainEvents()).To(BeEmpty())
}

func TestMaintenance_Disabled(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	cl := h.cluster()
	cl.Spec.Maintenance.Defrag.Enabled = ptr.To(false)
	h.g.Expect(h.c.Update(t.Context(), cl)).To(Succeed())
	h.etcd.SetUsage(clientURL("demo-b"), fragmentedUsage)
	h.reconcile()
	h.g.Expect(h.etcd.Defragmented).To(BeEmpty())
	h.g.Expect(h.condition(v1alpha1.MaintenanceCondition)).To(And(
		HaveField("Status", metav1.ConditionFalse), HaveField("Reason", v1alpha1.DefragDisabledReason)))
}

// raiseNoSpace plays etcd reaching the quota on every member: each raises
// the alarm, and every Status lists them all.
func (h *harness) raiseNoSpace(names ...string) {
	h.t.Helper()
	for _, n := range names {
		em, _ := h.etcdMember(peerURL(n))
		h.etcd.RaiseAlarm(etcd.Alarm{MemberID: em.ID, Type: etcd.AlarmNoSpace})
	}
}

func TestMaintenance_RecoversFromNoSpace(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.etcd.SetRevision(900)
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		h.etcd.SetUsage(clientURL(n), fullUsage)
	}
	// Compacting frees the history: a third of each file.
	h.etcd.SetHook(etcd.OpCompact, func(etcdfake.Call) error {
		for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
			h.etcd.SetUsage(clientURL(n), etcdfake.Usage{DBSize: 256 * mib, InUse: 170 * mib, Quota: 256 * mib})
		}
		return nil
	})
	h.raiseNoSpace("demo-a")

	h.reconcile()
	c := h.condition(v1alpha1.MaintenanceCondition)
	h.g.Expect(c.Reason).To(Equal(v1alpha1.NoSpaceRecoveringReason))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.NoSpaceRecoveringReason), "the cluster refuses writes: not Ready")
	h.g.Expect(h.condition(v1alpha1.AvailableCondition).Status).To(Equal(metav1.ConditionTrue), "it still has its quorum, and serves reads")
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionFalse), "the operator is on it")
	h.g.Expect(h.maintenanceEvents()).To(ContainElement(
		"Warning NoSpace etcd raised NOSPACE on demo-a and refuses writes until it is disarmed; compacting at revision 900 (since 22:13:20)"),
		"at once, in the pass that sees the alarm")

	h.defragmentEverything()
	h.g.Expect(h.etcd.Compacted).To(Equal([]int64{900}))
	h.g.Expect(h.etcd.Defragmented).To(Equal([]string{clientURL("demo-b"), clientURL("demo-c"), clientURL("demo-a")}))
	h.g.Expect(h.etcd.Alarms()).To(BeEmpty())
	h.g.Expect(h.cluster().Status.Maintenance.LastNoSpaceRecoveryTime).NotTo(BeNil())
	var recovered bool
	for _, e := range h.maintenanceEvents() {
		recovered = recovered || strings.HasPrefix(e, "Normal NoSpaceRecovered Disarmed NOSPACE on demo-a: compacted and defragmented, the cluster takes writes again (demo-a: 170.0 MiB of 256.0 MiB")
	}
	h.g.Expect(recovered).To(BeTrue())
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.MaintenanceCondition).Reason).To(Equal(v1alpha1.MaintenanceIdleReason))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
}

func TestMaintenance_NoSpaceWithLiveDataOverTheQuota(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.etcd.SetRevision(900)
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		h.etcd.SetUsage(clientURL(n), fullUsage)
	}
	h.raiseNoSpace("demo-a", "demo-b", "demo-c")
	for i := 0; i < 10; i++ {
		h.reconcile()
		h.settle()
	}
	c := h.condition(v1alpha1.MaintenanceCondition)
	h.g.Expect(c.Reason).To(Equal(v1alpha1.NoSpaceOverQuotaReason))
	h.g.Expect(c.Message).To(ContainSubstring("the live data of demo-a is 256.0 MiB, 100% of its 256.0 MiB backend quota, even after compaction and defragmentation; the operator deletes nothing"))
	h.g.Expect(c.Message).To(ContainSubstring("Raise spec.options.quotaBackendBytes, or grow spec.storage.size"))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.NoSpaceOverQuotaReason))
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionTrue), "it needs a person")
	h.g.Expect(h.etcd.Compacted).To(Equal([]int64{900}))
	h.g.Expect(h.etcd.Defragmented).To(HaveLen(3), "each member once, to learn what its live data needs")
	h.g.Expect(h.etcd.Alarms()).To(HaveLen(3), "disarming would only have etcd raise it again")
	h.g.Expect(h.etcd.Disarmed).To(BeEmpty())

	t.Log("the remedy: a larger quota rolls out under the alarm, which does not count against the members' health")
	h.editTemplate(func(t *v1alpha1.MemberTemplate) {
		t.Options = &v1alpha1.EtcdOptions{QuotaBackendBytes: ptr.To[int64](1 << 30)}
	})
	h.reconcile()
	rolled := 0
	for _, m := range h.members() {
		if m.Spec.Options != nil {
			rolled++
		}
	}
	h.g.Expect(rolled).To(Equal(1), "a first follower is rolled onto the larger quota")

	t.Log("the quota is raised and the members run with it: the alarm goes")
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		h.etcd.SetUsage(clientURL(n), etcdfake.Usage{DBSize: 256 * mib, InUse: 256 * mib, Quota: 1024 * mib})
	}
	h.reconcile()
	h.g.Expect(h.etcd.Alarms()).To(BeEmpty())
	h.g.Expect(h.etcd.Disarmed).To(HaveLen(3))
}

func TestMaintenance_NoSpaceRecoveryDisabled(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	cl := h.cluster()
	cl.Spec.Maintenance.NoSpaceRecovery.Enabled = ptr.To(false)
	h.g.Expect(h.c.Update(t.Context(), cl)).To(Succeed())
	h.raiseNoSpace("demo-a")
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.MaintenanceCondition).Reason).To(Equal(v1alpha1.NoSpaceRecoveryDisabledReason))
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(h.etcd.Compacted).To(BeEmpty())
	h.g.Expect(h.etcd.Alarms()).To(HaveLen(1))
}

func TestMaintenance_CorruptAlarmBlocksEverything(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.etcd.SetUsage(clientURL("demo-b"), fragmentedUsage)
	em, _ := h.etcdMember(peerURL("demo-c"))
	h.etcd.RaiseAlarm(etcd.Alarm{MemberID: em.ID, Type: etcd.AlarmCorrupt})
	h.raiseNoSpace("demo-a")
	h.reconcile()
	h.settle()
	h.reconcile()
	c := h.condition(v1alpha1.MaintenanceCondition)
	h.g.Expect(c.Reason).To(Equal(v1alpha1.CorruptAlarmReason))
	h.g.Expect(c.Message).To(HavePrefix("etcd raised a CORRUPT alarm on demo-c"))
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(h.etcd.Compacted).To(BeEmpty())
	h.g.Expect(h.etcd.Defragmented).To(BeEmpty())
	h.g.Expect(h.condition(v1alpha1.AvailableCondition).Reason).To(Equal(v1alpha1.QuorumLostReason),
		"a CORRUPT alarm makes every member unhealthy, unlike NOSPACE")
}

func TestMaintenance_AFailedDefragmentationIsRetriedLater(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.etcd.SetUsage(clientURL("demo-b"), fragmentedUsage)
	h.etcd.FailNext(etcd.OpDefragment, etcdfake.ErrUnreachable)
	h.reconcile()
	h.settle()
	h.reconcile()
	h.g.Expect(h.member("demo-b").Status.Maintenance).To(BeNil())
	h.g.Expect(h.member("demo-b").Status.LastDefragTime).To(BeNil())
	var failed bool
	for _, e := range h.drainEvents() {
		failed = failed || strings.HasPrefix(e, "Warning DefragmentFailed Defragmenting member demo-b failed, trying again in 10m0s: ")
	}
	h.g.Expect(failed).To(BeTrue())
	h.reconcile()
	h.settle()
	h.g.Expect(h.etcd.Defragmented).To(BeEmpty(), "not at once")
	h.now = h.now.Add(11 * time.Minute)
	h.reconcile()
	h.settle()
	h.g.Expect(h.etcd.Defragmented).To(Equal([]string{clientURL("demo-b")}))
}
