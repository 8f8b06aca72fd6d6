package etcdcluster

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/remediation"
	"github.com/quorumctl/etcd-operator/internal/unreachable"
)

// memo is what the controller keeps in memory between passes of one
// cluster: nothing a decision can lose safely is persisted, and what is kept
// here errs on the side of keeping members when it is lost (an operator
// restart starts every wait again).
type memo struct {
	mu  sync.Mutex
	uid types.UID
	// lastViewCheck is when members' own member lists were last read.
	lastViewCheck time.Time
	// sightings maps a member (memberKey) to a disagreement with the
	// quorum first seen on one aspect of its view.
	sightings map[string]*remediation.Sighting
	// restarts maps a member (memberKey) the rollout restarted to the
	// template hash it restarted it to, until the member is seen a healthy
	// voter on it. It outlives a cache that has not seen the restart yet;
	// the member's status.rolledAt outlives an operator restart.
	restarts map[string]string
	// maint is the cluster's maintenance: the call running in the
	// background, if any, and what earlier ones left to know.
	maint maintMemo
	// refusal is the last restore refusal, reported while the restore's
	// source is checked again; see reportChecking.
	refusal *progress
	// unreachable is the run of passes in which no member answered, which
	// spaces the next ones out.
	unreachable unreachable.Streak
}

// memos holds one memo per cluster, dropped when the cluster goes.
type memos struct{ m sync.Map }

// get returns the memo of a cluster, a fresh one if the object was
// re-created under the same name.
func (ms *memos) get(c *v1alpha1.EtcdCluster) *memo {
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	v, _ := ms.m.LoadOrStore(key, &memo{uid: c.UID, sightings: map[string]*remediation.Sighting{}, restarts: map[string]string{}})
	mm := v.(*memo)
	mm.mu.Lock()
	defer mm.mu.Unlock()
	if mm.uid != c.UID {
		mm.maint.stop()
		mm.uid, mm.lastViewCheck, mm.sightings = c.UID, time.Time{}, map[string]*remediation.Sighting{}
		mm.restarts = map[string]string{}
		mm.maint = maintMemo{}
		mm.refusal = nil
		mm.unreachable = unreachable.Streak{}
	}
	return mm
}

// forget drops a cluster's memo and stops its maintenance call.
func (ms *memos) forget(key types.NamespacedName) {
	if v, ok := ms.m.LoadAndDelete(key); ok {
		mm := v.(*memo)
		mm.mu.Lock()
		defer mm.mu.Unlock()
		mm.maint.stop()
	}
}

// len is the number of clusters remembered, for tests.
func (ms *memos) len() int {
	n := 0
	ms.m.Range(func(any, any) bool { n++; return true })
	return n
}

// lastRefusal is the restore refusal remembered, if any.
func (mm *memo) lastRefusal() *progress {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	return mm.refusal
}

// rememberRefusal keeps p, or with nil forgets the refusal.
func (mm *memo) rememberRefusal(p *progress) {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	mm.refusal = p
}

// observeReach counts a pass in the cluster's unreachable streak and
// returns how long the next look waits at the least: zero unless the pass
// was silent.
func (mm *memo) observeReach(silent bool, generation int64) time.Duration {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	mm.unreachable = mm.unreachable.Observe(!silent, generation)
	return mm.unreachable.Delay(string(mm.uid))
}

// unreachableStreak is the streak, for tests.
func (mm *memo) unreachableStreak() unreachable.Streak {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	return mm.unreachable
}

// viewCheckDue rate-limits the per-member member-list reads and records
// that one is made now.
func (mm *memo) viewCheckDue(now time.Time) bool {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	if !mm.lastViewCheck.IsZero() && now.Sub(mm.lastViewCheck) < viewCheckInterval {
		return false
	}
	mm.lastViewCheck = now
	return true
}

// confirm carries a member's first sighting forward (remediation.Confirm)
// and drops those of members that no longer exist.
func (mm *memo) confirm(m *v1alpha1.EtcdMember, d remediation.Diverging, seen remediation.Observed, now time.Time) bool {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	key := memberKey(m)
	next, confirmed := remediation.Confirm(mm.sightings[key], d, seen, now)
	if next == nil {
		delete(mm.sightings, key)
	} else {
		mm.sightings[key] = next
	}
	return confirmed
}

// memberKey tells a re-created member of the same name from the old one.
func memberKey(m *v1alpha1.EtcdMember) string { return m.Name + "/" + string(m.UID) }

// keepOnly forgets the sightings, and the maintenance records, of members
// not in live (by memberKey): a cluster whose members are replaced over
// months must not keep a record of each one gone.
func (mm *memo) keepOnly(live map[string]bool) {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	for key := range mm.sightings {
		if !live[key] {
			delete(mm.sightings, key)
		}
	}
	for key := range mm.maint.retryAt {
		if key != compactKey && !live[key] {
			delete(mm.maint.retryAt, key)
		}
	}
	for key := range mm.maint.defragmentedAt {
		if !live[key] {
			delete(mm.maint.defragmentedAt, key)
		}
	}
}
