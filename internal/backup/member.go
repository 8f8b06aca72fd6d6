package backup

import (
	"fmt"
	"sort"
	"strings"
)

// Candidate is a member as the snapshot Job found it.
type Candidate struct {
	Endpoint  string
	MemberID  uint64
	ClusterID uint64
	// Err is set when the member did not answer.
	Err       error
	Healthy   bool
	IsLeader  bool
	IsLearner bool
	Revision  int64
}

// ChooseMember picks the member to stream the snapshot from: a healthy
// voter of the expected cluster (any cluster when wantClusterID is 0),
// preferring a follower, whose disk and CPU the snapshot then loads
// instead of the leader's, and among followers the one with the highest
// revision, which has the most data. The leader is the last resort.
func ChooseMember(candidates []Candidate, wantClusterID uint64) (Candidate, error) {
	var usable []Candidate
	var why []string
	for _, c := range candidates {
		switch {
		case c.Err != nil:
			why = append(why, fmt.Sprintf("%s: %v", c.Endpoint, c.Err))
		case wantClusterID != 0 && c.ClusterID != wantClusterID:
			why = append(why, fmt.Sprintf("%s: cluster %016x, expected %016x", c.Endpoint, c.ClusterID, wantClusterID))
		case c.IsLearner:
			why = append(why, c.Endpoint+": a learner")
		case !c.Healthy:
			why = append(why, c.Endpoint+": not healthy (no leader, or errors)")
		default:
			usable = append(usable, c)
		}
	}
	if len(usable) == 0 {
		return Candidate{}, fmt.Errorf("%w among %d member(s): %s", ErrNoHealthyMember, len(candidates), strings.Join(why, "; "))
	}
	sort.SliceStable(usable, func(i, j int) bool {
		a, b := usable[i], usable[j]
		if a.IsLeader != b.IsLeader {
			return !a.IsLeader
		}
		return a.Revision > b.Revision
	})
	return usable[0], nil
}
