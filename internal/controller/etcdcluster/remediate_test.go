package etcdcluster

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
	"github.com/quorumctl/etcd-operator/internal/remediation"
)

const wipedFatal = `{"level":"fatal","msg":"discovery failed","error":"cannot fetch cluster info from peer urls: could not retrieve cluster information from the given URLs"}`

// breakPod makes a member's Pod not ready with the given last termination,
// and its etcd endpoint unreachable.
func (h *harness) breakPod(name, reason, message string) {
	h.t.Helper()
	p := &corev1.Pod{}
	h.g.Expect(h.c.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: name}, p)).To(Succeed())
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "etcd", RestartCount: 1,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: reason, Message: message}},
	}}
	h.g.Expect(h.c.Status().Update(context.Background(), p)).To(Succeed())
	h.etcd.SetEndpointError(clientURL(name), etcdfake.ErrUnreachable)
}

func (h *harness) exists(name string) bool {
	err := h.c.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: name}, &v1alpha1.EtcdMember{})
	return err == nil
}

func TestRemediation_ReplacesAMemberThatLostItsData(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.breakPod("demo-a", "Error", wipedFatal)
	h.reconcile()
	h.g.Expect(h.exists("demo-a")).To(BeFalse(), "the seed is replaced on its first classified failure")
	h.g.Expect(h.cluster().Status.BrokenMembers).To(BeEquivalentTo(1))
	hc := h.condition(v1alpha1.MembersHealthyCondition)
	h.g.Expect(hc.Reason).To(Equal(v1alpha1.ReplacingMemberReason))
	h.g.Expect(hc.Message).To(ContainSubstring("DataDirLost"))
	h.g.Expect(h.events.Events).To(Receive(ContainSubstring("DataDirLost")))
}

func TestRemediation_QuorumGateHolds(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.breakPod("demo-a", "Error", wipedFatal)
	h.breakPod("demo-b", "Error", wipedFatal)
	h.reconcile()
	h.g.Expect(h.members()).To(HaveLen(3), "nothing is deleted below quorum")
	hc := h.condition(v1alpha1.MembersHealthyCondition)
	h.g.Expect(hc.Reason).To(Equal(v1alpha1.QuorumGateHoldingReason))
	h.g.Expect(hc.Message).To(ContainSubstring("below quorum"))
}

func TestRemediation_NeverReplacesAnOOMKilledMember(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.breakPod("demo-c", "OOMKilled", wipedFatal)
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeTrue())
	h.g.Expect(h.cluster().Status.BrokenMembers).To(BeZero())
}

func TestRemediation_NotDuringBootstrap(t *testing.T) {
	h := newHarness(t)
	h.createCluster(3)
	h.reconcile()
	seed := h.members()[0].Name
	h.readyPod(seed)
	h.breakPod(seed, "Error", wipedFatal)
	h.reconcile()
	h.g.Expect(h.exists(seed)).To(BeTrue(), "a failing seed before the cluster forms is a bootstrap failure, not a member to replace")
}

func TestRemediation_MemoryMemberWhosePodIsGone(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	m := h.member("demo-b")
	m.Spec.Storage.Medium = v1alpha1.StorageMediumMemory
	h.g.Expect(h.c.Update(context.Background(), m)).To(Succeed())
	m = h.member("demo-b")
	m.Status.PodUID = "uid-of-a-pod-that-is-gone"
	h.g.Expect(h.c.Status().Update(context.Background(), m)).To(Succeed())
	h.etcd.SetEndpointError(clientURL("demo-b"), etcdfake.ErrUnreachable)
	h.reconcile()
	h.g.Expect(h.exists("demo-b")).To(BeFalse())
}

func TestRemediation_MemberLeadingAClusterOfItsOwnIsReplacedAtOnce(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	c := h.etcd.Members()[2]
	// demo-c answers as the leader of a one-member cluster, as a wrongly
	// re-bootstrapped member does: no lag explains that.
	h.etcd.SetStatus(clientURL("demo-c"), statusFor(c.ID, c.ID))
	h.etcd.SetMemberListAt(clientURL("demo-c"), etcd.MemberList{ClusterID: etcdfake.DefaultClusterID, Members: []etcd.Member{c}})
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeFalse())
	h.g.Expect(h.events.Events).To(Receive(ContainSubstring("Fencing member demo-c")))
	h.g.Expect(h.events.Events).To(Receive(ContainSubstring("Replacing member demo-c")))
}

func TestRemediation_DisagreementIsFencedThenReplacedOnlyIfItLasts(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	c := h.etcd.Members()[2]
	// demo-c claims leadership the quorum does not follow, with the right
	// member list: an old leader that has not yet stepped down looks so.
	h.etcd.SetStatus(clientURL("demo-c"), statusFor(c.ID, c.ID))
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeTrue(), "a possible lag costs no data at first sight")
	h.g.Expect(h.member("demo-c").Status.Fenced).To(ContainSubstring("itself leader"), "but it leaves client traffic at once")
	h.g.Expect(h.condition(v1alpha1.MembersHealthyCondition).Message).To(ContainSubstring("fenced"))

	h.now = h.now.Add(remediation.DivergenceConfirmAfter / 2)
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeTrue(), "not yet confirmed")

	h.now = h.now.Add(remediation.DivergenceConfirmAfter)
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeFalse(), "still disagreeing after the confirmation window")
}

func TestRemediation_FencedMemberThatAgreesAgainIsUnfenced(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	c := h.etcd.Members()[2]
	h.etcd.SetStatus(clientURL("demo-c"), statusFor(c.ID, c.ID))
	h.reconcile()
	h.g.Expect(h.member("demo-c").Status.Fenced).NotTo(BeEmpty())

	h.etcd.ResetStatus(clientURL("demo-c"))
	h.now = h.now.Add(2 * remediation.DivergenceConfirmAfter)
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeTrue())
	h.g.Expect(h.member("demo-c").Status.Fenced).To(BeEmpty(), "a full check agrees again")
	h.g.Expect(h.events.Events).To(Receive(ContainSubstring("Fencing member demo-c")))
	h.g.Expect(h.events.Events).To(Receive(ContainSubstring("agrees with the quorum again")))
}

func statusFor(member, leader uint64) etcdStatus {
	return etcdStatus{MemberID: member, LeaderID: leader, ClusterID: etcdfake.DefaultClusterID, RaftTerm: 1}
}

func TestRemediation_HoldsWhenTheQuorumIsGone(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.breakPod("demo-a", "Error", wipedFatal)
	h.breakPod("demo-b", "Error", wipedFatal)
	// Without quorum the linearizable member list fails; demo-c still
	// answers from its own store.
	h.etcd.SetHook(etcd.OpMemberList, func(etcdfake.Call) error { return etcdfake.ErrUnreachable })
	h.reconcile()
	h.g.Expect(h.members()).To(HaveLen(3))
	hc := h.condition(v1alpha1.MembersHealthyCondition)
	h.g.Expect(hc.Reason).To(Equal(v1alpha1.QuorumGateHoldingReason))
	h.g.Expect(hc.Message).To(ContainSubstring("below quorum"))
	h.g.Expect(h.cluster().Status.BrokenMembers).To(BeEquivalentTo(2))
}
