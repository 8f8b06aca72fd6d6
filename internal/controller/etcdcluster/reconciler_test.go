package etcdcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

func TestBootstrap_SingleSeedThenClusterIDLatch(t *testing.T) {
	h := newHarness(t)
	h.createCluster(3)

	h.reconcile()
	members := h.members()
	h.g.Expect(members).To(HaveLen(1), "exactly one seed")
	seed := members[0]
	h.g.Expect(seed.Spec.Bootstrap).To(BeTrue())
	h.g.Expect(seed.Name).To(HavePrefix(testName + "-"))
	h.g.Expect(seed.Spec.InitialCluster).To(Equal(seed.Name + "=" + peerURL(seed.Name)))
	h.g.Expect(seed.Spec.ClusterToken).To(Equal("etcd-uid-" + testName))

	h.reconcile()
	h.g.Expect(h.members()).To(HaveLen(1), "no second seed while the first starts")
	h.g.Expect(h.condition(v1alpha1.AvailableCondition).Reason).To(Equal(v1alpha1.BootstrappingReason))

	h.readyPod(seed.Name)
	em := h.etcd.AddVoter(seed.Name, peerURL(seed.Name), clientURL(seed.Name))
	h.reconcile()
	h.g.Expect(h.cluster().Status.ClusterID).To(Equal(fmt.Sprintf("%016x", etcdfake.DefaultClusterID)))
	latched := h.member(seed.Name)
	h.g.Expect(latched.Status.MemberID).To(Equal(em.IDString()))
	h.g.Expect(latched.Status.Role).To(Equal(v1alpha1.MemberRoleVoter))
	h.g.Expect(h.etcd.Dialed).To(ContainElement([]string{clientURL(seed.Name)}), "discovery asks the seed alone")
}

func TestBootstrap_RefusesToLatchWhenSeedListsOthers(t *testing.T) {
	h := newHarness(t)
	h.createCluster(3)
	h.reconcile()
	seed := h.members()[0]
	h.readyPod(seed.Name)
	h.etcd.AddVoter(seed.Name, peerURL(seed.Name), clientURL(seed.Name))
	h.etcd.AddVoter("stranger", "http://stranger:2380", "http://stranger:2379")
	h.reconcile()
	h.g.Expect(h.cluster().Status.ClusterID).To(BeEmpty())
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Message).To(ContainSubstring("expected only itself"))
}

func TestAvailableButNotReadyWithOnlyTheSeed(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a")
	h.etcd.FailNext(etcd.OpMemberAddAsLearner, etcdfake.ErrUnreachable) // keep the scale-up from finishing
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.AvailableCondition).Status).To(Equal(metav1.ConditionTrue))
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.ScalingUpReason))
}

func TestScaleUp_CreateAddPatchInOnePass(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a")
	h.reconcile()
	h.g.Expect(h.etcd.AddedLearners).To(HaveLen(1))
	var added *v1alpha1.EtcdMember
	for _, m := range h.members() {
		if m.Name != "demo-a" {
			added = &m
		}
	}
	h.g.Expect(added).NotTo(BeNil())
	h.g.Expect(h.etcd.AddedLearners[0]).To(Equal([]string{peerURL(added.Name)}))
	h.g.Expect(added.Spec.InitialCluster).To(Equal(
		strings.Join(sortedPair("demo-a="+peerURL("demo-a"), added.Name+"="+peerURL(added.Name)), ",")))

	h.reconcile()
	h.g.Expect(h.etcd.Promoted).To(BeEmpty(), "a learner without a ready Pod is not promoted")
}

func TestScaleUp_LearnersJoinSideBySideFromEtcd36(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a")
	h.etcd.SetMaxLearners(2)
	h.reconcile()
	h.reconcile()
	h.g.Expect(h.etcd.AddedLearners).To(HaveLen(1),
		"etcd refuses a joining member whose --initial-cluster misses a member added since, so the next add waits for the first learner's start")
	first := ""
	for _, m := range h.members() {
		if m.Spec.PeerURL == h.etcd.AddedLearners[0][0] {
			first = m.Name
		}
	}
	h.startLearner(first)
	h.reconcile()
	h.reconcile()
	h.g.Expect(h.etcd.AddedLearners).To(HaveLen(2), "a second learner joins while the first, started, catches up")
	h.g.Expect(h.members()).To(HaveLen(3))
	h.reconcile()
	h.g.Expect(h.etcd.AddedLearners).To(HaveLen(2), "never more than the target")
}

// A started learner is promoted only after the next learner is added: after
// a promotion etcd refuses an add for 5 s, before it takes it at once
// (docs/design/0027).
func TestScaleUp_AddsTheNextLearnerBeforePromotingAStartedOne(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a")
	h.etcd.SetMaxLearners(2)
	h.reconcile()
	h.g.Expect(h.etcd.AddedLearners).To(HaveLen(1))
	first := ""
	for _, m := range h.members() {
		if m.Spec.PeerURL == h.etcd.AddedLearners[0][0] {
			first = m.Name
		}
	}
	h.reconcile()
	h.g.Expect(h.members()).To(HaveLen(3), "the second member is created and waits for the first learner's start")
	h.g.Expect(h.etcd.AddedLearners).To(HaveLen(1))
	learner := h.startLearner(first)
	h.reconcile()
	h.g.Expect(h.etcd.AddedLearners).To(HaveLen(2), "the second learner is added while the first is still a learner")
	h.g.Expect(h.etcd.Promoted).To(BeEmpty(), "the promotion comes after the add")
	h.reconcile()
	h.g.Expect(h.etcd.Promoted).To(Equal([]uint64{learner.ID}), "then the started learner is promoted")
}

// etcd with fewer learner slots than its version gives (a member started
// with a lower --max-learners) refuses the add that would come first; the
// started learner is then promoted in the same pass, or it never would be.
func TestScaleUp_PromotesWhenEtcdRefusesTheLearnerThatWouldComeFirst(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a")
	h.etcd.SetMaxLearners(1)
	h.reconcile()
	h.reconcile()
	h.g.Expect(h.members()).To(HaveLen(3))
	h.g.Expect(h.etcd.AddedLearners).To(HaveLen(1))
	first := ""
	for _, m := range h.members() {
		if m.Spec.PeerURL == h.etcd.AddedLearners[0][0] {
			first = m.Name
		}
	}
	learner := h.startLearner(first)
	h.reconcile()
	h.g.Expect(h.etcd.AddedLearners).To(HaveLen(1), "etcd took no second learner")
	h.g.Expect(h.etcd.Promoted).To(Equal([]uint64{learner.ID}), "the started learner is promoted in the same pass")
}

// An add that was to come first and that etcd refuses for the moment (its
// health window, or no answer) does not hold up the promotion either.
func TestScaleUp_PromotesWhenTheAddThatWouldComeFirstIsDeferred(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a")
	h.etcd.SetMaxLearners(2)
	h.reconcile()
	h.reconcile()
	h.g.Expect(h.etcd.AddedLearners).To(HaveLen(1))
	first := ""
	for _, m := range h.members() {
		if m.Spec.PeerURL == h.etcd.AddedLearners[0][0] {
			first = m.Name
		}
	}
	learner := h.startLearner(first)
	h.etcd.FailNext(etcd.OpMemberAddAsLearner, etcdfake.ErrUnreachable)
	h.reconcile()
	h.g.Expect(h.etcd.AddedLearners).To(HaveLen(1), "etcd deferred the second learner")
	h.g.Expect(h.etcd.Promoted).To(Equal([]uint64{learner.ID}), "the started learner is promoted in the same pass")
}

// With one learner slot (etcd 3.5) a started learner is promoted first:
// there is no room for the next add beside it.
func TestScaleUp_PromotesFirstWithOneLearnerSlot(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a")
	h.reconcile()
	h.g.Expect(h.etcd.AddedLearners).To(HaveLen(1))
	first := ""
	for _, m := range h.members() {
		if m.Spec.PeerURL == h.etcd.AddedLearners[0][0] {
			first = m.Name
		}
	}
	h.etcd.SetMaxLearners(1)
	learner := h.startLearner(first)
	a := h.member("demo-a")
	a.Spec.Version = "3.5.35"
	h.g.Expect(h.c.Update(context.Background(), a)).To(Succeed())
	h.reconcile()
	h.g.Expect(h.etcd.Promoted).To(Equal([]uint64{learner.ID}))
	h.g.Expect(h.etcd.AddedLearners).To(HaveLen(1))
}

func TestScaleUp_OneLearnerAtATimeOnEtcd35(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a")
	a := h.member("demo-a")
	a.Spec.Version = "3.5.35"
	h.g.Expect(h.c.Update(context.Background(), a)).To(Succeed())
	cl := h.cluster()
	cl.Spec.Version = "3.5.35"
	cl.Status.Observed.Version = "3.5.35"
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
	h.g.Expect(h.c.Status().Update(context.Background(), cl)).To(Succeed())
	h.reconcile()
	h.reconcile()
	h.g.Expect(h.members()).To(HaveLen(2), "etcd 3.5 takes one learner at a time")
	h.g.Expect(h.etcd.AddedLearners).To(HaveLen(1))
}

// The three crash points of a scale-up: after Create, after AddLearner, and
// after the Patch. Each pass must finish the work without repeating any of it.
func TestCrashRecovery_AfterCreateBeforeAdd(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b")
	h.addMember("demo-c", 0, false, true)
	h.reconcile()
	h.g.Expect(h.etcd.AddedLearners).To(Equal([][]string{{peerURL("demo-c")}}))
	h.g.Expect(h.member("demo-c").Spec.InitialCluster).To(ContainSubstring("demo-c=" + peerURL("demo-c")))
	h.g.Expect(h.members()).To(HaveLen(3), "the half-created member is finished, not replaced")
}

func TestCrashRecovery_AfterAddBeforePatch(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b")
	h.addMember("demo-c", 0, false, true)
	h.etcd.AddLearner(peerURL("demo-c"))
	h.reconcile()
	h.g.Expect(h.etcd.AddedLearners).To(BeEmpty(), "the add is never issued twice")
	h.g.Expect(h.etcd.Promoted).To(BeEmpty(), "the half-added member is finished before any promotion")
	ic := h.member("demo-c").Spec.InitialCluster
	h.g.Expect(strings.Split(ic, ",")).To(ConsistOf(
		"demo-a="+peerURL("demo-a"), "demo-b="+peerURL("demo-b"), "demo-c="+peerURL("demo-c")))
}

func TestCrashRecovery_AfterPatchPromotesOnceReady(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b")
	h.addMember("demo-c", 0, false, false)
	learner := h.etcd.AddLearner(peerURL("demo-c"))
	h.reconcile()
	h.g.Expect(h.etcd.Promoted).To(BeEmpty(), "not before its Pod is ready")

	h.readyPod("demo-c")
	h.etcd.StartMember(learner.ID, "demo-c", clientURL("demo-c"))
	h.reconcile()
	h.g.Expect(h.etcd.Promoted).To(BeEmpty(), "ready, but its first boot is not recorded: its startup config still has the list of its add")
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Message).To(ContainSubstring("first start of learner demo-c to be recorded"))

	h.latchBoot("demo-c")
	h.etcd.SetLearnerReady(learner.ID, false)
	h.reconcile()
	h.g.Expect(h.etcd.Promoted).To(BeEmpty(), "etcd refuses while the learner catches up")
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Reason).To(Equal(v1alpha1.PromotingLearnerReason))

	h.etcd.SetLearnerReady(learner.ID, true)
	h.reconcile()
	h.g.Expect(h.etcd.Promoted).To(Equal([]uint64{learner.ID}))
	h.reconcile()
	h.g.Expect(h.member("demo-c").Status.Role).To(Equal(v1alpha1.MemberRoleVoter))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionFalse),
		"not Ready until the client Service can route to the new voter")
	h.labelVoter("demo-c")
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(h.etcd.AddedLearners).To(BeEmpty())
}

func TestOrphanLearnerIsRemoved(t *testing.T) {
	h := newHarness(t)
	h.formed(1, "demo-a")
	orphan := h.etcd.AddLearner("http://gone.demo.ns.svc.cluster.local:2380")
	h.reconcile()
	h.g.Expect(h.etcd.Removed).To(Equal([]uint64{orphan.ID}))
}

func TestScaleDown_NewestAfterQuorumCheck(t *testing.T) {
	h := newHarness(t)
	h.formed(2, "demo-a", "demo-b", "demo-c")
	h.reconcile()
	var left []string
	for _, m := range h.members() {
		if m.DeletionTimestamp.IsZero() {
			left = append(left, m.Name)
		}
	}
	h.g.Expect(left).To(ConsistOf("demo-a", "demo-b"), "the newest member goes")
}

// The readiness gate: every member but the one to remove must be ready and
// healthy before anything is removed.
func TestScaleDown_WaitsForEveryOtherMemberToBeHealthy(t *testing.T) {
	h := newHarness(t)
	h.formed(2, "demo-a", "demo-b", "demo-c")
	// demo-b is unhealthy, though its Pod still reads ready.
	h.etcd.SetEndpointError(clientURL("demo-b"), etcdfake.ErrUnreachable)
	h.reconcile()
	h.g.Expect(h.members()).To(HaveLen(3))
	progressing := h.condition(v1alpha1.ProgressingCondition)
	h.g.Expect(progressing.Reason).To(Equal(v1alpha1.ScalingDownReason))
	h.g.Expect(progressing.Message).To(Equal("waiting for demo-b before removing demo-c"))
}

// The quorum gate. With every other member ready and healthy, removing one
// member can break quorum only when etcd counts voters no EtcdMember accounts
// for (an EtcdMember whose finalizer was removed by hand, a member added with
// etcdctl): the readiness gate does not see them, the quorum count does.
func TestScaleDown_WaitsWhenQuorumWouldBreak(t *testing.T) {
	h := newHarness(t)
	h.formed(2, "demo-a", "demo-b", "demo-c")
	// Two voters no EtcdMember accounts for, both down: of five voters three
	// are healthy, a quorum; without demo-c two of four would be, which is not.
	for _, ghost := range []string{"ghost-1", "ghost-2"} {
		h.etcd.AddVoter(ghost, "http://"+ghost+":2380", "http://"+ghost+":2379")
		h.etcd.SetEndpointError("http://"+ghost+":2379", etcdfake.ErrUnreachable)
	}
	h.reconcile()
	h.g.Expect(h.members()).To(HaveLen(3), "nothing is removed below quorum")
	for _, m := range h.members() {
		h.g.Expect(m.DeletionTimestamp.IsZero()).To(BeTrue(), "%s must not be deleted", m.Name)
	}
	h.g.Expect(h.etcd.Members()).To(HaveLen(5), "etcd's membership is untouched")
	progressing := h.condition(v1alpha1.ProgressingCondition)
	h.g.Expect(progressing.Reason).To(Equal(v1alpha1.WaitingForQuorumReason))
	h.g.Expect(progressing.Message).To(Equal("removing demo-c would leave 2 healthy of 4 voters, below quorum 3 or a quorum of the target 2"))

	t.Log("once one ghost answers again, removing demo-c keeps a quorum of the four left")
	h.etcd.SetEndpointError("http://ghost-1:2379", nil)
	h.reconcile()
	h.g.Expect(h.exists("demo-c")).To(BeFalse(), "the gate lets the removal through")
}

func TestScaleDown_MovesLeadershipFirst(t *testing.T) {
	h := newHarness(t)
	h.formed(2, "demo-a", "demo-b", "demo-c")
	var leader uint64
	for _, m := range h.etcd.Members() {
		if m.Name == "demo-c" {
			leader = m.ID
		}
	}
	h.etcd.SetLeader(leader)
	h.reconcile()
	h.g.Expect(h.etcd.MovedLeader).To(HaveLen(1))
	h.g.Expect(h.members()).To(HaveLen(3), "the leader is not removed in the same pass")
}

// A transferee that does not vote in its own view yet (a promotion it has
// not applied) is a short wait with its cause named, not a failed pass.
func TestScaleDown_WaitsForTheTransfereeToVote(t *testing.T) {
	h := newHarness(t)
	h.formed(2, "demo-a", "demo-b", "demo-c")
	for _, m := range h.etcd.Members() {
		if m.Name == "demo-c" {
			h.etcd.SetLeader(m.ID)
		}
	}
	h.etcd.FailNext(etcd.OpMoveLeader, &etcd.CallError{Op: etcd.OpMoveLeader, Endpoint: "http://demo-a:2379", Err: etcd.ErrTransfereeNotReady})
	res := h.reconcile()
	h.g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
	h.g.Expect(h.etcd.MovedLeader).To(BeEmpty())
	progressing := h.condition(v1alpha1.ProgressingCondition)
	h.g.Expect(progressing.Message).To(MatchRegexp(`^waiting for demo-[ab] to take leadership from demo-c before removing it: `))
	h.g.Expect(h.members()).To(HaveLen(3))

	h.reconcile()
	h.g.Expect(h.etcd.MovedLeader).To(HaveLen(1), "moved on the next pass")
	h.g.Expect(h.members()).To(HaveLen(3), "the leader is not removed in the same pass")
}

func TestSpecChangeIsAdoptedAtOnce(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a")
	h.etcd.FailNext(etcd.OpMemberAddAsLearner, etcdfake.ErrUnreachable)
	h.reconcile()
	cl := h.cluster()
	cl.Spec.Replicas = ptrInt32(5)
	cl.Generation = 2
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
	h.etcd.FailNext(etcd.OpMemberAddAsLearner, etcdfake.ErrUnreachable)
	h.reconcile()
	cl = h.cluster()
	h.g.Expect(cl.Status.Observed.Replicas).To(Equal(int32(5)), "the edit is the target now, mid-scale")
	h.g.Expect(cl.Status.ObservedGeneration).To(BeEquivalentTo(2), "observedGeneration says the generation was adopted")
	h.g.Expect(h.members()).To(HaveLen(2), "the member being added is finished, not a second one started")
}

func TestBootstrapPastItsDeadlineKeepsGoing(t *testing.T) {
	h := newHarness(t)
	h.createCluster(3)
	h.reconcile()
	seed := h.members()[0]
	h.now = h.now.Add(11 * time.Minute)
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Reason).To(Equal(v1alpha1.DeadlineExceededReason))
	h.g.Expect(h.condition(v1alpha1.AvailableCondition).Reason).To(Equal(v1alpha1.BootstrappingReason))
	// The seed was only slow: it comes up after the deadline, and the
	// cluster forms and grows as if nothing had happened.
	h.readyPod(seed.Name)
	h.etcd.AddVoter(seed.Name, peerURL(seed.Name), clientURL(seed.Name))
	h.reconcile()
	h.g.Expect(h.cluster().Status.ClusterID).NotTo(BeEmpty())
	h.reconcile()
	h.g.Expect(h.etcd.AddedLearners).To(HaveLen(1), "the scale-up goes on past the deadline")
}

func TestEtcdUnreachableChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b")
	h.etcd.FailNext(etcd.OpMemberList, etcdfake.ErrUnreachable)
	h.reconcile()
	h.g.Expect(h.members()).To(HaveLen(2))
	h.g.Expect(h.condition(v1alpha1.AvailableCondition).Reason).To(Equal(v1alpha1.EtcdUnreachableReason))
}

// A reply over the operator's bound is named as such, not as silence: it
// stalls the cluster until a person changes the image, and says so in an
// Event.
func TestReplyTooLargeIsNamedApartFromUnreachable(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b")
	h.etcd.FailNext(etcd.OpMemberList, &etcd.ReplyTooLargeError{What: etcd.OpMemberList, Limit: etcd.MaxReplyBytes})
	h.reconcile()
	h.g.Expect(h.members()).To(HaveLen(2), "nothing changes without a usable answer")
	h.g.Expect(h.condition(v1alpha1.AvailableCondition).Reason).To(Equal(v1alpha1.EtcdReplyTooLargeReason))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.EtcdReplyTooLargeReason))
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(h.eventsWith(v1alpha1.EtcdReplyTooLargeReason)).NotTo(BeEmpty())
}

func TestInitialClusterFrom(t *testing.T) {
	g := NewWithT(t)
	list := etcd.MemberList{Members: []etcd.Member{
		{Name: "b", PeerURLs: []string{"http://b.x:2380"}},
		{PeerURLs: []string{"http://c.x.ns.svc:2380"}},
		{Name: "a", PeerURLs: []string{"http://a.x:2380"}},
	}}
	g.Expect(initialClusterFrom(list)).To(Equal("a=http://a.x:2380,b=http://b.x:2380,c=http://c.x.ns.svc:2380"))
}

func sortedPair(a, b string) []string {
	if a < b {
		return []string{a, b}
	}
	return []string{b, a}
}

func ptrInt32(v int32) *int32 { return &v }
