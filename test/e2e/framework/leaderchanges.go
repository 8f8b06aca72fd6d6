package framework

import "time"

// LeaderChange is a change of leader the samples show.
type LeaderChange struct {
	From, To uint64
	// LastFrom is when the last sample at which a majority followed From
	// was taken: the change came after it. FirstTo is when the first sample
	// after it at which a majority followed To was complete: the change
	// came before it. Samples between them, if any, had no majority
	// following one leader.
	LastFrom, FirstTo time.Time
}

// LeaderChanges lists the changes of leader, by time, as samples with a
// majority following one leader show them.
func (r MembersDownReport) LeaderChanges() []LeaderChange {
	var out []LeaderChange
	var cur uint64
	var curAt time.Time
	for _, s := range r.Samples {
		l := s.Leader()
		if l == 0 {
			continue
		}
		if cur != 0 && l != cur {
			out = append(out, LeaderChange{From: cur, To: l, LastFrom: curAt, FirstTo: s.Done})
		}
		cur, curAt = l, s.At
	}
	return out
}

// electionTimeout is etcd's default --election-timeout, which the operator
// does not change. A leader transfer holds proposals back until the new
// leader takes over, or for this long at most before it gives up, while
// the old leader still calls itself the leader.
const electionTimeout = time.Second

// WriteSpan is when one write was in flight: sent at Start, answered at End.
type WriteSpan struct{ Start, End time.Time }

// Overlaps reports whether the two spans share an instant.
func (w WriteSpan) Overlaps(o WriteSpan) bool {
	return !w.Start.After(o.End) && !w.End.Before(o.Start)
}

// FailureWindow is when writes may fail because of the change: from one
// election timeout before the last sample that still showed the old leader
// to the answer of the first write that succeeded having been sent once the
// new leader was seen, after which the cluster is known to take writes
// again. ok is false when no such write succeeded.
func (c LeaderChange) FailureWindow(succeeded []WriteSpan) (WriteSpan, bool) {
	w := WriteSpan{Start: c.LastFrom.Add(-electionTimeout)}
	found := false
	for _, s := range succeeded {
		if s.Start.Before(c.FirstTo) {
			continue
		}
		if !found || s.End.Before(w.End) {
			w.End, found = s.End, true
		}
	}
	return w, found
}
