package etcdcluster

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// editTemplate changes the cluster's member template as a user would.
func (h *harness) editTemplate(edit func(*v1alpha1.MemberTemplate)) {
	h.t.Helper()
	cl := h.cluster()
	if cl.Spec.Version == "" {
		cl.Spec.Version = v1alpha1.DefaultEtcdVersion
	}
	edit(&cl.Spec.MemberTemplate)
	cl.Generation++
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
}

// setPodReady plays a member's Pod going down for its restart, or coming up.
func (h *harness) setPodReady(name string, ready bool) {
	h.t.Helper()
	p := h.pod(name)
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	h.g.Expect(h.c.Status().Update(context.Background(), p)).To(Succeed())
}

func (h *harness) version(name string) string { return h.member(name).Spec.Version }

func (h *harness) updatingEvents() []string {
	var out []string
	for _, e := range h.drainEvents() {
		if strings.Contains(e, "MemberUpdating") {
			out = append(out, e)
		}
	}
	return out
}

func TestRollout_FollowersFirstThenTheLeaderAfterAHandoff(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	b, _ := h.etcdMember(peerURL("demo-b"))
	h.etcd.SetLeader(b.ID)
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Version = "3.6.17" })

	var order []string
	for i := 0; i < 20 && len(order) < 3; i++ {
		before := map[string]string{}
		for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
			before[n] = h.version(n)
		}
		h.reconcile()
		for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
			if before[n] != h.version(n) {
				order = append(order, n)
				h.g.Expect(h.member(n).Status.RolledAt).NotTo(BeNil(), "self-heal is told the restart is on purpose")
				// Its Pod goes down and comes back; nothing else moves
				// while it is down.
				h.setPodReady(n, false)
				h.reconcile()
				h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Message).To(ContainSubstring("waiting for " + n))
				h.setPodReady(n, true)
			}
		}
	}
	h.g.Expect(order).To(Equal([]string{"demo-a", "demo-c", "demo-b"}), "followers by name, the leader last")
	events := h.updatingEvents()
	h.g.Expect(events).To(HaveLen(3))
	for i, n := range order {
		h.g.Expect(events[i]).To(ContainSubstring("Restarting member "+n), "an Event per member, in order")
	}
	h.g.Expect(h.etcd.MovedLeader).To(HaveLen(1), "leadership left demo-b before its restart")
	h.g.Expect(h.etcd.Leader()).NotTo(Equal(b.ID))
	h.reconcile()
	cl := h.cluster()
	h.g.Expect(cl.Status.UpdatedMembers).To(BeEquivalentTo(3))
	h.g.Expect(cl.Status.CurrentVersion).To(Equal("3.6.17"))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		h.g.Expect(h.member(n).Status.RolledAt).To(BeNil(), "forgotten once %s is healthy again", n)
	}
}

func TestRollout_ReadyOnlyWhenEveryMemberIsUpdated(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.editTemplate(func(t *v1alpha1.MemberTemplate) {
		t.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	})
	h.reconcile()
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.RollingUpdateReason))
	h.g.Expect(h.cluster().Status.UpdatedMembers).To(BeEquivalentTo(1))
}

func TestRollout_MemoryMembersAreReplacedJoinFirst(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	memory := v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: ptrQuantity("256Mi")}
	cl := h.cluster()
	cl.Spec.Storage = memory
	cl.Status.Observed.Storage = memory
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
	h.g.Expect(h.c.Status().Update(context.Background(), cl)).To(Succeed())
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		m := h.member(n)
		m.Spec.Storage = memory
		h.g.Expect(h.c.Update(context.Background(), m)).To(Succeed())
	}
	h.withFinalizers()
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Version = "3.6.17" })

	for i := 0; i < 60; i++ {
		h.reconcile()
		h.runFinalizers()
		h.collectGarbage()
		h.g.Expect(h.healthyVoters()).To(BeNumerically(">=", 3), "pass %d: never fewer than three healthy voters", i)
		for _, m := range h.members() {
			if m.Status.Role == v1alpha1.MemberRoleVoter && h.hasPod(m.Name) && h.pod(m.Name).Labels[v1alpha1.RoleLabel] == "" {
				h.labelVoter(m.Name)
			}
			if m.Spec.InitialCluster != "" && !h.hasPod(m.Name) {
				if em, ok := h.etcdMember(m.Spec.PeerURL); ok && em.Name == "" {
					h.startLearner(m.Name)
				}
			}
		}
		if h.condition(v1alpha1.ReadyCondition).Status == metav1.ConditionTrue {
			break
		}
	}
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue), h.condition(v1alpha1.ReadyCondition).Message)
	members := h.members()
	h.g.Expect(members).To(HaveLen(3))
	for _, m := range members {
		h.g.Expect(m.Spec.Version).To(Equal("3.6.17"))
		h.g.Expect(m.Spec.Replaces).To(BeElementOf("demo-a", "demo-b", "demo-c"), "each is a replacement")
		h.g.Expect(m.Status.RolledAt).To(BeNil(), "never restarted in place: its data would go")
	}
}

func TestRollout_RefusedVersionChangesMoveNothing(t *testing.T) {
	h := newHarness(t)
	h.formed(4, "demo-a", "demo-b", "demo-c")
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		m := h.member(n)
		m.Spec.Version = "3.5.30"
		h.g.Expect(h.c.Update(context.Background(), m)).To(Succeed())
	}
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Version = "3.6.16" })
	h.reconcile()
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.VersionChangeRefusedReason))
	h.g.Expect(ready.Message).To(ContainSubstring("3.5.32"), "names the patch to reach first")
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionTrue))
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		h.g.Expect(h.version(n)).To(Equal("3.5.30"), "%s is not rolled", n)
	}
	h.g.Expect(h.members()).To(HaveLen(3), "and no fourth member is added on the refused version")
	h.g.Expect(h.etcd.AddedLearners).To(BeEmpty())
}

func TestRollout_AnUpdatedMemberThatCannotStartStopsItAndSettingItBackHeals(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	b, _ := h.etcdMember(peerURL("demo-b"))
	h.etcd.SetLeader(b.ID)
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Version = "3.6.99" })
	h.reconcile()
	h.g.Expect(h.version("demo-a")).To(Equal("3.6.99"))
	// Its new Pod cannot start: the image does not exist.
	p := h.pod("demo-a")
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "image not present"}}}}
	h.g.Expect(h.c.Status().Update(context.Background(), p)).To(Succeed())
	h.etcd.SetEndpointError(clientURL("demo-a"), errUnreachable())
	for i := 0; i < 3; i++ {
		h.reconcile()
	}
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.RolloutFailedReason))
	h.g.Expect(ready.Message).To(ContainSubstring("demo-a cannot start etcd 3.6.99: ErrImageNeverPull"))
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(h.version("demo-b")).To(Equal(v1alpha1.DefaultEtcdVersion), "no second member is touched")
	h.g.Expect(h.version("demo-c")).To(Equal(v1alpha1.DefaultEtcdVersion))
	h.g.Expect(h.exists("demo-a")).To(BeTrue(), "self-heal does not replace a member the rollout is restarting")

	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Version = v1alpha1.DefaultEtcdVersion })
	h.reconcile()
	h.g.Expect(h.version("demo-a")).To(Equal(v1alpha1.DefaultEtcdVersion), "the member that never came up is rolled back first")
}

func TestRollout_PausedHoldsBetweenMembers(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	cl := h.cluster()
	cl.Spec.Rollout.Paused = true
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Version = "3.6.17" })
	h.reconcile()
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		h.g.Expect(h.version(n)).To(Equal(v1alpha1.DefaultEtcdVersion))
	}
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Reason).To(Equal(v1alpha1.RolloutPausedReason))
}

func TestRollout_37WaitsForSnapshotsPastThe35Log(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	cl := h.cluster()
	// Upgraded from 3.5 at raft index 100: the log still holds 3.5's entries.
	h.etcd.SetVersion("3.6.16")
	cl.Status.MinorSince = &v1alpha1.MinorMark{Minor: "3.6", RaftIndex: 100}
	h.g.Expect(h.c.Status().Update(context.Background(), cl)).To(Succeed())
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Version = "3.7.3" })
	for i := 0; i < 10; i++ {
		h.reconcile()
		if h.version("demo-a") != v1alpha1.DefaultEtcdVersion || h.version("demo-b") != v1alpha1.DefaultEtcdVersion || h.version("demo-c") != v1alpha1.DefaultEtcdVersion {
			break
		}
		h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Message).To(ContainSubstring("raft snapshot"))
	}
	st, err := h.etcd.Status(context.Background(), clientURL("demo-a"))
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(st.RaftIndex).To(BeNumerically(">", 100+10000), "the operator moved the log past one snapshot interval first")
	var advanced int
	for _, c := range h.etcd.Calls {
		if c.Op == "AdvanceLog" {
			advanced++
		}
	}
	h.g.Expect(advanced).To(BeNumerically(">=", 5), "in batches")
}

func TestRollout_AClusterFormedOn36UpgradesTo37AtOnce(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	cl := h.cluster()
	cl.Status.MinorSince = &v1alpha1.MinorMark{Minor: "3.6"}
	h.g.Expect(h.c.Status().Update(context.Background(), cl)).To(Succeed())
	b, _ := h.etcdMember(peerURL("demo-b"))
	h.etcd.SetLeader(b.ID)
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Version = "3.7.3" })
	h.reconcile()
	h.g.Expect(h.version("demo-a")).To(Equal("3.7.3"))
}
