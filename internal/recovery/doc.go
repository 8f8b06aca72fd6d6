// Package recovery holds the decisions of disaster recovery, with no I/O:
// whether a cluster's quorum is lost for good or only out of reach, whether
// a recovery may go ahead, from which survivor or snapshot, and what it
// keeps and loses. The cluster controller reports quorum loss with it, the
// recovery controller guards and plans with it; both gather the facts and
// act themselves.
//
// A recovery is the one place the operator gives up data on purpose: etcd's
// --force-new-cluster drops whatever only the lost members had, and a
// snapshot drops everything written since. So every guard errs on the side
// of refusing, and every plan says what it loses before anything changes.
package recovery
