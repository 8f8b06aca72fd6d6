package backup

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// ParseSchedule reads a 5-field cron expression or a descriptor (@hourly,
// @every 1h, ...), in UTC unless it starts with CRON_TZ=<zone> (or TZ=).
func ParseSchedule(spec string) (cron.Schedule, error) {
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("failed to parse schedule %q: %w", spec, err)
	}
	// Without a zone the parser takes the process's local one; the
	// operator promises UTC, whatever zone its Pod runs in.
	if spec, ok := s.(*cron.SpecSchedule); ok && spec.Location == time.Local {
		spec.Location = time.UTC
	}
	return s, nil
}

// maxMissedTicks bounds the walk over missed ticks after a long downtime
// (a year of a once-a-minute schedule is about half a million).
const maxMissedTicks = 1 << 20

// Tick is a schedule's state at one moment.
type Tick struct {
	// Due is the most recent tick after the last one acted on and not after
	// now; zero when none is due. After downtime it stands for every tick
	// missed: the backlog is one snapshot, not one per tick.
	Due time.Time
	// Missed counts the ticks Due stands for, itself included.
	Missed int
	// Next is the first tick after now.
	Next time.Time
}

// Ticks finds what is due at now, given the last tick acted on (or, for a
// schedule that has never run, its creation time: ticks before a schedule
// existed are not owed).
func Ticks(s cron.Schedule, last, now time.Time) Tick {
	var t Tick
	for at, i := s.Next(last), 0; !at.IsZero() && !at.After(now) && i < maxMissedTicks; at, i = s.Next(at), i+1 {
		t.Due = at
		t.Missed++
	}
	t.Next = s.Next(now)
	return t
}

// Interval is the time between the two ticks after from, which the alert on
// missing snapshots doubles.
func Interval(s cron.Schedule, from time.Time) time.Duration {
	a := s.Next(from)
	return s.Next(a).Sub(a)
}
