package remediation

import (
	"fmt"
	"slices"

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

// Divergence compares one member's own account of the cluster with the
// quorum's and says how they differ; "" means they agree. own may be nil
// when the member's member list was not read this pass.
func Divergence(q QuorumView, status *etcd.EndpointStatus, own *etcd.MemberList) string {
	if q.LeaderID == 0 {
		// Without a quorum leader there is no reference to disagree with.
		return ""
	}
	if status != nil {
		switch {
		case q.ClusterID != 0 && status.ClusterID != 0 && status.ClusterID != q.ClusterID:
			return fmt.Sprintf("it reports cluster ID %016x, the quorum %016x", status.ClusterID, q.ClusterID)
		case status.LeaderID == status.MemberID && status.MemberID != q.LeaderID:
			return fmt.Sprintf("it reports itself leader while the quorum follows %016x", q.LeaderID)
		case status.LeaderID != 0 && status.LeaderID != q.LeaderID && status.RaftTerm < q.LeaderTerm:
			return fmt.Sprintf("it follows %016x at term %d while the quorum follows %016x at term %d",
				status.LeaderID, status.RaftTerm, q.LeaderID, q.LeaderTerm)
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
			return fmt.Sprintf("its member list has %d members, the quorum's %d, and they differ", len(ids), len(want))
		}
	}
	return ""
}
