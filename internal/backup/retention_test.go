package backup

import (
	"slices"
	"testing"
	"time"
)

func TestPrune(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ago := func(h int) time.Time { return now.Add(-time.Duration(h) * time.Hour) }
	ok := func(name string, h int) Entry {
		return Entry{Name: name, State: Succeeded, Created: ago(h).Add(-time.Minute), Completed: ago(h)}
	}
	failed := func(name string, h int) Entry { return Entry{Name: name, State: Failed, Created: ago(h)} }
	active := func(name string, h int) Entry { return Entry{Name: name, State: Active, Created: ago(h)} }

	cases := []struct {
		name    string
		entries []Entry
		r       Retention
		want    []string
	}{
		{"nothing to prune", []Entry{ok("a", 2), ok("b", 1)}, Retention{KeepLast: 2}, nil},
		{"keep the last two of three", []Entry{ok("a", 3), ok("b", 2), ok("c", 1)}, Retention{KeepLast: 2}, []string{"a"}},
		{"oldest first", []Entry{ok("c", 1), ok("a", 5), ok("b", 4), ok("d", 0)}, Retention{KeepLast: 1}, []string{"a", "b", "c"}},
		{"max age", []Entry{ok("a", 50), ok("b", 30), ok("c", 1)}, Retention{MaxAge: 48 * time.Hour}, []string{"a"}},
		{"exactly max age is kept", []Entry{ok("a", 48), ok("c", 1)}, Retention{MaxAge: 48 * time.Hour}, nil},
		{"both rules, either prunes", []Entry{ok("a", 50), ok("b", 30), ok("c", 2), ok("d", 1)},
			Retention{KeepLast: 3, MaxAge: 48 * time.Hour}, []string{"a"}},
		{"both rules, keepLast bites first", []Entry{ok("a", 3), ok("b", 2), ok("c", 1)},
			Retention{KeepLast: 1, MaxAge: 48 * time.Hour}, []string{"a", "b"}},
		{"the newest success survives max age", []Entry{ok("a", 100), ok("b", 90)}, Retention{MaxAge: time.Hour}, []string{"a"}},
		{"the only success survives everything", []Entry{ok("a", 100)}, Retention{KeepLast: 1, MaxAge: time.Minute}, nil},
		{"active snapshots are never pruned", []Entry{active("x", 200), ok("a", 3), ok("b", 2)}, Retention{KeepLast: 1}, []string{"a"}},
		{"failures do not count towards keepLast", []Entry{ok("a", 5), failed("f1", 4), failed("f2", 3), ok("b", 1)},
			Retention{KeepLast: 2}, nil},
		{"the newest success is kept behind newer failures", []Entry{ok("a", 10), failed("f1", 3), failed("f2", 2), failed("f3", 1)},
			Retention{MaxAge: time.Hour}, nil},
		{"failed history is bounded", []Entry{failed("f1", 5), failed("f2", 4), failed("f3", 3), failed("f4", 2), failed("f5", 1)},
			Retention{KeepLast: 5}, []string{"f1", "f2"}},
		{"no rules prune only failed history", []Entry{ok("a", 9), ok("b", 8), failed("f1", 5), failed("f2", 4), failed("f3", 3), failed("f4", 2)},
			Retention{}, []string{"f1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Prune(tc.entries, tc.r, now)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Prune = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPruneTiesAreStable(t *testing.T) {
	now := time.Now()
	at := now.Add(-time.Hour)
	entries := []Entry{
		{Name: "b", State: Succeeded, Completed: at},
		{Name: "a", State: Succeeded, Completed: at},
		{Name: "c", State: Succeeded, Completed: at},
	}
	// Same completion time: the name decides, newest being the largest,
	// so repeated passes agree on what to keep.
	if got := Prune(entries, Retention{KeepLast: 1}, now); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Prune = %v, want [a b]", got)
	}
}
