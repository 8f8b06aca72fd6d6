package backup

import (
	"testing"
	"time"
)

func TestParseSchedule(t *testing.T) {
	for _, bad := range []string{"", "* * * *", "* * * * * *", "61 * * * *", "every minute", "CRON_TZ=Nowhere/Land * * * * *"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("ParseSchedule(%q) accepted it", bad)
		}
	}
	for _, good := range []string{"*/1 * * * *", "0 3 * * 1-5", "@hourly", "@every 90m", "CRON_TZ=Europe/Berlin 0 2 * * *"} {
		if _, err := ParseSchedule(good); err != nil {
			t.Errorf("ParseSchedule(%q): %v", good, err)
		}
	}
}

func TestScheduleIsUTCUnlessAZoneIsGiven(t *testing.T) {
	// Whatever zone the process runs in, a plain expression is UTC.
	prev := time.Local
	time.Local = time.FixedZone("far-east", 9*3600)
	defer func() { time.Local = prev }()

	s, err := ParseSchedule("0 2 * * *")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if got, want := s.Next(from), time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("next tick %v, want %v (02:00 UTC)", got, want)
	}
	berlin, err := ParseSchedule("CRON_TZ=Europe/Berlin 0 2 * * *")
	if err != nil {
		t.Fatal(err)
	}
	// 02:00 in Berlin in December is 01:00 UTC.
	if got, want := berlin.Next(from), time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("next Berlin tick %v, want %v", got, want)
	}
}

func TestTicks(t *testing.T) {
	minute, err := ParseSchedule("*/1 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		last, now time.Time
		due       time.Time
		missed    int
		next      time.Time
		schedule  string
		wantNoDue bool
	}{
		{name: "not due yet", last: t0, now: t0.Add(30 * time.Second), wantNoDue: true, next: t0.Add(time.Minute)},
		{name: "exactly at the tick", last: t0, now: t0.Add(time.Minute), due: t0.Add(time.Minute), missed: 1, next: t0.Add(2 * time.Minute)},
		{name: "just after the tick", last: t0, now: t0.Add(61 * time.Second), due: t0.Add(time.Minute), missed: 1, next: t0.Add(2 * time.Minute)},
		{name: "an hour of downtime is one run for the latest tick", last: t0, now: t0.Add(time.Hour + 30*time.Second),
			due: t0.Add(time.Hour), missed: 60, next: t0.Add(61 * time.Minute)},
		{name: "a created schedule owes no earlier ticks", last: t0.Add(10 * time.Second), now: t0.Add(20 * time.Second),
			wantNoDue: true, next: t0.Add(time.Minute)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Ticks(minute, tc.last, tc.now)
			if tc.wantNoDue != got.Due.IsZero() || (!tc.wantNoDue && !got.Due.Equal(tc.due)) {
				t.Fatalf("due %v, want %v (none: %v)", got.Due, tc.due, tc.wantNoDue)
			}
			if got.Missed != tc.missed {
				t.Fatalf("missed %d, want %d", got.Missed, tc.missed)
			}
			if !got.Next.Equal(tc.next) {
				t.Fatalf("next %v, want %v", got.Next, tc.next)
			}
		})
	}
}

func TestTicksAcrossMonthEndsAndLeapDays(t *testing.T) {
	// The 31st exists in some months only, the 29th of February in some years.
	s, err := ParseSchedule("0 0 31 * *")
	if err != nil {
		t.Fatal(err)
	}
	last := time.Date(2027, 1, 31, 0, 0, 0, 0, time.UTC)
	got := Ticks(s, last, time.Date(2027, 4, 15, 0, 0, 0, 0, time.UTC))
	if want := time.Date(2027, 3, 31, 0, 0, 0, 0, time.UTC); !got.Due.Equal(want) || got.Missed != 1 {
		t.Fatalf("due %v (missed %d), want %v once: February and April have no 31st", got.Due, got.Missed, want)
	}
	leap, err := ParseSchedule("0 12 29 2 *")
	if err != nil {
		t.Fatal(err)
	}
	if next := Ticks(leap, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)).Next; !next.Equal(time.Date(2028, 2, 29, 12, 0, 0, 0, time.UTC)) {
		t.Fatalf("next leap-day tick %v, want 2028-02-29 12:00", next)
	}
}

func TestInterval(t *testing.T) {
	for spec, want := range map[string]time.Duration{
		"*/1 * * * *":  time.Minute,
		"@hourly":      time.Hour,
		"*/15 * * * *": 15 * time.Minute,
		"@every 90m":   90 * time.Minute,
	} {
		s, err := ParseSchedule(spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := Interval(s, time.Date(2026, 12, 1, 10, 7, 0, 0, time.UTC)); got != want {
			t.Errorf("Interval(%q) = %v, want %v", spec, got, want)
		}
	}
}
