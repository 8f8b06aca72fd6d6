package remediation

import (
	"fmt"
	"slices"
	"time"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// QuorumView is what the majority of the cluster agrees on.
type QuorumView struct {
	ClusterID uint64
	// Members are the member IDs of the linearizable member list.
	Members []uint64
	// LeaderID is the leader a majority of voters follow; 0 if none does.
	LeaderID uint64
	// LeaderTerm is the raft term the leader reports.
	LeaderTerm uint64
}

// QuorumLeader returns the leader a strict majority of the voters' own
// statuses name, with its term.
func QuorumLeader(voters int, statuses []etcd.EndpointStatus) (uint64, uint64) {
	votes := map[uint64]int{}
	var term uint64
	for _, st := range statuses {
		if st.LeaderID != 0 {
			votes[st.LeaderID]++
		}
	}
	for id, n := range votes {
		if n > voters/2 {
			for _, st := range statuses {
				if st.MemberID == id {
					term = st.RaftTerm
				}
			}
			return id, term
		}
	}
	return 0, 0
}

// Aspect is the part of a member's view a disagreement is about. Each is
// read by its own call, so each is confirmed or cleared on its own: a
// disagreement must persist on the aspect it is about, not merely recur.
type Aspect string

const (
	// AspectStatus: cluster ID, leader and term, from the member's Status.
	AspectStatus Aspect = "status"
	// AspectMembers: the member's own member list.
	AspectMembers Aspect = "members"
)

// Diverging is how one member's own account of the cluster differs from the
// quorum's.
type Diverging struct {
	// Detail says how; "" means the member agrees with the quorum.
	Detail string
	// Definitive is true when the difference cannot be a moment's lag: the
	// member answers for another cluster, or leads a one-member cluster of
	// its own (what a wrongly re-bootstrapped member does). Any other
	// difference, such as a follower that has not yet heard of a new leader
	// or applied a membership change, must persist before it costs the
	// member its data.
	Definitive bool
	// Aspect is what the difference is about.
	Aspect Aspect
	// Key names the difference itself where the aspect has one to name (the
	// two member lists): only the same difference seen for long enough is
	// confirmed. During membership changes one after another, a member that
	// is merely behind shows a new difference at each look, never one that
	// lasts.
	Key string
}

// Diverged reports whether there is a difference at all.
func (d Diverging) Diverged() bool { return d.Detail != "" }

// Divergence compares one member's own account of the cluster with the
// quorum's. own may be nil when the member's member list was not read this
// pass.
func Divergence(q QuorumView, status *etcd.EndpointStatus, own *etcd.MemberList) Diverging {
	if q.LeaderID == 0 {
		// Without a quorum leader there is no reference to disagree with.
		return Diverging{}
	}
	if status != nil {
		switch {
		case q.ClusterID != 0 && status.ClusterID != 0 && status.ClusterID != q.ClusterID:
			return Diverging{fmt.Sprintf("it reports cluster ID %016x, the quorum %016x", status.ClusterID, q.ClusterID), true, AspectStatus, ""}
		case status.LeaderID == status.MemberID && status.MemberID != q.LeaderID:
			alone := own != nil && len(own.Members) == 1 && len(q.Members) > 1
			detail := fmt.Sprintf("it reports itself leader while the quorum follows %016x", q.LeaderID)
			if alone {
				detail = fmt.Sprintf("it leads a one-member cluster of its own while the quorum of %d follows %016x", len(q.Members), q.LeaderID)
			}
			return Diverging{detail, alone, AspectStatus, ""}
		case status.LeaderID != 0 && status.LeaderID != q.LeaderID && status.RaftTerm < q.LeaderTerm:
			return Diverging{fmt.Sprintf("it follows %016x at term %d while the quorum follows %016x at term %d",
				status.LeaderID, status.RaftTerm, q.LeaderID, q.LeaderTerm), false, AspectStatus, ""}
		}
	}
	if own != nil {
		ids := make([]uint64, 0, len(own.Members))
		for _, m := range own.Members {
			ids = append(ids, m.ID)
		}
		want := slices.Clone(q.Members)
		slices.Sort(ids)
		slices.Sort(want)
		if !slices.Equal(ids, want) {
			return Diverging{Detail: fmt.Sprintf("its member list has %d members, the quorum's %d, and they differ", len(ids), len(want)),
				Aspect: AspectMembers, Key: fmt.Sprintf("%x/%x", ids, want)}
		}
	}
	return Diverging{}
}

// Sighting records when a disagreement on one aspect was first seen.
type Sighting struct {
	Aspect Aspect
	Key    string
	Since  time.Time
}

// Observed says which aspects of a member's view a pass read.
type Observed struct {
	Status  bool
	Members bool
}

func (o Observed) covers(a Aspect) bool {
	return a == AspectStatus && o.Status || a == AspectMembers && o.Members
}

// Confirm carries a first sighting from one pass to the next and says
// whether the disagreement may now cost the member its data: it is
// definitive, or the same difference has been seen on the same aspect, with
// no agreeing look at that aspect in between, for at least
// DivergenceConfirmAfter. A look
// that agrees clears the sighting; a pass that did not look at the aspect
// leaves it as it was.
func Confirm(prev *Sighting, d Diverging, seen Observed, now time.Time) (*Sighting, bool) {
	if !d.Diverged() {
		if prev != nil && seen.covers(prev.Aspect) {
			return nil, false
		}
		return prev, false
	}
	next := prev
	if next == nil || next.Aspect != d.Aspect || next.Key != d.Key {
		next = &Sighting{Aspect: d.Aspect, Key: d.Key, Since: now}
	}
	return next, d.Definitive || now.Sub(next.Since) >= DivergenceConfirmAfter
}
