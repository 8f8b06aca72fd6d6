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

func TestRemediation_DivergedMemberIsFencedThenReplaced(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	c := h.etcd.Members()[2]
	// demo-c answers as the leader of a one-member cluster.
	h.etcd.SetStatus(clientURL("demo-c"), statusFor(c.ID, c.ID))
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeFalse())
	h.g.Expect(h.events.Events).To(Receive(ContainSubstring("Diverged")))
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
