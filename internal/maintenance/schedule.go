package maintenance

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// DefaultWindow is how long after each tick of a schedule a defragmentation
// may start when the spec gives no window.
const DefaultWindow = time.Hour

// Window limits when routine defragmentation may start: within Length after
// each tick of a cron schedule. A nil *Window is always open.
type Window struct {
	schedule cron.Schedule
	spec     string
	length   time.Duration
}

// ParseWindow reads a 5-field cron expression or a descriptor (@daily,
// @every 6h, ...), in UTC unless it starts with CRON_TZ=<zone>. An empty
// schedule means no window: nil, nil.
func ParseWindow(schedule string, length time.Duration) (*Window, error) {
	if schedule == "" {
		return nil, nil
	}
	s, err := cron.ParseStandard(schedule)
	if err != nil {
		return nil, fmt.Errorf("failed to parse schedule %q: %w", schedule, err)
	}
	// Without a zone the parser takes the process's local one; the
	// operator promises UTC, whatever zone its Pod runs in.
	if spec, ok := s.(*cron.SpecSchedule); ok && spec.Location == time.Local {
		spec.Location = time.UTC
	}
	if length <= 0 {
		length = DefaultWindow
	}
	return &Window{schedule: s, spec: schedule, length: length}, nil
}

// Open reports whether a defragmentation may start at now: a tick of the
// schedule lies in (now-length, now].
func (w *Window) Open(now time.Time) bool {
	if w == nil {
		return true
	}
	next := w.schedule.Next(now.Add(-w.length))
	return !next.IsZero() && !next.After(now)
}

// NextOpen is when the window next opens after now; zero for a nil window
// or a schedule that never ticks again.
func (w *Window) NextOpen(now time.Time) time.Time {
	if w == nil {
		return time.Time{}
	}
	return w.schedule.Next(now)
}

func (w *Window) String() string {
	if w == nil {
		return "at any time"
	}
	return fmt.Sprintf("within %s of each tick of %q", w.length, w.spec)
}
