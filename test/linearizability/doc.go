// Package linearizability proves that an etcd cluster lost and misordered no
// write while something happened to it: a rolling upgrade, a member replaced,
// a fault injected.
//
// A [Workload] runs clients against a small key space, each pinned to one
// endpoint (a member's client URL, or the client Service), issuing puts,
// linearizable gets and compare-and-swaps. Every call is recorded in a
// [History] with its invocation and response time on one monotonic clock. A
// write whose outcome the client could not learn (a timeout, a lost
// connection) is kept as possibly applied; a call that definitely failed
// is left out, as it can have changed nothing.
//
// [History.Check] hands the history to porcupine with a per-key register
// model and returns a [Report]: whether the history is linearizable, what was
// recorded, and the longest stretch without a completed write. On a violation
// it writes porcupine's HTML visualization where the caller asks, so a failed
// test leaves the evidence behind.
//
// The package is test infrastructure: nothing in the product imports it.
package linearizability
