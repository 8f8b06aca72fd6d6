package backup

import (
	"fmt"
	"time"
)

// AsOf is what ChooseAsOf found among a schedule's snapshots.
type AsOf struct {
	// Found is false when no successful snapshot completed before the time.
	Found bool
	// Chosen is the snapshot's name, and Completed its completion.
	Chosen    string
	Completed time.Time
	// Succeeded counts the successful snapshots with a completion time
	// that were looked at, and Earliest is the first of those completions:
	// the refusal says how far back the schedule reaches.
	Succeeded int
	Earliest  time.Time
}

// ChooseAsOf picks the newest successful snapshot that completed strictly
// before `before`. The completion is compared, not the start: the start
// recorded is when the snapshot Job was created, and etcd begins to stream
// (which fixes the revision the snapshot holds) some time after that, Pod
// scheduling and image pulls later. Only the completion is known to come
// after that moment, so only it proves that the snapshot holds no write
// made at or after `before`. A successful entry without a completion time
// proves nothing and is passed over. Two completions in the same instant
// (the API keeps seconds) go to the greater name, so the choice does not
// depend on list order.
func ChooseAsOf(entries []Entry, before time.Time) AsOf {
	var a AsOf
	for _, e := range entries {
		if e.State != Succeeded || e.Completed.IsZero() {
			continue
		}
		a.Succeeded++
		if a.Earliest.IsZero() || e.Completed.Before(a.Earliest) {
			a.Earliest = e.Completed
		}
		if !e.Completed.Before(before) {
			continue
		}
		if !a.Found || e.Completed.After(a.Completed) || e.Completed.Equal(a.Completed) && e.Name > a.Chosen {
			a.Found, a.Chosen, a.Completed = true, e.Name, e.Completed
		}
	}
	return a
}

// Refusal says why nothing was chosen, for the condition and the Event.
func (a AsOf) Refusal(schedule string, before time.Time) string {
	t := before.UTC().Format(time.RFC3339)
	if a.Succeeded == 0 {
		return fmt.Sprintf("no successful snapshot of schedule %s exists yet; none can be restored as of %s", schedule, t)
	}
	return fmt.Sprintf("no successful snapshot of schedule %s completed before %s; the earliest of its %d completed at %s",
		schedule, t, a.Succeeded, a.Earliest.UTC().Format(time.RFC3339))
}

// ParseBefore reads fromSchedule.before. The API admits only RFC 3339
// times, so an error here means the object bypassed validation.
func ParseBefore(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("fromSchedule.before %q is not an RFC 3339 time: %w", s, err)
	}
	return t, nil
}
