// Package unreachable decides how soon the operator looks again at a
// cluster none of whose members answers, and how long one look may take.
// It has no I/O: the cluster controller counts the passes and applies the
// delay.
//
// A pass over a cluster that does not answer costs a worker seconds of
// timeouts, and the workers are shared by every cluster: without a bound on
// the pass and a growing delay between passes, a few clusters behind a
// drop-all NetworkPolicy hold every worker and a healthy cluster's spec
// edit waits in the queue behind them. See docs/design/0021-unreachable-backoff.md.
package unreachable

import (
	"hash/fnv"
	"time"
)

const (
	// First is the delay after the first pass that got no answer: what
	// every such pass waited before backoff.
	First = 5 * time.Second
	// Max is the longest delay between two passes over a cluster that does
	// not answer; any Kubernetes event of the cluster (a spec edit, a Pod
	// becoming ready) still brings the next pass at once.
	Max = 30 * time.Second
)

// Streak is a cluster's run of passes in a row in which no member answered.
// Its zero value is a cluster that answered, or was never looked at.
type Streak struct {
	// Passes is how many passes in a row got no answer.
	Passes int
	// Generation is the cluster's metadata.generation the run was counted
	// under: a spec edit starts the count again.
	Generation int64
}

// Observe is the streak after one more pass. A pass in which any member
// answered ends it; one under another generation than the streak's starts
// a new one, so that the pass after a spec edit comes as soon as it would
// for a first failure.
func (s Streak) Observe(answered bool, generation int64) Streak {
	switch {
	case answered:
		return Streak{}
	case s.Passes == 0 || s.Generation != generation:
		return Streak{Passes: 1, Generation: generation}
	}
	return Streak{Passes: s.Passes + 1, Generation: generation}
}

// Delay is how long after the streak's last pass the next one is due:
// 5 s, 10 s, 20 s, then 30 s for as long as nothing answers; zero when
// the cluster answered, which leaves the pass's own requeue untouched.
//
// From the second pass on, each delay is shortened by up to a quarter, by
// an amount fixed by key (the cluster's UID): clusters cut off together,
// by one NetworkPolicy or one outage, would otherwise be looked at
// together, and hold the workers together for the length of a look,
// however rarely. Fixed per cluster rather than drawn each pass, so the
// delay a cluster reports stays the same once it is at its longest.
func (s Streak) Delay(key string) time.Duration {
	if s.Passes <= 0 {
		return 0
	}
	d := First
	for i := 1; i < s.Passes && d < Max; i++ {
		d *= 2
	}
	d = min(d, Max)
	if s.Passes == 1 {
		return d
	}
	return (d - time.Duration(float64(d/4)*spread(key))).Round(100 * time.Millisecond)
}

// spread maps key to [0, 1), evenly over keys.
func spread(key string) float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	// FNV's high bits barely move with a key's last byte; splitmix64's
	// finalizer spreads every bit over all of them.
	x := h.Sum64()
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

// Stretch is the requeue of a pass, requested by its phases, after backoff:
// raised to delay when it is sooner, and otherwise untouched. No requeue
// (zero) stays none: the pass waits on watches alone, and backoff never
// adds a look the phases did not ask for.
func Stretch(requested, delay time.Duration) time.Duration {
	if requested <= 0 || requested >= delay {
		return requested
	}
	return delay
}
