package etcdcluster

import "time"

// Requeue intervals. Most progress is driven by watches on members and Pods;
// these cover what no Kubernetes object announces, such as etcd catching a
// learner up or refusing a change for a few seconds after a promotion.
const (
	requeueSoon        = 500 * time.Millisecond
	requeueLearnerSync = time.Second
	requeueEtcdRefused = time.Second
	requeueUnreachable = 5 * time.Second
	requeueQuorumWait  = 5 * time.Second
	// requeueAfterError retries a pass in which a step failed. Errors are
	// not handed to controller-runtime, whose growing backoff would also
	// hold back the timed looks self-heal depends on.
	requeueAfterError = 5 * time.Second
	// requeueSteadyState is how often a healthy cluster's members are looked
	// at again; reads only, so an idle cluster costs no API writes.
	requeueSteadyState = 10 * time.Second
	viewCheckInterval  = 10 * time.Second
	etcdInspectTimeout = 5 * time.Second
	// inspectDeadline bounds one pass's whole look at etcd (inspectEtcd).
	// A look at a cluster that does not answer takes the dial (3 s at most,
	// with credentials), the linearizable list (quorumReadTimeout), then the
	// members' own lists and metrics at once (endpointTimeout): 8 s, inside
	// it. Only a look at a cluster that answers slowly at every step can
	// reach it, and loses its alarm read, reported as unknown.
	inspectDeadline     = 10 * time.Second
	quorumReadTimeout   = 3 * time.Second
	endpointTimeout     = 2 * time.Second
	defaultDeadlineSecs = 600
)

// ElectionGrace is the operator's ElectionGrace (Reconciler.ElectionGrace):
// a leader's hand-over takes a few heartbeats (100 ms each by default), an
// election after a leader vanished a little more; a voter without a leader
// longer than this is not in a passing election.
const ElectionGrace = 500 * time.Millisecond

// Maintenance timings.
const (
	// requeueMaintenance is how often a call in flight is looked at.
	requeueMaintenance = 2 * time.Second
	// maintenanceTimeout bounds a background maintenance call, and how long
	// a member marked as being defragmented is spared by self-heal when no
	// call is in flight (after an operator restart): etcd finishes a
	// defragmentation it started whether or not its caller waits.
	maintenanceTimeout = 20 * time.Minute
	// MaintenanceCallTimeout is the client-side bound of one
	// defragmentation or compaction, which the operator's dialer is given.
	MaintenanceCallTimeout = 15 * time.Minute
	// retryFailedCall is when a failed call of NOSPACE recovery is tried
	// again; a routine defragmentation that failed waits MinInterval.
	retryFailedCall = 30 * time.Second
	// maintDoneBuffer is how many notices of returned calls wait for the
	// worker; one per cluster at a time, so a few cover most operators.
	maintDoneBuffer = 64
	timeRounding    = 100 * time.Millisecond
)
