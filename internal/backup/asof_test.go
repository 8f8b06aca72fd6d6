package backup

import (
	"strings"
	"testing"
	"time"
)

func TestChooseAsOf(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	ok := func(name string, completed time.Time) Entry {
		return Entry{Name: name, State: Succeeded, Created: completed.Add(-time.Minute), Completed: completed}
	}
	cases := []struct {
		name    string
		entries []Entry
		before  time.Time
		want    string // "" means none found
		count   int
	}{
		{"none at all", nil, at(10), "", 0},
		{"newest before the time", []Entry{ok("a", at(1)), ok("b", at(2)), ok("c", at(3))}, at(3), "b", 3},
		{"order of the list does not matter", []Entry{ok("c", at(3)), ok("a", at(1)), ok("b", at(2))}, at(3), "b", 3},
		{"completion equal to the time is not before it", []Entry{ok("a", at(1)), ok("b", at(2))}, at(2), "a", 2},
		{"every one after the time", []Entry{ok("a", at(5)), ok("b", at(6))}, at(4), "", 2},
		{"a time past every snapshot takes the newest", []Entry{ok("a", at(1)), ok("b", at(2))}, at(60), "b", 2},
		{"started before but completed after is not taken", []Entry{ok("a", at(1)), {Name: "b", State: Succeeded, Created: at(2), Completed: at(4)}}, at(3), "a", 2},
		{"failed ones are passed over", []Entry{ok("a", at(1)), {Name: "b", State: Failed, Created: at(2), Completed: at(2)}}, at(3), "a", 1},
		{"running ones are passed over", []Entry{ok("a", at(1)), {Name: "b", State: Active, Created: at(2)}}, at(3), "a", 1},
		{"succeeded without a completion proves nothing", []Entry{ok("a", at(1)), {Name: "b", State: Succeeded, Created: at(2)}}, at(3), "a", 1},
		{"same instant goes to the greater name", []Entry{ok("s-200", at(1)), ok("s-100", at(1))}, at(2), "s-200", 2},
		{"same instant, other order", []Entry{ok("s-100", at(1)), ok("s-200", at(1))}, at(2), "s-200", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ChooseAsOf(tc.entries, tc.before)
			if got.Found != (tc.want != "") || got.Chosen != tc.want {
				t.Fatalf("ChooseAsOf = %+v, want %q", got, tc.want)
			}
			if got.Succeeded != tc.count {
				t.Errorf("Succeeded = %d, want %d", got.Succeeded, tc.count)
			}
			if got.Found && !got.Completed.Before(tc.before) {
				t.Errorf("chose a snapshot completed at %s, not before %s", got.Completed, tc.before)
			}
		})
	}
}

func TestAsOfRefusal(t *testing.T) {
	before := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	none := ChooseAsOf(nil, before).Refusal("nightly", before)
	if !strings.Contains(none, "no successful snapshot of schedule nightly exists yet") {
		t.Errorf("refusal without snapshots: %q", none)
	}
	later := ChooseAsOf([]Entry{
		{Name: "a", State: Succeeded, Completed: before.Add(2 * time.Hour)},
		{Name: "b", State: Succeeded, Completed: before.Add(time.Hour)},
	}, before).Refusal("nightly", before)
	for _, want := range []string{"completed before 2026-12-07T01:00:00Z", "earliest of its 2 completed at 2026-12-07T02:00:00Z"} {
		if !strings.Contains(later, want) {
			t.Errorf("refusal %q does not say %q", later, want)
		}
	}
}

func TestParseBefore(t *testing.T) {
	for in, want := range map[string]time.Time{
		"2026-12-07T01:00:00Z":           time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC),
		"2026-12-07T02:00:00+01:00":      time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC),
		"2026-12-07T01:00:00.500000000Z": time.Date(2026, 12, 7, 1, 0, 0, 5e8, time.UTC),
	} {
		got, err := ParseBefore(in)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseBefore(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "yesterday", "2026-12-07 01:00:00", "2026-02-31T01:00:00Z"} {
		if _, err := ParseBefore(in); err == nil {
			t.Errorf("ParseBefore(%q) accepted it", in)
		}
	}
}
