package recovery

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/remediation"
)

// reported is a voter whose client endpoint did not answer but whose
// metrics endpoint did, as a member restarted without a quorum does.
func reported(name string, id uint64, applied uint64, rev int64, leader bool) Member {
	m := Member{Name: name, ID: id, Voter: true}
	m.Report(etcd.SelfReport{MemberID: id, HasLeader: leader, AppliedIndex: applied, CommittedIndex: applied, Revision: rev}, "http://x:2381")
	return m
}

func TestAssess_AReportedMemberIsASurvivor(t *testing.T) {
	g := NewWithT(t)
	l := Assess([]Member{reported("a", 1, 40, 30, false), survivor("b", 2, 55, 42),
		gone("c", 3, remediation.DataDirLost), gone("d", 4, remediation.DataDirLost), gone("e", 5, remediation.DataDirLost)})
	g.Expect(l.Survivors).To(HaveLen(2))
	g.Expect(l.Survivors[0].Name).To(Equal("b"), "compared by the same indexes")
	g.Expect(l.Survivors[1].Name).To(Equal("a"))
	g.Expect(l.Missing).To(HaveLen(3))
	g.Expect(l.ForGood()).To(BeTrue())
	g.Expect(l.Describe()).To(ContainSubstring("a (raft index 40, applied 40, revision 30; read from its metrics, as it serves no clients without a quorum)"))
}

func TestAssess_AReportedMemberThatSeesALeaderCountsTowardsAQuorum(t *testing.T) {
	g := NewWithT(t)
	members := []Member{healthy("a", 1), reported("b", 2, 100, 50, true), gone("c", 3, remediation.DataDirLost)}
	l := Assess(members)
	g.Expect(l.Healthy).To(Equal(2))
	g.Expect(l.QuorumHeld()).To(BeTrue())
	_, refused := Decide(formed(members...), fromSurvivor("", true), nil, time.Now())
	g.Expect(refused).NotTo(BeNil())
	g.Expect(refused.Reason).To(Equal(v1alpha1.QuorumReachableReason))
}

// The e2e case: the survivor named was restarted without a quorum, so only
// its metrics answer, and it is behind a survivor that answers Status.
func TestDecide_AReportedSurvivorBehindAnother(t *testing.T) {
	g := NewWithT(t)
	c := formed(reported("a", 1, 40, 30, false), survivor("b", 2, 55, 42),
		gone("c", 3, remediation.DataDirLost), gone("d", 4, remediation.DataDirLost), gone("e", 5, remediation.DataDirLost))
	plan, refused := Decide(c, fromSurvivor("a", false), nil, time.Now())
	g.Expect(plan).To(BeNil())
	g.Expect(refused).NotTo(BeNil())
	g.Expect(refused.Waiting).To(BeFalse())
	g.Expect(refused.Reason).To(Equal(v1alpha1.SurvivorBehindReason))
	g.Expect(refused.Message).To(ContainSubstring("member a is behind member b (applied index 40 and revision 30 against 55 and 42)"))

	plan, refused = Decide(c, fromSurvivor("", false), nil, time.Now())
	g.Expect(refused).To(BeNil())
	g.Expect(plan.Survivor).To(Equal("b"))
	g.Expect(plan.Removed).To(ContainElement("a"))

	// Reversed: the reported one is ahead and is taken.
	c = formed(reported("a", 1, 60, 45, false), survivor("b", 2, 55, 42),
		gone("c", 3, remediation.DataDirLost), gone("d", 4, remediation.DataDirLost), gone("e", 5, remediation.DataDirLost))
	plan, refused = Decide(c, fromSurvivor("", false), nil, time.Now())
	g.Expect(refused).To(BeNil())
	g.Expect(plan.Survivor).To(Equal("a"))
	g.Expect(plan.RevisionGap).To(BeZero())
}

func TestDecide_ANamedSurvivorThatDoesNotAnswerYetIsWaitedFor(t *testing.T) {
	cases := []struct {
		name    string
		verdict remediation.Reason
		waiting bool
		reason  string
		message string
	}{
		{"no verdict", "", true, v1alpha1.SurvivorNotAnsweringReason,
			"member a of EtcdCluster demo answers neither on its client nor on its metrics endpoint, and self-heal has not judged it gone: it may still be starting. The recovery is planned once it answers; the members that answer are b"},
		{"crash-looping", remediation.CrashLoop, true, v1alpha1.SurvivorNotAnsweringReason, "(CrashLoop: seen)"},
		{"judged gone", remediation.DataDirLost, false, v1alpha1.SurvivorNotFoundReason, "member a does not answer on its own endpoint (DataDirLost: seen)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := formed(gone("a", 1, tc.verdict), survivor("b", 2, 55, 42),
				gone("c", 3, remediation.DataDirLost), gone("d", 4, remediation.DataDirLost), gone("e", 5, remediation.DataDirLost))
			plan, refused := Decide(c, fromSurvivor("a", false), nil, time.Now())
			g.Expect(plan).To(BeNil())
			g.Expect(refused).NotTo(BeNil())
			g.Expect(refused.Waiting).To(Equal(tc.waiting))
			g.Expect(refused.Reason).To(Equal(tc.reason))
			g.Expect(refused.Message).To(ContainSubstring(tc.message))
		})
	}
}
