package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/quorumctl/etcd-operator/test/linearizability"
)

func swap(key, value string, swapped bool, call, ret time.Duration) linearizability.Op {
	return linearizability.Op{Input: linearizability.Input{Kind: linearizability.KindCAS, Key: key, Value: value},
		Output: linearizability.Output{Swapped: swapped}, Call: call, Return: ret}
}

func unknownOutcome(op linearizability.Op) linearizability.Op {
	op.Output = linearizability.Output{Unknown: true}
	return op
}

// A history in which everything is as it must be: three acknowledged writes
// of k in order, an unknown write applied in between, another never applied,
// a compare-and-swap that did not swap and is not there, and a read.
func goodWrites() ([]linearizability.Op, []WriteEvent) {
	ops := []linearizability.Op{
		put("k", "v1", 0, 10),
		unknownOutcome(put("k", "v2", 12, 0)),
		swap("k", "v3", true, 20, 30),
		swap("k", "v4", false, 31, 35),
		unknownOutcome(put("k", "v5", 36, 0)),
		put("k", "v6", 40, 50),
		put("j", "v7", 5, 45),
		{Input: linearizability.Input{Kind: linearizability.KindGet, Key: "k"}, Output: linearizability.Output{Value: "v6"}, Call: 60, Return: 61},
	}
	events := []WriteEvent{
		{"k", "v1", 2}, {"k", "v2", 3}, {"j", "v7", 4}, {"k", "v3", 5}, {"k", "v6", 9},
	}
	return ops, events
}

func TestCheckWritesPassesAHistoryThatKeptEveryWrite(t *testing.T) {
	ops, events := goodWrites()
	found, problems := CheckWrites(ops, events)
	if len(problems) != 0 || found != 4 {
		t.Fatalf("found %d of 4, problems %v", found, problems)
	}
}

func TestCheckWritesReportsEachBrokenWrite(t *testing.T) {
	cases := []struct {
		name   string
		spoil  func(ops []linearizability.Op, events []WriteEvent) ([]linearizability.Op, []WriteEvent)
		detail string
	}{
		{"an acknowledged put is missing", func(ops []linearizability.Op, ev []WriteEvent) ([]linearizability.Op, []WriteEvent) {
			return ops, append(ev[:0:0], ev[0], ev[1], ev[2], ev[4])
		}, `the cas of "v3", acknowledged at 30ns, is not in etcd's history`},
		{"a value no write wrote", func(ops []linearizability.Op, ev []WriteEvent) ([]linearizability.Op, []WriteEvent) {
			return ops, append(ev, WriteEvent{"k", "v99", 10})
		}, `revision 10 holds "v99", which no write`},
		{"a compare-and-swap that did not swap is there", func(ops []linearizability.Op, ev []WriteEvent) ([]linearizability.Op, []WriteEvent) {
			return ops, append(ev, WriteEvent{"k", "v4", 8})
		}, `revision 8 holds "v4"`},
		{"a write applied twice", func(ops []linearizability.Op, ev []WriteEvent) ([]linearizability.Op, []WriteEvent) {
			return ops, append(ev, WriteEvent{"k", "v6", 10})
		}, `"v6" was applied 2 times`},
		{"a value on another key", func(ops []linearizability.Op, ev []WriteEvent) ([]linearizability.Op, []WriteEvent) {
			ev[2].Key = "k"
			return ops, ev
		}, `j: the put of "v7", acknowledged at 45ns, is not in etcd's history`},
		{"writes applied out of real-time order", func(ops []linearizability.Op, ev []WriteEvent) ([]linearizability.Op, []WriteEvent) {
			ev[3].Revision = 1
			return ops, ev
		}, `"v3" (revision 1) was invoked at 20ns, after "v1" (revision 2) had returned at 10ns`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ops, events := goodWrites()
			ops, events = c.spoil(ops, events)
			_, problems := CheckWrites(ops, events)
			if len(problems) == 0 || !strings.Contains(strings.Join(problems, "\n"), c.detail) {
				t.Fatalf("want a problem with %q, got %v", c.detail, problems)
			}
		})
	}
}

// Overlapping writes may be applied in either order.
func TestCheckWritesAcceptsConcurrentWritesInEitherOrder(t *testing.T) {
	ops := []linearizability.Op{put("k", "a", 0, 20), put("k", "b", 5, 15)}
	for _, ev := range [][]WriteEvent{{{"k", "a", 2}, {"k", "b", 3}}, {{"k", "b", 2}, {"k", "a", 3}}} {
		if _, problems := CheckWrites(ops, ev); len(problems) != 0 {
			t.Fatalf("%v: %v", ev, problems)
		}
	}
}
