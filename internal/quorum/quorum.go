// Package quorum holds the arithmetic behind every membership decision, with
// no I/O, so each rule can be table-tested on its own.
package quorum

import (
	"sort"
	"time"
)

// Size is the number of voters a cluster of n voters needs to make progress.
func Size(voters int) int {
	if voters <= 0 {
		return 0
	}
	return voters/2 + 1
}

// CanRemoveVoter reports whether one voter may be removed: the voters that
// remain must still have a quorum of the smaller membership among them, counting
// only those seen healthy now. The check is against the target membership,
// not the current one, because that is the cluster that has to keep working.
func CanRemoveVoter(voters, healthyOthers int) bool {
	if voters <= 1 {
		return false
	}
	return healthyOthers >= Size(voters-1)
}

// HasQuorum reports whether healthy voters form a quorum of all voters.
func HasQuorum(voters, healthy int) bool {
	return voters > 0 && healthy >= Size(voters)
}

// Candidate is a member considered for removal.
type Candidate struct {
	Name    string
	Created time.Time
}

// PickNewest returns the member to remove on scale-down: the newest, with the
// name as a deterministic tie-break. The newest member holds the least
// history as a voter and is the likeliest to be a replacement still settling.
func PickNewest(candidates []Candidate) (Candidate, bool) {
	if len(candidates) == 0 {
		return Candidate{}, false
	}
	sorted := append([]Candidate(nil), candidates...)
	sort.Slice(sorted, func(i, j int) bool {
		if !sorted[i].Created.Equal(sorted[j].Created) {
			return sorted[i].Created.After(sorted[j].Created)
		}
		return sorted[i].Name > sorted[j].Name
	})
	return sorted[0], true
}
