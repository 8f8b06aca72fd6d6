// Package remediation decides, from what one pass observed, whether a member
// is broken beyond restarting and must be replaced under a new member ID. It
// has no I/O: the cluster controller gathers the facts, applies the quorum
// gate and acts.
//
// Replacement is the only safe end state for a member that lost or corrupted
// its data, or whose view of the cluster diverged: a raft voter that rejoins
// under its old ID without its persisted term, vote and log can break raft's
// guarantees, so it is never nursed back in place.
package remediation
