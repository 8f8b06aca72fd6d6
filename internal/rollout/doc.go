// Package rollout decides, from what one pass observed, the next step of a
// rollout: bringing members whose template differs from the target to it,
// one member at a time, followers first and the leader last, each only once
// the cluster is healthy and the last member updated has caught up. It has
// no I/O; the cluster controller applies the decision.
//
// One rollout serves every kind of template change. A change a member's Pod
// can take in place (version, resources, options, scheduling, metadata,
// image repository) restarts the member's Pod on its own volume, keeping
// its member ID and data. A change it cannot (its data lives in memory, or
// its volume must change) replaces it: a new member with the target
// template joins as a learner and is promoted, and only then is an outdated
// member retired.
package rollout
