// Package fake is an in-memory stand-in for an etcd cluster, implementing
// etcd.Client and etcd.Dialer for reconciler unit tests.
//
// It keeps a small cluster model (members, learners, leader, alarms,
// per-endpoint reachability) and enforces the rules that reconcilers must
// cope with the same way real etcd does: at most MaxLearners learners, peer
// URLs unique, only caught-up learners promotable, learners refusing
// everything but Status. Errors come back in the same shapes as from the
// real client (*etcd.CallError wrapping rpctypes values), so the etcd.Is*
// classifiers work unchanged.
//
// Tests script trouble with FailNext (one-shot errors per operation),
// SetHook (a function consulted on every call of an operation) and
// SetEndpointError (a member that is down or misbehaving), and inspect what
// the code under test did through the recorded fields (AddedLearners,
// Promoted, Removed, MovedLeader, Dialed, Calls, ...). Member IDs are
// derived deterministically from the peer URLs and a counter.
package fake
