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
	requeueSteadyState  = 10 * time.Second
	viewCheckInterval   = 10 * time.Second
	etcdInspectTimeout  = 5 * time.Second
	quorumReadTimeout   = 3 * time.Second
	endpointTimeout     = 2 * time.Second
	defaultDeadlineSecs = 600
)
