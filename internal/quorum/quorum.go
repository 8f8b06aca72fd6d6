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

// RemovalAllowed reports whether a voter may leave now, whoever asked. The
// voters that remain must keep a quorum of the smaller membership
// (CanRemoveVoter). A voter that is itself healthy must also leave behind
// at least a quorum of the target size in healthy voters: giving up a
// working member while another is down would otherwise cut the cluster to
// its last quorum, or below what the spec asks it to survive, when waiting
// for the broken one's replacement costs nothing. A broken voter adds
// nothing to the quorum, so removing it is judged by the first rule alone.
func RemovalAllowed(voters, healthyOthers, target int, selfHealthy bool) bool {
	if !CanRemoveVoter(voters, healthyOthers) {
		return false
	}
	return !selfHealthy || healthyOthers >= Size(target)
}

// HasQuorum reports whether healthy voters form a quorum of all voters.
func HasQuorum(voters, healthy int) bool {
	return voters > 0 && healthy >= Size(voters)
}

// Candidate is a member considered for removal.
type Candidate struct {
	Name    string
	Created time.Time
	// HoldsNothing: the member has never run (created but not yet added to
	// etcd, or a learner that never started), so no data goes with it.
	HoldsNothing bool
	// Broken: self-heal judged the member beyond restarting.
	Broken bool
	// Learner: the member does not vote.
	Learner bool
	// Ready: the member is serving.
	Ready bool
}

// PickToRemove returns the member to remove on scale-down. Whatever costs
// the cluster least goes first: a member that holds nothing, then a broken
// one (a user who scales down to shed a dead member gets exactly that), then
// a learner, then one that is not ready, and among equals the newest, with
// the name as a deterministic tie-break. The newest holds the least history
// as a voter and is the likeliest to be a replacement still settling.
func PickToRemove(candidates []Candidate) (Candidate, bool) {
	if len(candidates) == 0 {
		return Candidate{}, false
	}
	sorted := append([]Candidate(nil), candidates...)
	rank := func(c Candidate) int {
		switch {
		case c.HoldsNothing:
			return 0
		case c.Broken:
			return 1
		case c.Learner:
			return 2
		case !c.Ready:
			return 3
		}
		return 4
	}
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if rank(a) != rank(b) {
			return rank(a) < rank(b)
		}
		if !a.Created.Equal(b.Created) {
			return a.Created.After(b.Created)
		}
		return a.Name > b.Name
	})
	return sorted[0], true
}
