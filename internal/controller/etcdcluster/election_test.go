package etcdcluster

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// electionAt is a cluster of three in which demo-c does not answer (its
// Pod drained) and demo-b answers its first Status without a leader, as a
// follower does while the leader hands over; it answers the next ones as
// asked. It returns how many times demo-b was asked.
func electionAt(h *harness, leaderAfterFirst bool) func() int {
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.etcd.SetEndpointError(clientURL("demo-c"), etcdfake.ErrUnreachable)
	b := h.etcd.Members()[1]
	url := clientURL("demo-b")
	h.etcd.SetStatus(url, etcdStatus{MemberID: b.ID, ClusterID: etcdfake.DefaultClusterID})
	asked := 0
	h.etcd.SetHook(etcd.OpStatus, func(c etcdfake.Call) error {
		if c.Endpoint != url {
			return nil
		}
		asked++
		if asked == 2 && leaderAfterFirst {
			h.etcd.ResetStatus(url)
		}
		return nil
	})
	return func() int { return asked }
}

func TestElection_AVoterBetweenLeadersIsAskedAgain(t *testing.T) {
	h := newHarness(t)
	h.r.ElectionGrace = 250 * time.Millisecond
	asked := electionAt(h, true)
	h.reconcile()
	c := h.condition(v1alpha1.AvailableCondition)
	h.g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s", c.Reason, c.Message)
	h.g.Expect(c.Message).To(Equal("2 of 3 voters healthy"))
	h.g.Expect(asked()).To(BeNumerically(">=", 2))
}

func TestElection_AVoterStillWithoutALeaderIsJudgedOnItsLastAnswer(t *testing.T) {
	h := newHarness(t)
	h.r.ElectionGrace = 250 * time.Millisecond
	asked := electionAt(h, false)
	h.reconcile()
	c := h.condition(v1alpha1.AvailableCondition)
	h.g.Expect(c.Reason).To(Equal(v1alpha1.QuorumLostReason))
	h.g.Expect(c.Message).To(Equal("1 of 3 voters healthy; quorum needs 2"))
	h.g.Expect(asked()).To(BeNumerically(">=", 2), "it was asked again before being judged")
}

func TestElection_WithoutGraceTheFirstAnswerCounts(t *testing.T) {
	h := newHarness(t)
	asked := electionAt(h, true)
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.AvailableCondition).Reason).To(Equal(v1alpha1.QuorumLostReason))
	h.g.Expect(asked()).To(Equal(1))
}
