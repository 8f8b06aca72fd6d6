package backup

import (
	"sort"
	"time"
)

// FailedHistory is how many failed snapshots a schedule keeps, newest
// first, for their conditions to be read; they hold no stored object.
const FailedHistory = 3

// Retention is a schedule's rules; zero values switch a rule off.
type Retention struct {
	KeepLast int
	MaxAge   time.Duration
}

// SnapshotState is a schedule's snapshot as retention sees it.
type SnapshotState int

const (
	// Active snapshots (pending or running) are never pruned.
	Active SnapshotState = iota
	Succeeded
	Failed
)

// Entry is one snapshot.
type Entry struct {
	Name  string
	State SnapshotState
	// Created orders failed snapshots; Completed orders and ages successful
	// ones (it falls back to Created when unset).
	Created   time.Time
	Completed time.Time
}

func (e Entry) completed() time.Time {
	if e.Completed.IsZero() {
		return e.Created
	}
	return e.Completed
}

// Prune names the snapshots the rules release, oldest first. Successful
// snapshots beyond the newest KeepLast, or completed more than MaxAge ago,
// go, except the newest successful one, which is never pruned: a schedule
// must not leave a cluster without a backup because its rules are strict or
// its snapshots have been failing. Failed snapshots beyond the newest
// FailedHistory go. Active ones stay.
func Prune(entries []Entry, r Retention, now time.Time) []string {
	var ok, failed []Entry
	for _, e := range entries {
		switch e.State {
		case Succeeded:
			ok = append(ok, e)
		case Failed:
			failed = append(failed, e)
		}
	}
	newestFirst := func(list []Entry, at func(Entry) time.Time) {
		sort.SliceStable(list, func(i, j int) bool {
			a, b := at(list[i]), at(list[j])
			if !a.Equal(b) {
				return a.After(b)
			}
			return list[i].Name > list[j].Name
		})
	}
	newestFirst(ok, Entry.completed)
	newestFirst(failed, func(e Entry) time.Time { return e.Created })

	var out []Entry
	for i, e := range ok {
		if i == 0 {
			continue
		}
		tooMany := r.KeepLast > 0 && i >= r.KeepLast
		tooOld := r.MaxAge > 0 && now.Sub(e.completed()) > r.MaxAge
		if tooMany || tooOld {
			out = append(out, e)
		}
	}
	if len(failed) > FailedHistory {
		out = append(out, failed[FailedHistory:]...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].completed(), out[j].completed()
		if !a.Equal(b) {
			return a.Before(b)
		}
		return out[i].Name < out[j].Name
	})
	names := make([]string, 0, len(out))
	for _, e := range out {
		names = append(names, e.Name)
	}
	return names
}
