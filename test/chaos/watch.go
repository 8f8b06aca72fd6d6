package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The watch guarantees, as etcd documents them and its robustness suite
// checks them, each an invariant of its own.
const (
	// InvWatchOrdered: a watcher's events come in revision order, across
	// restarts, and a list never goes back before an event already seen.
	InvWatchOrdered = "watch-ordered"
	// InvWatchUnique: no event is delivered twice.
	InvWatchUnique = "watch-unique"
	// InvWatchAtomic: all events of one revision come in one response.
	InvWatchAtomic = "watch-atomic"
	// InvWatchReliable: no write in the span a watch covered is missing.
	InvWatchReliable = "watch-reliable"
	// InvWatchResumable: a watch started again from revision R delivers
	// the history from R, not earlier and not later.
	InvWatchResumable = "watch-resumable"
	// InvWatchBookmarkable: a progress notification at revision P means
	// every event up to P was delivered, and never goes backwards.
	InvWatchBookmarkable = "watch-bookmarkable"
	// InvWatchPrevKV: an event's previous key-value is what the key held
	// just before.
	InvWatchPrevKV = "watch-prevkv"
	// InvWatchIsCreate: a put is a creation (CreateRevision equal to
	// ModRevision) exactly when the key did not exist before.
	InvWatchIsCreate = "watch-iscreate"
	// InvWatchValid: an event is a write that happened: an acknowledged
	// write at its revision, or a write of unknown outcome.
	InvWatchValid = "watch-valid"
	// InvWatchCaughtUp: once the cluster has recovered, every watcher
	// reaches the writer's last acknowledged write, told by an event or a
	// progress notification, within a minute.
	InvWatchCaughtUp = "watch-caught-up"
)

// maxWatchViolations bounds the violations CheckWatches lists one by one: a
// broken watch can otherwise repeat one fault thousands of times.
const maxWatchViolations = 20

// KubeWrite is a write of the Kubernetes-like writer: a put or a delete of
// one key, each a transaction conditioned on the key's last revision.
type KubeWrite struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Delete bool   `json:"delete,omitempty"`
	// Revision is the transaction's revision when it was acknowledged; 0
	// when its outcome is unknown (the call failed without an answer).
	Revision int64 `json:"revision,omitempty"`
}

// KV is a key-value as a watch event carries it.
type KV struct {
	Key            string `json:"key"`
	Value          string `json:"value,omitempty"`
	CreateRevision int64  `json:"createRevision,omitempty"`
	ModRevision    int64  `json:"modRevision"`
}

// WatchEvent is one event a watcher received: its key-value (for a delete,
// the key and the deletion's revision) and the previous key-value, nil when
// etcd sent none.
type WatchEvent struct {
	Delete bool `json:"delete,omitempty"`
	KV     KV   `json:"kv"`
	Prev   *KV  `json:"prev,omitempty"`
}

// WatchRecordKind is what a watcher did or was told.
type WatchRecordKind string

// A watcher's log is lists, watch starts, responses and ends.
const (
	// WatchList is a linearizable range of the prefix; Revision is its
	// header's revision.
	WatchList WatchRecordKind = "list"
	// WatchStart is a watch opened from Revision.
	WatchStart WatchRecordKind = "start"
	// WatchResponse is one response: events, or a progress notification
	// at Revision.
	WatchResponse WatchRecordKind = "response"
	// WatchEnd is the end of a watch: an error, a cancel, or a compaction
	// (Compacted, Revision the compaction's revision).
	WatchEnd WatchRecordKind = "end"
)

// WatchRecord is one entry of a watcher's log.
type WatchRecord struct {
	Kind      WatchRecordKind `json:"kind"`
	Revision  int64           `json:"revision,omitempty"`
	Events    []WatchEvent    `json:"events,omitempty"`
	Progress  bool            `json:"progress,omitempty"`
	Compacted bool            `json:"compacted,omitempty"`
	Err       string          `json:"error,omitempty"`
}

// WatcherLog is everything one watcher did and received, in order.
type WatcherLog struct {
	Name    string        `json:"name"`
	Records []WatchRecord `json:"records"`
}

// WatchHistory is what CheckWatches checks: the writes under a prefix, the
// compactions, and the watchers' logs.
type WatchHistory struct {
	Prefix string `json:"prefix"`
	// Writes are the writer's writes: acknowledged ones with their
	// revision, and those of unknown outcome.
	Writes []KubeWrite `json:"writes"`
	// Compactions are the revisions compacted at while the watchers ran.
	Compactions []int64      `json:"compactions,omitempty"`
	Watchers    []WatcherLog `json:"watchers"`
}

// CheckWatches checks every watch guarantee of the watchers' logs against
// the write history: the writer's acknowledged writes, at their revisions,
// completed by what the watchers saw of its writes of unknown outcome. It
// returns the number of events checked and every guarantee broken.
func CheckWatches(h WatchHistory) (events int, violations []Violation) {
	c := newWatchChecker(h)
	for _, w := range h.Watchers {
		events += c.checkWatcher(w)
	}
	return events, c.result()
}

type revKey struct {
	rev int64
	key string
}

// histWrite is one write in the history the watchers are checked against.
type histWrite struct {
	rev   int64
	key   string
	value string
	del   bool
}

// keyState is a key's state just after one of its writes.
type keyState struct {
	rev       int64
	exists    bool
	value     string
	createRev int64
}

type watchChecker struct {
	h       WatchHistory
	writes  map[revKey]histWrite
	byRev   map[int64][]string
	ordered []histWrite
	states  map[string][]keyState
	out     []Violation
	seen    map[string]bool
}

func newWatchChecker(h WatchHistory) *watchChecker {
	c := &watchChecker{h: h, writes: map[revKey]histWrite{}, byRev: map[int64][]string{}, seen: map[string]bool{}}
	unknownPut := map[revKey]bool{} // by key and value
	unknownDel := map[string]bool{}
	for _, w := range h.Writes {
		switch {
		case w.Revision > 0:
			c.add(histWrite{rev: w.Revision, key: w.Key, value: w.Value, del: w.Delete})
		case w.Delete:
			unknownDel[w.Key] = true
		default:
			unknownPut[revKey{key: w.Key + "\x00" + w.Value}] = true
		}
	}
	// The watchers' events fill in the writes of unknown outcome that took
	// effect; an event no write explains, or that contradicts an
	// acknowledged write, is itself a violation.
	for _, w := range h.Watchers {
		for _, r := range w.Records {
			for _, e := range r.Events {
				k := revKey{e.KV.ModRevision, e.KV.Key}
				got := histWrite{rev: k.rev, key: k.key, value: e.KV.Value, del: e.Delete}
				if !strings.HasPrefix(k.key, h.Prefix) {
					c.violate(InvWatchValid, "%s received %s at revision %d, outside the prefix %s", w.Name, k.key, k.rev, h.Prefix)
					continue
				}
				if want, ok := c.writes[k]; ok {
					if want != got {
						c.violate(InvWatchValid, "%s received %s at revision %d, but the write there was %s", w.Name, got.String(), k.rev, want.String())
					}
					continue
				}
				if (e.Delete && !unknownDel[k.key]) || (!e.Delete && !unknownPut[revKey{key: k.key + "\x00" + e.KV.Value}]) {
					c.violate(InvWatchValid, "%s received %s at revision %d, which no write of unknown outcome explains", w.Name, got.String(), k.rev)
				}
				c.add(got)
			}
		}
	}
	for _, w := range c.writes {
		c.ordered = append(c.ordered, w)
	}
	slices.SortFunc(c.ordered, func(a, b histWrite) int {
		return cmp.Or(cmp.Compare(a.rev, b.rev), strings.Compare(a.key, b.key))
	})
	c.states = map[string][]keyState{}
	for _, w := range c.ordered {
		st := c.states[w.key]
		prev := keyState{}
		if len(st) > 0 {
			prev = st[len(st)-1]
		}
		next := keyState{rev: w.rev, exists: !w.del, value: w.value, createRev: prev.createRev}
		if !w.del && !prev.exists {
			next.createRev = w.rev
		}
		c.states[w.key] = append(st, next)
	}
	return c
}

func (c *watchChecker) add(w histWrite) {
	k := revKey{w.rev, w.key}
	if _, ok := c.writes[k]; ok {
		return
	}
	c.writes[k] = w
	c.byRev[w.rev] = append(c.byRev[w.rev], w.key)
}

func (w histWrite) String() string {
	if w.del {
		return "a delete of " + w.key
	}
	return fmt.Sprintf("a put of %s=%q", w.key, w.value)
}

func (c *watchChecker) violate(inv, format string, args ...any) {
	v := violation(inv, format, args...)
	if !c.seen[v.String()] {
		c.seen[v.String()] = true
		c.out = append(c.out, v)
	}
}

func (c *watchChecker) result() []Violation {
	if len(c.out) <= maxWatchViolations {
		return c.out
	}
	out := slices.Clone(c.out[:maxWatchViolations])
	return append(out, violation(c.out[maxWatchViolations].Invariant, "and %d more watch violations", len(c.out)-maxWatchViolations))
}

// before is the key's state just before rev, in the history.
func (c *watchChecker) before(key string, rev int64) keyState {
	st := c.states[key]
	i := sort.Search(len(st), func(i int) bool { return st[i].rev >= rev })
	if i == 0 {
		return keyState{}
	}
	return st[i-1]
}

// compactedBefore reports whether the revision before rev was compacted:
// etcd reads an event's previous key-value at that revision, and leaves it
// out when that revision is gone.
func (c *watchChecker) compactedBefore(rev int64) bool {
	for _, cr := range c.h.Compactions {
		if rev-1 < cr {
			return true
		}
	}
	return false
}

// session is one watch, from its start to its end.
type session struct {
	from      int64
	afterList bool
	got       map[revKey]bool
	first     int64
	// end is the highest revision the watch vouched for: its last event
	// or progress notification.
	end int64
}

// watcherState is what one watcher has been told so far.
type watcherState struct {
	name         string
	lastEvent    int64
	lastEventAt  int
	lastList     int64
	lastProgress int64
	delivered    map[revKey]bool
	sess         *session
	listed       bool
}

func (c *watchChecker) checkWatcher(w WatcherLog) int {
	s := &watcherState{name: w.Name, delivered: map[revKey]bool{}, lastEventAt: -1}
	events := 0
	for i, r := range w.Records {
		switch r.Kind {
		case WatchList:
			c.closeSession(s)
			if r.Revision < s.lastEvent {
				c.violate(InvWatchOrdered, "%s listed at revision %d, after it had received an event at %d", s.name, r.Revision, s.lastEvent)
			}
			s.lastList, s.listed = max(s.lastList, r.Revision), true
		case WatchStart:
			c.closeSession(s)
			s.sess = &session{from: r.Revision, afterList: s.listed, got: map[revKey]bool{}}
			s.listed = false
		case WatchResponse:
			if r.Progress {
				c.progress(s, r.Revision)
			}
			c.response(s, i, r.Events)
			events += len(r.Events)
		case WatchEnd:
			c.closeSession(s)
		}
	}
	c.closeSession(s)
	return events
}

func (c *watchChecker) progress(s *watcherState, rev int64) {
	if rev < s.lastProgress {
		c.violate(InvWatchBookmarkable, "%s got a progress notification at revision %d after one at %d", s.name, rev, s.lastProgress)
	}
	if rev < s.lastEvent {
		c.violate(InvWatchBookmarkable, "%s got a progress notification at revision %d after an event at %d", s.name, rev, s.lastEvent)
	}
	s.lastProgress = max(s.lastProgress, rev)
	if s.sess != nil {
		s.sess.end = max(s.sess.end, rev)
	}
}

func (c *watchChecker) response(s *watcherState, at int, evs []WatchEvent) {
	perRev := map[int64]int{}
	for _, e := range evs {
		k := revKey{e.KV.ModRevision, e.KV.Key}
		perRev[k.rev]++
		switch {
		case s.delivered[k]:
			c.violate(InvWatchUnique, "%s received %s at revision %d twice", s.name, k.key, k.rev)
		case k.rev < s.lastEvent || (k.rev == s.lastEvent && at != s.lastEventAt):
			c.violate(InvWatchOrdered, "%s received revision %d after revision %d", s.name, k.rev, s.lastEvent)
		case k.rev <= s.lastProgress:
			c.violate(InvWatchBookmarkable, "%s received revision %d after a progress notification at %d", s.name, k.rev, s.lastProgress)
		case k.rev <= s.lastList:
			c.violate(InvWatchOrdered, "%s received revision %d after listing at %d", s.name, k.rev, s.lastList)
		case s.sess != nil && k.rev < s.sess.from:
			c.violate(InvWatchResumable, "%s watched from revision %d and received revision %d", s.name, s.sess.from, k.rev)
		}
		s.delivered[k] = true
		if k.rev >= s.lastEvent {
			s.lastEvent, s.lastEventAt = k.rev, at
		}
		if s.sess != nil {
			s.sess.got[k] = true
			s.sess.end = max(s.sess.end, k.rev)
			if s.sess.first == 0 {
				s.sess.first = k.rev
			}
		}
		c.checkEvent(s.name, e)
	}
	for rev, n := range perRev {
		if want := len(c.byRev[rev]); n != want {
			c.violate(InvWatchAtomic, "%s received %d of the %d writes of revision %d in one response", s.name, n, want, rev)
		}
	}
}

// checkEvent checks an event's previous key-value and creation flag
// against the key's state just before it.
func (c *watchChecker) checkEvent(name string, e WatchEvent) {
	rev := e.KV.ModRevision
	st := c.before(e.KV.Key, rev)
	if !e.Delete {
		isCreate := e.KV.CreateRevision == e.KV.ModRevision
		switch {
		case isCreate && st.exists:
			c.violate(InvWatchIsCreate, "%s received the put of %s at revision %d as a creation, but the key existed (since %d)", name, e.KV.Key, rev, st.createRev)
		case !isCreate && !st.exists:
			c.violate(InvWatchIsCreate, "%s received the put of %s at revision %d with create revision %d, but the key did not exist before", name, e.KV.Key, rev, e.KV.CreateRevision)
		case !isCreate && e.KV.CreateRevision != st.createRev:
			c.violate(InvWatchIsCreate, "%s received the put of %s at revision %d with create revision %d, but the key was created at %d", name, e.KV.Key, rev, e.KV.CreateRevision, st.createRev)
		}
	}
	switch {
	case !st.exists && e.Prev != nil:
		c.violate(InvWatchPrevKV, "%s received %s at revision %d with a previous value %q (of %d), but the key did not exist before", name, e.KV.Key, rev, e.Prev.Value, e.Prev.ModRevision)
	case st.exists && e.Prev == nil && !c.compactedBefore(rev):
		c.violate(InvWatchPrevKV, "%s received %s at revision %d with no previous value, but the key held %q (of %d)", name, e.KV.Key, rev, st.value, st.rev)
	case st.exists && e.Prev != nil && (e.Prev.Value != st.value || e.Prev.ModRevision != st.rev || e.Prev.Key != e.KV.Key):
		c.violate(InvWatchPrevKV, "%s received %s at revision %d with previous %s=%q (of %d), but the key held %q (of %d)", name, e.KV.Key, rev, e.Prev.Key, e.Prev.Value, e.Prev.ModRevision, st.value, st.rev)
	}
}

// closeSession checks that a watch delivered every write from its start to
// the last revision it vouched for. A write missed before the first event
// of a watch started again is the resumption's fault; a write missed after
// it, or by the first watch after a list, is a hole in the stream.
func (c *watchChecker) closeSession(s *watcherState) {
	sess := s.sess
	s.sess = nil
	if sess == nil || sess.end < sess.from {
		return
	}
	i := sort.Search(len(c.ordered), func(i int) bool { return c.ordered[i].rev >= sess.from })
	var missed []histWrite
	for ; i < len(c.ordered) && c.ordered[i].rev <= sess.end; i++ {
		if w := c.ordered[i]; !sess.got[revKey{w.rev, w.key}] {
			missed = append(missed, w)
		}
	}
	if len(missed) == 0 {
		return
	}
	first := missed[0]
	inv := InvWatchReliable
	if !sess.afterList && (sess.first == 0 || first.rev < sess.first) {
		inv = InvWatchResumable
	}
	c.violate(inv, "%s watched revisions %d to %d and missed %d writes, the first %s at revision %d", s.name, sess.from, sess.end, len(missed), first.String(), first.rev)
}
