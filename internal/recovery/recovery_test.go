package recovery

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/remediation"
)

// survivor answers without a leader, as every member does once the quorum
// is gone, with the indexes and revision given.
func survivor(name string, id uint64, applied uint64, rev int64) Member {
	return Member{Name: name, ID: id, Voter: true, Answered: true,
		Status: etcd.EndpointStatus{MemberID: id, RaftIndex: applied + 2, RaftAppliedIndex: applied, Revision: rev}}
}

func healthy(name string, id uint64) Member {
	m := survivor(name, id, 100, 50)
	m.Status.LeaderID = 1
	return m
}

func gone(name string, id uint64, verdict remediation.Reason) Member {
	return Member{Name: name, ID: id, Voter: true, Verdict: verdict, Detail: "seen"}
}

func TestGone_OnlyVerdictsThatCannotComeBack(t *testing.T) {
	g := NewWithT(t)
	for _, r := range []remediation.Reason{remediation.DataDirLost, remediation.DataCorrupt, remediation.NodeLost, remediation.PodLost, remediation.RemovedFromCluster} {
		g.Expect(Gone(r)).To(BeTrue(), string(r))
	}
	for _, r := range []remediation.Reason{"", remediation.CrashLoop, remediation.Unresponsive, remediation.Diverged} {
		g.Expect(Gone(r)).To(BeFalse(), string(r))
	}
}

func TestAssess_ForGoodOnlyWhenTheUnjudgedCannotMakeAQuorum(t *testing.T) {
	cases := []struct {
		name             string
		members          []Member
		held, forGood    bool
		survivors, voter int
	}{
		{"3: two healthy", []Member{healthy("a", 1), healthy("b", 2), gone("c", 3, remediation.DataDirLost)}, true, false, 2, 3},
		{"3: one left, two data dirs lost", []Member{survivor("a", 1, 10, 5), gone("b", 2, remediation.DataDirLost), gone("c", 3, remediation.DataCorrupt)}, false, true, 1, 3},
		{"3: one left, one lost, one only unreachable", []Member{survivor("a", 1, 10, 5), gone("b", 2, remediation.DataDirLost), gone("c", 3, "")}, false, false, 1, 3},
		{"3: one left, one lost, one crash-looping", []Member{survivor("a", 1, 10, 5), gone("b", 2, remediation.NodeLost), gone("c", 3, remediation.CrashLoop)}, false, false, 1, 3},
		{"5: two left, three lost", []Member{survivor("a", 1, 10, 5), survivor("b", 2, 9, 5), gone("c", 3, remediation.DataDirLost), gone("d", 4, remediation.DataDirLost), gone("e", 5, remediation.NodeLost)}, false, true, 2, 5},
		{"5: two left, two lost, one unreachable", []Member{survivor("a", 1, 10, 5), survivor("b", 2, 9, 5), gone("c", 3, remediation.DataDirLost), gone("d", 4, remediation.DataDirLost), gone("e", 5, "")}, false, false, 2, 5},
		{"3: nobody left, all lost", []Member{gone("a", 1, remediation.DataDirLost), gone("b", 2, remediation.DataDirLost), gone("c", 3, remediation.DataDirLost)}, false, true, 0, 3},
		{"learners count for nothing", []Member{survivor("a", 1, 10, 5), gone("b", 2, remediation.DataDirLost), gone("c", 3, remediation.DataDirLost), {Name: "l", ID: 4, Answered: true, Status: etcd.EndpointStatus{LeaderID: 1}}}, false, true, 1, 3},
		{"no voters known", nil, false, false, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			l := Assess(tc.members)
			g.Expect(l.QuorumHeld()).To(Equal(tc.held))
			g.Expect(l.ForGood()).To(Equal(tc.forGood))
			g.Expect(l.Survivors).To(HaveLen(tc.survivors))
			g.Expect(l.Voters).To(Equal(tc.voter))
		})
	}
}

func TestAssess_SurvivorsMostAdvancedFirst(t *testing.T) {
	g := NewWithT(t)
	l := Assess([]Member{
		survivor("a", 1, 10, 7),
		survivor("b", 2, 12, 5), // highest applied index wins
		survivor("c", 3, 10, 8), // then the revision
		survivor("d", 4, 10, 7), // then the committed index (equal here), then the name
		gone("e", 5, remediation.DataDirLost),
	})
	var order []string
	for _, s := range l.Survivors {
		order = append(order, s.Name)
	}
	g.Expect(order).To(Equal([]string{"b", "c", "a", "d"}))
	g.Expect(l.Describe()).To(And(
		ContainSubstring("0 of 5 voters answer with a leader; a quorum needs 3"),
		ContainSubstring("gone: e (DataDirLost: seen)"),
		ContainSubstring("left: b (raft index 14, applied 12, revision 5)"),
	))
}

func formed(members ...Member) Cluster {
	return Cluster{Name: "demo", ClusterID: "00000000000000aa", Members: members}
}

func fromSurvivor(member string, force bool) Request {
	return Request{Source: v1alpha1.RecoverySource{Survivor: &v1alpha1.SurvivorSource{Member: member}}, Force: force}
}

func fromSnapshot(name string, maxAge time.Duration, force bool) Request {
	src := &v1alpha1.SnapshotSource{SnapshotName: name}
	if maxAge > 0 {
		src.MaxAge = &metav1.Duration{Duration: maxAge}
	}
	return Request{Source: v1alpha1.RecoverySource{Snapshot: src}, Force: force}
}

// lostTwo is a 3-member cluster with one survivor left.
func lostTwo() Cluster {
	return formed(survivor("a", 1, 40, 30), gone("b", 2, remediation.DataDirLost), gone("c", 3, remediation.DataDirLost))
}

// lostThreeOfFive leaves two survivors, b ahead of a.
func lostThreeOfFive() Cluster {
	return formed(survivor("a", 1, 40, 30), survivor("b", 2, 55, 42),
		gone("c", 3, remediation.DataDirLost), gone("d", 4, remediation.DataDirLost), gone("e", 5, remediation.NodeLost))
}

func TestDecide_Refusals(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	snaps := []Snapshot{
		{Name: "old", ClusterName: "demo", Succeeded: true, CompletedAt: now.Add(-3 * time.Hour), Revision: 20},
		{Name: "failed", ClusterName: "demo", CompletedAt: now.Add(-time.Minute)},
		{Name: "theirs", ClusterName: "other", Succeeded: true, CompletedAt: now.Add(-time.Minute)},
		{Name: "unreadable", ClusterName: "demo", Succeeded: true, CompletedAt: now.Add(-time.Minute), Revision: 30, StorageRefused: "no Secret, no ambient"},
		{Name: "sealed", ClusterName: "demo", Succeeded: true, CompletedAt: now.Add(-2 * time.Hour), Revision: 25, Encrypted: true},
	}
	memory := lostTwo()
	memory.Memory = true
	notFormed := lostTwo()
	notFormed.ClusterID = ""
	paused := lostTwo()
	paused.Paused = true
	cases := []struct {
		name    string
		cluster Cluster
		req     Request
		reason  string
		message string
	}{
		{"not formed", notFormed, fromSurvivor("", false), v1alpha1.ClusterNotFormedReason, "has not formed yet"},
		{"paused", paused, fromSurvivor("", false), v1alpha1.ClusterPausedReason, "is paused"},
		{"quorum up", formed(healthy("a", 1), healthy("b", 2), gone("c", 3, remediation.DataDirLost)), fromSurvivor("", false),
			v1alpha1.QuorumReachableReason, "2 of 3 voters answer with a leader, a quorum: EtcdCluster demo needs no recovery"},
		{"quorum up, even forced", formed(healthy("a", 1), healthy("b", 2), healthy("c", 3)), fromSurvivor("a", true),
			v1alpha1.QuorumReachableReason, "needs no recovery"},
		{"quorum up, from a snapshot", formed(healthy("a", 1), healthy("b", 2), healthy("c", 3)), fromSnapshot("", 0, true),
			v1alpha1.QuorumReachableReason, "needs no recovery"},
		{"memory", memory, fromSurvivor("", false), v1alpha1.MemoryStorageReason, "recover from a snapshot (source.snapshot) instead"},
		{"nobody answers", formed(gone("a", 1, remediation.DataDirLost), gone("b", 2, remediation.DataDirLost), gone("c", 3, remediation.DataDirLost)),
			fromSurvivor("", false), v1alpha1.NoSurvivorReason, "no member of EtcdCluster demo answers on its own endpoint"},
		{"missing members only unreachable", formed(survivor("a", 1, 40, 30), gone("b", 2, remediation.DataDirLost), gone("c", 3, "")),
			fromSurvivor("", false), v1alpha1.MembersNotJudgedGoneReason, "c do not answer, but self-heal has not judged them gone"},
		{"a named member that does not exist", lostTwo(), fromSurvivor("zz", false), v1alpha1.SurvivorNotFoundReason,
			"EtcdCluster demo has no member zz; the members that answer are a"},
		{"a named member that is gone", lostTwo(), fromSurvivor("b", false), v1alpha1.SurvivorNotFoundReason,
			"member b does not answer on its own endpoint (DataDirLost: seen); the members that do are a"},
		{"a named member that is behind", lostThreeOfFive(), fromSurvivor("a", false), v1alpha1.SurvivorBehindReason,
			"member a is behind member b (applied index 40 and revision 30 against 55 and 42): recovering from a would lose 12 revisions that b has"},
		{"a named snapshot that does not exist", lostTwo(), fromSnapshot("nope", 0, false), v1alpha1.SnapshotNotFoundReason, "EtcdSnapshot nope does not exist"},
		{"another cluster's snapshot", lostTwo(), fromSnapshot("theirs", 0, false), v1alpha1.SnapshotNotFoundReason, "is a snapshot of EtcdCluster other, not of demo"},
		{"a failed snapshot", lostTwo(), fromSnapshot("failed", 0, false), v1alpha1.SnapshotNotFoundReason, "has not succeeded"},
		{"no successful snapshot", lostTwo(), fromSnapshot("", 0, false), v1alpha1.SnapshotNotFoundReason, ""},
		{"a snapshot too old", lostTwo(), fromSnapshot("old", time.Hour, false), v1alpha1.SnapshotTooOldReason,
			"EtcdSnapshot old completed 3h0m0s ago, longer than maxAge 1h0m0s"},
		{"a snapshot the operator may not read, even forced", lostTwo(), fromSnapshot("unreadable", 0, true), v1alpha1.AmbientCredentialsRefusedReason,
			"EtcdSnapshot unreadable cannot be restored: no Secret, no ambient"},
		{"an encrypted snapshot without a key named, even forced", lostTwo(), fromSnapshot("sealed", 0, true), v1alpha1.SnapshotEncryptedReason,
			"EtcdSnapshot sealed is encrypted and source.snapshot.encryption names no key"},
		{"the latest snapshot, which the operator may not read", lostTwo(), fromSnapshot("", 0, false), v1alpha1.AmbientCredentialsRefusedReason,
			"EtcdSnapshot unreadable cannot be restored"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			in := snaps
			if tc.name == "no successful snapshot" {
				in = snaps[1:3]
			}
			plan, refused := Decide(tc.cluster, tc.req, in, now)
			g.Expect(plan).To(BeNil())
			g.Expect(refused).NotTo(BeNil())
			g.Expect(refused.Reason).To(Equal(tc.reason))
			g.Expect(refused.Message).To(ContainSubstring(tc.message))
		})
	}
}

func TestDecide_ChoosesTheSurvivorFurthestAhead(t *testing.T) {
	g := NewWithT(t)
	plan, refused := Decide(lostThreeOfFive(), fromSurvivor("", false), nil, time.Now())
	g.Expect(refused).To(BeNil())
	g.Expect(plan.Source).To(Equal(v1alpha1.RecoveryFromSurvivor))
	g.Expect(plan.Survivor).To(Equal("b"))
	g.Expect(plan.SurvivorID).To(Equal(etcd.FormatMemberID(2)))
	g.Expect(plan.Revision).To(Equal(int64(42)))
	g.Expect(plan.BestKnownRevision).To(Equal(int64(42)))
	g.Expect(plan.RevisionGap).To(BeZero())
	g.Expect(plan.Removed).To(Equal([]string{"a", "c", "d", "e"}))
	g.Expect(plan.Survivors).To(HaveLen(2))
	g.Expect(plan.Survivors[0].Name).To(Equal("b"))
	g.Expect(plan.Keeps).To(ContainSubstring("the data of member b as of revision 42"))
	g.Expect(plan.Keeps).To(ContainSubstring("the cluster ID 00000000000000aa"))
	g.Expect(plan.Loses).To(ContainSubstring("any write after revision 42 that only c, d, e had"))
	g.Expect(plan.Loses).NotTo(ContainSubstring("revisions after"), "no answering member is ahead of b")
	g.Expect(plan.Forced).To(BeEmpty())
}

func TestDecide_ANamedSurvivorThatIsAheadOrForced(t *testing.T) {
	g := NewWithT(t)
	plan, refused := Decide(lostThreeOfFive(), fromSurvivor("b", false), nil, time.Now())
	g.Expect(refused).To(BeNil())
	g.Expect(plan.Survivor).To(Equal("b"))

	plan, refused = Decide(lostThreeOfFive(), fromSurvivor("a", true), nil, time.Now())
	g.Expect(refused).To(BeNil())
	g.Expect(plan.Survivor).To(Equal("a"))
	g.Expect(plan.RevisionGap).To(Equal(int64(12)))
	g.Expect(plan.BestKnownMember).To(Equal("b"))
	g.Expect(plan.Forced).To(Equal([]string{v1alpha1.SurvivorBehindReason}))
	g.Expect(plan.Loses).To(ContainSubstring("the 12 revisions after 30 that member b still has"))

	// A revision ahead with the same applied index is still ahead.
	c := formed(survivor("a", 1, 40, 30), survivor("b", 2, 40, 31), gone("c", 3, remediation.DataDirLost),
		gone("d", 4, remediation.DataDirLost), gone("e", 5, remediation.DataDirLost))
	_, refused = Decide(c, fromSurvivor("a", false), nil, time.Now())
	g.Expect(refused).NotTo(BeNil())
	g.Expect(refused.Reason).To(Equal(v1alpha1.SurvivorBehindReason))
}

func TestDecide_ForceLetsUnjudgedMembersGo(t *testing.T) {
	g := NewWithT(t)
	c := formed(survivor("a", 1, 40, 30), gone("b", 2, remediation.DataDirLost), gone("c", 3, ""))
	plan, refused := Decide(c, fromSurvivor("", true), nil, time.Now())
	g.Expect(refused).To(BeNil())
	g.Expect(plan.Survivor).To(Equal("a"))
	g.Expect(plan.Forced).To(Equal([]string{v1alpha1.MembersNotJudgedGoneReason}))
}

func TestDecide_Snapshot(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1_700_000_000, 0)
	snaps := []Snapshot{
		{Name: "s1", ClusterName: "demo", Succeeded: true, CompletedAt: now.Add(-2 * time.Hour), Revision: 10},
		{Name: "s2", ClusterName: "demo", Succeeded: true, CompletedAt: now.Add(-30 * time.Minute), Revision: 25},
		{Name: "s3", ClusterName: "demo", CompletedAt: now.Add(-time.Minute), Revision: 29},
	}
	plan, refused := Decide(lostTwo(), fromSnapshot("", time.Hour, false), snaps, now)
	g.Expect(refused).To(BeNil())
	g.Expect(plan.Source).To(Equal(v1alpha1.RecoveryFromSnapshot))
	g.Expect(plan.Snapshot).To(Equal("s2"), "the latest successful one")
	g.Expect(plan.Revision).To(Equal(int64(25)))
	g.Expect(plan.BestKnownRevision).To(Equal(int64(30)))
	g.Expect(plan.RevisionGap).To(Equal(int64(5)))
	g.Expect(plan.Removed).To(Equal([]string{"a", "b", "c"}))
	g.Expect(plan.Loses).To(ContainSubstring("every write after revision 25"))
	g.Expect(plan.Loses).To(ContainSubstring("new cluster ID in place of 00000000000000aa"))

	plan, refused = Decide(lostTwo(), fromSnapshot("s1", time.Hour, true), snaps, now)
	g.Expect(refused).To(BeNil())
	g.Expect(plan.Snapshot).To(Equal("s1"))
	g.Expect(plan.Forced).To(Equal([]string{v1alpha1.SnapshotTooOldReason}))

	// With nothing left that answers, a snapshot is all there is.
	all := formed(gone("a", 1, remediation.DataDirLost), gone("b", 2, remediation.DataDirLost), gone("c", 3, remediation.DataDirLost))
	plan, refused = Decide(all, fromSnapshot("s2", 0, false), snaps, now)
	g.Expect(refused).To(BeNil())
	g.Expect(plan.RevisionGap).To(BeZero())
	g.Expect(plan.BestKnownMember).To(BeEmpty())
}
