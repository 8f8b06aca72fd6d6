package etcdcluster

import (
	"context"
	"time"

	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/maintenance"
)

// maintJob is one maintenance call running in the background. A
// defragmentation can take minutes on a large database, and the controller
// has one worker for every cluster: the pass that decides it starts it, and
// a later pass collects what it did. At most one runs per cluster.
type maintJob struct {
	// action is maintenance.Defragment or maintenance.Compact.
	action maintenance.Action
	// member and key name the member defragmented (key tells a re-created
	// member of the same name apart); empty for a compaction.
	member, key string
	endpoint    string
	// role is how the Event describes the member: a follower, the only
	// member, or the leader it was until it handed over.
	role     string
	why      string
	revision int64
	noSpace  bool
	started  time.Time
	// before is the member's database as the pass that started it saw it.
	before maintenance.Usage
	// compacted is the cluster's compaction revision when it started.
	compacted int64

	// Set by the goroutine when the call returns, under the memo's lock.
	done bool
	err  error
	// after is the member's status right after the defragmentation; nil if
	// it did not answer.
	after *etcd.EndpointStatus
}

// maintMemo is the maintenance part of a cluster's memo, guarded by the
// memo's lock. Losing it (an operator restart) costs at most a compaction
// repeated at the same revision, which etcd refuses at no cost, and a failed
// member tried again sooner.
type maintMemo struct {
	job    *maintJob
	cancel context.CancelFunc
	// compacted is the revision this process last compacted the cluster at.
	compacted int64
	// retryAt: a member (by memberKey, or compactKey) whose call failed is
	// not tried again before then.
	retryAt map[string]time.Time
	// defragmentedAt is, by memberKey, the compaction revision of a
	// member's last defragmentation.
	defragmentedAt map[string]int64
	// handedFrom, handedTo: leadership was moved from one member to another
	// so that the first could be defragmented.
	handedFrom, handedTo string
}

// compactKey is the retryAt key of a compaction.
const compactKey = "#compact"

// stop cancels the running call, if any. The caller holds the memo's lock.
func (m *maintMemo) stop() {
	if m.cancel != nil {
		m.cancel()
		m.cancel = nil
	}
}

// start runs call in the background under its own deadline (the pass's
// context ends with the pass), records its outcome in j, and then calls done,
// which asks for the cluster to be looked at again.
func (mm *memo) start(j *maintJob, call func(ctx context.Context) (*etcd.EndpointStatus, error), done func()) {
	ctx, cancel := context.WithTimeout(context.Background(), maintenanceTimeout)
	mm.mu.Lock()
	mm.maint.stop()
	mm.maint.job, mm.maint.cancel = j, cancel
	mm.mu.Unlock()
	go func() {
		defer cancel()
		after, err := call(ctx)
		mm.mu.Lock()
		j.after, j.err, j.done = after, err, true
		mm.mu.Unlock()
		done()
	}()
}

// running is a copy of the call in flight, or nil.
func (mm *memo) running() *maintJob {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	if j := mm.maint.job; j != nil && !j.done {
		c := *j
		return &c
	}
	return nil
}

// takeFinished hands over a call that has returned, once.
func (mm *memo) takeFinished() *maintJob {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	j := mm.maint.job
	if j == nil || !j.done {
		return nil
	}
	mm.maint.job, mm.maint.cancel = nil, nil
	return j
}

func (mm *memo) compactedAt() int64 {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	return mm.maint.compacted
}

func (mm *memo) setCompacted(rev int64) {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	mm.maint.compacted = max(mm.maint.compacted, rev)
}

func (mm *memo) retryAt(key string) time.Time {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	return mm.maint.retryAt[key]
}

func (mm *memo) setRetryAt(key string, at time.Time) {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	if mm.maint.retryAt == nil {
		mm.maint.retryAt = map[string]time.Time{}
	}
	mm.maint.retryAt[key] = at
}

// handOver records that leadership moved from one member to another before
// the first is defragmented.
func (mm *memo) handOver(from, to string) {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	mm.maint.handedFrom, mm.maint.handedTo = from, to
}

// takeHandOver is whom leadership was moved to so that member could be
// defragmented, or ""; it is forgotten once asked, so that a later
// defragmentation of the same member is not told of an old handover.
func (mm *memo) takeHandOver(member string) string {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	to := ""
	if mm.maint.handedFrom == member {
		to = mm.maint.handedTo
	}
	mm.maint.handedFrom, mm.maint.handedTo = "", ""
	return to
}

func (mm *memo) defragmentedAt(key string) int64 {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	return mm.maint.defragmentedAt[key]
}

func (mm *memo) setDefragmentedAt(key string, rev int64) {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	if mm.maint.defragmentedAt == nil {
		mm.maint.defragmentedAt = map[string]int64{}
	}
	mm.maint.defragmentedAt[key] = rev
}
