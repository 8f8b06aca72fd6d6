package unreachable

import (
	"fmt"
	"testing"
	"time"
)

// unspread is a key whose delays are not shortened at all, found by
// TestSpread's search; any key's stay within a quarter of these.
var unspread = keyWithSpread(func(f float64) bool { return f < 0.001 })

func keyWithSpread(ok func(float64) bool) string {
	for i := 0; ; i++ {
		if k := fmt.Sprintf("uid-%d", i); ok(spread(k)) {
			return k
		}
	}
}

func TestDelayGrowsToItsCapWhileNothingAnswers(t *testing.T) {
	var s Streak
	var got []time.Duration
	for range 6 {
		s = s.Observe(false, 1)
		got = append(got, s.Delay(unspread))
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays after %d passes without an answer: got %v, want %v", len(want), got, want)
		}
	}
}

func TestAnAnswerEndsTheStreak(t *testing.T) {
	s := Streak{Passes: 4, Generation: 3}.Observe(true, 3)
	if s != (Streak{}) || s.Delay("k") != 0 {
		t.Fatalf("after an answer: %+v with delay %v, want no streak and no delay", s, s.Delay("k"))
	}
	if s = s.Observe(false, 3); s.Delay("k") != First {
		t.Fatalf("the next silence after an answer waits %v, want %v", s.Delay("k"), First)
	}
}

// A spec edit must be acted on as soon as a first failure would be: the
// edit's own pass comes from its watch event, and the one after it must not
// wait out a delay earned under the old spec.
func TestASpecEditStartsTheStreakAgain(t *testing.T) {
	s := Streak{Passes: 5, Generation: 3}
	if s.Delay(unspread) != Max {
		t.Fatalf("precondition: %v", s.Delay(unspread))
	}
	s = s.Observe(false, 4)
	if s.Passes != 1 || s.Generation != 4 || s.Delay("k") != First {
		t.Fatalf("after an edit: %+v with delay %v, want one pass under generation 4 and %v", s, s.Delay("k"), First)
	}
}

func TestNoStreakNoDelay(t *testing.T) {
	if d := (Streak{}).Delay("k"); d != 0 {
		t.Fatalf("zero streak: delay %v", d)
	}
}

func TestStretch(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		requested, delay, out time.Duration
	}{
		{"a sooner requeue waits out the delay", 5 * time.Second, 20 * time.Second, 20 * time.Second},
		{"a later requeue is kept", time.Minute, 20 * time.Second, time.Minute},
		{"no requeue stays none", 0, 20 * time.Second, 0},
		{"no delay changes nothing", 500 * time.Millisecond, 0, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Stretch(tc.requested, tc.delay); got != tc.out {
				t.Fatalf("Stretch(%v, %v) = %v, want %v", tc.requested, tc.delay, got, tc.out)
			}
		})
	}
}

// Clusters cut off together are looked at apart: past the first pass each
// cluster's delay is shortened by its own amount, by up to a quarter, and
// stays the same pass after pass once at its longest.
func TestDelaysOfClustersCutOffTogetherDiffer(t *testing.T) {
	most := keyWithSpread(func(f float64) bool { return f > 0.999 })
	at := func(key string, passes int) time.Duration { return Streak{Passes: passes}.Delay(key) }
	if at(unspread, 1) != First || at(most, 1) != First {
		t.Fatalf("a first failure waits %v and %v, want %v for every cluster", at(unspread, 1), at(most, 1), First)
	}
	for passes, full := range map[int]time.Duration{2: 10 * time.Second, 3: 20 * time.Second, 4: Max, 9: Max} {
		hi, lo := at(unspread, passes), at(most, passes)
		if hi != full || lo > full*3/4+100*time.Millisecond || lo < full*3/4 {
			t.Fatalf("after %d passes: %v and %v, want %v and about %v", passes, hi, lo, full, full*3/4)
		}
	}
	if at(most, 4) != at(most, 9) {
		t.Fatalf("at its longest the delay changes: %v then %v", at(most, 4), at(most, 9))
	}
	seen := map[time.Duration]bool{}
	for i := range 20 {
		seen[at(fmt.Sprintf("cluster-%d", i), 4)] = true
	}
	if len(seen) < 10 {
		t.Fatalf("20 clusters share %d delays: %v", len(seen), seen)
	}
}
