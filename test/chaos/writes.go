package chaos

import (
	"fmt"
	"slices"
	"sort"

	"github.com/quorumctl/etcd-operator/test/linearizability"
)

// WriteEvent is one put in etcd's own history of an epoch's keys, as a watch
// from the epoch's first revision replays it.
type WriteEvent struct {
	Key      string
	Value    string
	Revision int64
}

// acknowledged reports a write the client was told took effect: a put that
// succeeded, or a compare-and-swap that swapped.
func acknowledged(op linearizability.Op) bool {
	if op.Output.Unknown {
		return false
	}
	return op.Input.Kind == linearizability.KindPut || (op.Input.Kind == linearizability.KindCAS && op.Output.Swapped)
}

// mayHaveWritten reports a call whose value may be in etcd's history: an
// acknowledged write, or a write of unknown outcome.
func mayHaveWritten(op linearizability.Op) bool {
	return acknowledged(op) || (op.Output.Unknown && op.Input.Kind != linearizability.KindGet)
}

// CheckWrites checks every write of a history against etcd's own history of
// its keys, not only against the keys' final values: each acknowledged write
// is there, once, on its key; every put there was written by a call that may
// have taken effect; and two acknowledged writes of one key, the second
// invoked after the first returned, have revisions in that order. Values are
// unique to their write, so a value names the one call that wrote it. It
// returns the count of acknowledged writes found and a description of each
// write lost, invented, repeated or reordered.
func CheckWrites(ops []linearizability.Op, events []WriteEvent) (found int, problems []string) {
	type at struct{ key, value string }
	revs := map[at][]int64{}
	for _, e := range events {
		k := at{e.Key, e.Value}
		revs[k] = append(revs[k], e.Revision)
	}
	writers := map[at]linearizability.Op{}
	acked := map[string][]linearizability.Op{}
	for _, op := range ops {
		if !mayHaveWritten(op) {
			continue
		}
		writers[at{op.Input.Key, op.Input.Value}] = op
		if !acknowledged(op) {
			continue
		}
		rs := revs[at{op.Input.Key, op.Input.Value}]
		if len(rs) == 0 {
			problems = append(problems, fmt.Sprintf("%s: the %s of %q, acknowledged at %s, is not in etcd's history", op.Input.Key, op.Input.Kind, op.Input.Value, op.Return))
			continue
		}
		found++
		acked[op.Input.Key] = append(acked[op.Input.Key], op)
	}
	for _, e := range events {
		if _, ok := writers[at{e.Key, e.Value}]; !ok {
			problems = append(problems, fmt.Sprintf("%s: revision %d holds %q, which no write that may have taken effect wrote", e.Key, e.Revision, e.Value))
		}
	}
	for k, rs := range revs {
		if len(rs) > 1 {
			problems = append(problems, fmt.Sprintf("%s: %q was applied %d times, at revisions %v", k.key, k.value, len(rs), rs))
		}
	}
	for _, key := range sortedKeys(acked) {
		problems = append(problems, checkOrder(acked[key], func(op linearizability.Op) int64 {
			return revs[at{op.Input.Key, op.Input.Value}][0]
		})...)
	}
	slices.Sort(problems)
	return found, problems
}

// checkOrder finds acknowledged writes of one key applied before a write
// that had returned before they were invoked: for each write, the latest
// revision of the writes that returned before its call must be lower.
func checkOrder(ops []linearizability.Op, rev func(linearizability.Op) int64) []string {
	byReturn := slices.Clone(ops)
	sort.Slice(byReturn, func(i, j int) bool { return byReturn[i].Return < byReturn[j].Return })
	// latest[i] is the write of highest revision among byReturn[:i+1].
	latest := make([]linearizability.Op, len(byReturn))
	for i, op := range byReturn {
		latest[i] = op
		if i > 0 && rev(latest[i-1]) > rev(op) {
			latest[i] = latest[i-1]
		}
	}
	var out []string
	for _, op := range ops {
		// The writes that returned before op was invoked.
		n := sort.Search(len(byReturn), func(i int) bool { return byReturn[i].Return >= op.Call })
		if n == 0 {
			continue
		}
		if prev := latest[n-1]; rev(prev) >= rev(op) {
			out = append(out, fmt.Sprintf("%s: %q (revision %d) was invoked at %s, after %q (revision %d) had returned at %s, yet applied before it",
				op.Input.Key, op.Input.Value, rev(op), op.Call, prev.Input.Value, rev(prev), prev.Return))
		}
	}
	return out
}
