package remediation

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// unschedulablePod is a Pod the scheduler has found no place for since the
// given time.
func unschedulablePod(since time.Time) *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message:            "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
		LastTransitionTime: metav1.NewTime(since),
	}}}}
}

// A member whose Pod cannot be scheduled, past a bound, is reported and held:
// no container status ever comes, and a replacement would be refused alike.
func TestAssessReportsAMemberThatCannotBeScheduled(t *testing.T) {
	g := NewWithT(t)
	_, act := Assess(Facts{Pod: unschedulablePod(now.Add(-UnschedulableAfter / 2)), Container: "etcd"}, now)
	g.Expect(act).To(BeFalse(), "a while unschedulable is routine (a volume being made)")

	v, act := Assess(Facts{Pod: unschedulablePod(now.Add(-UnschedulableAfter)), Container: "etcd"}, now)
	g.Expect(act).To(BeTrue())
	g.Expect(v.Reason).To(Equal(Unschedulable))
	g.Expect(v.Hold).To(BeTrue(), "reported, never replaced")
	g.Expect(v.Detail).To(ContainSubstring("didn't match Pod's node affinity/selector"))

	scheduled := unschedulablePod(now.Add(-time.Hour))
	scheduled.Spec.NodeName = "n1"
	_, act = Assess(Facts{Pod: scheduled, Container: "etcd"}, now)
	g.Expect(act).To(BeFalse(), "scheduled since")
}

// A joiner that never started whose first start etcd refused (a member list
// gone stale while it waited) holds no data: it is held, not replaced. The
// same words from a member that has started still mean lost data.
func TestAssessHoldsAJoinerThatNeverStarted(t *testing.T) {
	g := NewWithT(t)
	failed := pod(corev1.ContainerStatus{RestartCount: 1, State: crashLoopBackOff,
		LastTerminationState: corev1.ContainerState{Terminated: terminated(staleJoiner, "Error")}})
	v, act := Assess(Facts{Pod: failed, Container: "etcd", NeverStarted: true}, now)
	g.Expect(act).To(BeTrue())
	g.Expect(v.Reason).To(Equal(CannotJoin))
	g.Expect(v.Hold).To(BeTrue())

	v, act = Assess(Facts{Pod: failed, Container: "etcd"}, now)
	g.Expect(act).To(BeTrue())
	g.Expect(v.Reason).To(Equal(DataDirLost))
	g.Expect(v.Hold).To(BeFalse())

	corrupt := pod(corev1.ContainerStatus{RestartCount: 1, State: crashLoopBackOff,
		LastTerminationState: corev1.ContainerState{Terminated: terminated(garbledDB, "Error")}})
	v, act = Assess(Facts{Pod: corrupt, Container: "etcd", NeverStarted: true}, now)
	g.Expect(act).To(BeTrue())
	g.Expect(v.Reason).To(Equal(DataCorrupt), "only a refused first start is held")
	g.Expect(v.Hold).To(BeFalse())
}

// During membership changes one after another, a member that applies each a
// little late shows a different difference at every look. No such member is
// confirmed diverged; the same difference lasting is.
func TestConfirmNeedsTheSameDifferenceToLast(t *testing.T) {
	g := NewWithT(t)
	q := func(ids ...uint64) QuorumView {
		return QuorumView{ClusterID: 9, Members: ids, LeaderID: 1, LeaderTerm: 4}
	}
	own := func(ids ...uint64) *etcd.MemberList {
		l := &etcd.MemberList{ClusterID: 9}
		for _, id := range ids {
			l.Members = append(l.Members, etcd.Member{ID: id})
		}
		return l
	}
	status := &etcd.EndpointStatus{MemberID: 2, LeaderID: 1, RaftTerm: 4, ClusterID: 9}
	lists := Observed{Status: true, Members: true}
	// The quorum grows by one member at each look; member 2 is always one
	// change behind.
	var s *Sighting
	var confirmed bool
	for i := 0; i < 10; i++ {
		ids := []uint64{1, 2, 3}
		for j := 0; j < i; j++ {
			ids = append(ids, uint64(10+j))
		}
		d := Divergence(q(append(ids, uint64(10+i))...), status, own(ids...))
		g.Expect(d.Diverged()).To(BeTrue())
		s, confirmed = Confirm(s, d, lists, now.Add(time.Duration(i)*DivergenceConfirmAfter/2))
		g.Expect(confirmed).To(BeFalse(), fmt.Sprintf("look %d: a member one change behind is not diverged", i))
	}
	// A difference that stays put is confirmed.
	d := Divergence(q(1, 2, 3), status, own(2))
	s, _ = Confirm(nil, d, lists, now)
	_, confirmed = Confirm(s, d, lists, now.Add(DivergenceConfirmAfter))
	g.Expect(confirmed).To(BeTrue())
}
