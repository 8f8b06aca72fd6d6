package unreachable

import (
	"testing"
	"time"
)

func TestDelayGrowsToItsCapWhileNothingAnswers(t *testing.T) {
	var s Streak
	var got []time.Duration
	for range 6 {
		s = s.Observe(false, 1)
		got = append(got, s.Delay())
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
	if s != (Streak{}) || s.Delay() != 0 {
		t.Fatalf("after an answer: %+v with delay %v, want no streak and no delay", s, s.Delay())
	}
	if s = s.Observe(false, 3); s.Delay() != First {
		t.Fatalf("the next silence after an answer waits %v, want %v", s.Delay(), First)
	}
}

// A spec edit must be acted on as soon as a first failure would be: the
// edit's own pass comes from its watch event, and the one after it must not
// wait out a delay earned under the old spec.
func TestASpecEditStartsTheStreakAgain(t *testing.T) {
	s := Streak{Passes: 5, Generation: 3}
	if s.Delay() != Max {
		t.Fatalf("precondition: %v", s.Delay())
	}
	s = s.Observe(false, 4)
	if s.Passes != 1 || s.Generation != 4 || s.Delay() != First {
		t.Fatalf("after an edit: %+v with delay %v, want one pass under generation 4 and %v", s, s.Delay(), First)
	}
}

func TestNoStreakNoDelay(t *testing.T) {
	if d := (Streak{}).Delay(); d != 0 {
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
