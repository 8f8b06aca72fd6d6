package recovery

import (
	"fmt"
	"sort"
	"strings"

	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/quorum"
	"github.com/quorumctl/etcd-operator/internal/remediation"
)

// Member is what one look saw of one member of the cluster.
type Member struct {
	// Name of the EtcdMember; empty for a voter etcd lists that no
	// EtcdMember accounts for.
	Name string
	// ID is etcd's member ID, 0 while unknown.
	ID uint64
	// Voter: etcd's membership lists the member as a voter.
	Voter bool
	// Answered: the member's own endpoint answered Status; Status is then
	// what it said about itself.
	Answered bool
	Status   etcd.EndpointStatus
	// Reported: Status did not answer, but the member's metrics endpoint
	// did (see etcd.SelfReport), and Status holds what it said: etcd runs
	// on its data but does not serve clients, which it does only once a
	// quorum has committed its start. Such a member is a survivor all the
	// same, and is compared by the same indexes.
	Reported bool
	// SeesLeader: a reported member follows a leader.
	SeesLeader bool
	// Verdict is self-heal's judgement of the member, "" when it has none,
	// and Detail what it saw.
	Verdict remediation.Reason
	Detail  string
}

// label names a member in messages: its EtcdMember, or its etcd ID.
func (m Member) label() string {
	if m.Name != "" {
		return m.Name
	}
	return etcd.FormatMemberID(m.ID)
}

// Report records what a member's metrics endpoint said, for a member whose
// client endpoint did not answer.
func (m *Member) Report(r etcd.SelfReport, endpoint string) {
	m.Answered = false
	m.Reported, m.SeesLeader, m.Status = true, r.HasLeader, r.Status(endpoint)
}

// healthy: answering and following a leader, so counting towards a quorum.
// A reported member that follows a leader counts too: a leader means a
// quorum somewhere, and counting it errs towards refusing a recovery.
func (m Member) healthy() bool {
	return (m.Answered && m.Status.Healthy()) || (m.Reported && m.SeesLeader)
}

// known: the member said where it stands, on one endpoint or the other.
func (m Member) known() bool { return m.Answered || m.Reported }

// Gone reports the self-heal verdicts that mean a member's data or the
// place it ran is gone, so it will not come back by itself: lost or
// corrupt data, a lost node or Memory Pod, a member etcd removed. A crash
// loop of unknown cause, a member that only does not answer, and a
// diverged member (which answers) are not: they may yet come back as they
// were.
func Gone(r remediation.Reason) bool {
	switch r {
	case remediation.DataDirLost, remediation.DataCorrupt, remediation.NodeLost,
		remediation.PodLost, remediation.RemovedFromCluster:
		return true
	}
	return false
}

// Loss is how a cluster's voters stand.
type Loss struct {
	// Voters is the size of the voting membership.
	Voters int
	// Healthy counts the voters that answer and follow a leader.
	Healthy int
	// Survivors are the voters that answer on their own endpoint, client
	// or metrics, most advanced first (see Ahead).
	Survivors []Member
	// Missing are the voters that do not answer, by name; JudgedGone
	// counts those with a Gone verdict.
	Missing    []Member
	JudgedGone int
}

// Assess sorts the members into survivors and missing voters. Learners
// count for neither: they do not vote, and a learner's data is a copy
// that was still catching up.
func Assess(members []Member) Loss {
	var l Loss
	for _, m := range members {
		if !m.Voter {
			continue
		}
		l.Voters++
		switch {
		case m.healthy():
			l.Healthy++
			l.Survivors = append(l.Survivors, m)
		case m.known():
			l.Survivors = append(l.Survivors, m)
		default:
			l.Missing = append(l.Missing, m)
			if Gone(m.Verdict) {
				l.JudgedGone++
			}
		}
	}
	sort.SliceStable(l.Survivors, func(i, j int) bool { return Ahead(l.Survivors[i], l.Survivors[j]) })
	sort.SliceStable(l.Missing, func(i, j int) bool { return l.Missing[i].label() < l.Missing[j].label() })
	return l
}

// QuorumHeld: a quorum of voters answers with a leader; nothing is lost.
func (l Loss) QuorumHeld() bool { return quorum.HasQuorum(l.Voters, l.Healthy) }

// ForGood: no quorum answers, and even if every missing voter without a
// Gone verdict came back, the voters would still be short of a quorum.
// Only then is a recovery the way out rather than patience.
func (l Loss) ForGood() bool {
	return l.Voters > 0 && !l.QuorumHeld() && l.Voters-l.JudgedGone < quorum.Size(l.Voters)
}

// Unjudged names the missing voters without a Gone verdict.
func (l Loss) Unjudged() []string {
	var out []string
	for _, m := range l.Missing {
		if !Gone(m.Verdict) {
			out = append(out, m.label())
		}
	}
	return out
}

// Ahead orders survivors by how much of the cluster's history each holds:
// the higher applied index first, then the higher revision, then the
// higher committed index, and the name as a deterministic tie-break.
func Ahead(a, b Member) bool {
	switch {
	case a.Status.RaftAppliedIndex != b.Status.RaftAppliedIndex:
		return a.Status.RaftAppliedIndex > b.Status.RaftAppliedIndex
	case a.Status.Revision != b.Status.Revision:
		return a.Status.Revision > b.Status.Revision
	case a.Status.RaftIndex != b.Status.RaftIndex:
		return a.Status.RaftIndex > b.Status.RaftIndex
	}
	return a.label() < b.label()
}

// behind: a has applied less than b, by applied index or by revision.
func behind(a, b Member) bool {
	return a.Status.RaftAppliedIndex < b.Status.RaftAppliedIndex || a.Status.Revision < b.Status.Revision
}

// Describe says in words how the voters stand, for a condition message.
func (l Loss) Describe() string {
	var parts []string
	parts = append(parts, fmt.Sprintf("%d of %d voters answer with a leader; a quorum needs %d", l.Healthy, l.Voters, quorum.Size(l.Voters)))
	if len(l.Missing) > 0 {
		var gone []string
		for _, m := range l.Missing {
			why := "does not answer"
			if m.Verdict != "" {
				why = string(m.Verdict)
				if m.Detail != "" {
					why += ": " + m.Detail
				}
			}
			gone = append(gone, fmt.Sprintf("%s (%s)", m.label(), why))
		}
		parts = append(parts, "gone: "+strings.Join(gone, ", "))
	}
	if len(l.Survivors) > 0 {
		var left []string
		for _, m := range l.Survivors {
			note := ""
			if m.Reported {
				note = "; read from its metrics, as it serves no clients without a quorum"
			}
			left = append(left, fmt.Sprintf("%s (raft index %d, applied %d, revision %d%s)",
				m.label(), m.Status.RaftIndex, m.Status.RaftAppliedIndex, m.Status.Revision, note))
		}
		parts = append(parts, "left: "+strings.Join(left, ", "))
	} else {
		parts = append(parts, "no member is left")
	}
	return strings.Join(parts, "; ")
}
