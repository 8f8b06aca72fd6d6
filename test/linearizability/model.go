package linearizability

import (
	"fmt"
	"hash/fnv"

	"github.com/anishathalye/porcupine"
)

// Kind is the kind of a call.
type Kind string

const (
	// KindPut writes a value unconditionally.
	KindPut Kind = "put"
	// KindGet reads a key linearizably.
	KindGet Kind = "get"
	// KindCAS writes a value only if the key holds an expected value.
	KindCAS Kind = "cas"
)

// Kinds lists every kind, in a fixed order for reports.
var Kinds = []Kind{KindPut, KindGet, KindCAS}

// Input is what a call asked for.
type Input struct {
	Kind Kind
	Key  string
	// Value is what a put, or a compare-and-swap whose comparison holds,
	// writes. No two writes of a history carry the same value, so a read
	// names the one write it saw, and a lost or reordered write cannot hide
	// behind another that happened to write the same thing.
	Value string
	// Expected is the value a compare-and-swap requires; empty means the key
	// must not exist.
	Expected string
}

// Output is what a call returned.
type Output struct {
	// Unknown marks a write whose outcome the client could not learn. It may
	// have been applied at any moment after its invocation, or never.
	Unknown bool
	// Value is what a get read; empty means the key did not exist.
	Value string
	// Swapped says a compare-and-swap's comparison held and it wrote.
	Swapped bool
}

// model is a register per key: the state is the key's value, empty while the
// key does not exist. The history is partitioned by key, so each partition is
// checked on its own; porcupine's search is exponential in the concurrency of
// one partition, not in the length of the whole history.
//
// An operation of unknown outcome is given a return time after every other
// operation (see History.Check). It can therefore be linearized at any point
// after its invocation, which covers "applied then"; linearizing it last of
// all covers "never applied", since nothing observes the state afterwards.
// So the step function may treat it as applied wherever it is placed.
var model = porcupine.Model{
	Partition: partitionByKey,
	Init:      func() any { return "" },
	Step:      step,
	Hash: func(state any) uint64 {
		h := fnv.New64a()
		_, _ = h.Write([]byte(state.(string)))
		return h.Sum64()
	},
	DescribeOperation: describeOperation,
	DescribeState: func(state any) string {
		if state.(string) == "" {
			return "(absent)"
		}
		return state.(string)
	},
	DescribeOperationMetadata: func(info any) string {
		if info == nil {
			return ""
		}
		return fmt.Sprintf("endpoint %v", info)
	},
}

func step(state, input, output any) (bool, any) {
	current, in, out := state.(string), input.(Input), output.(Output)
	switch in.Kind {
	case KindPut:
		return true, in.Value
	case KindGet:
		return out.Value == current, current
	case KindCAS:
		holds := current == in.Expected
		if !out.Unknown && out.Swapped != holds {
			return false, current
		}
		if holds {
			return true, in.Value
		}
		return true, current
	default:
		return false, current
	}
}

func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	index := map[string]int{}
	var parts [][]porcupine.Operation
	for _, op := range history {
		key := op.Input.(Input).Key
		i, ok := index[key]
		if !ok {
			i = len(parts)
			index[key] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

func describeOperation(input, output any) string {
	in, out := input.(Input), output.(Output)
	var call string
	switch in.Kind {
	case KindPut:
		call = fmt.Sprintf("put(%s, %s)", in.Key, in.Value)
	case KindGet:
		call = fmt.Sprintf("get(%s)", in.Key)
	case KindCAS:
		expected := in.Expected
		if expected == "" {
			expected = "(absent)"
		}
		call = fmt.Sprintf("cas(%s, %s -> %s)", in.Key, expected, in.Value)
	default:
		call = fmt.Sprintf("%s(%s)", in.Kind, in.Key)
	}
	switch {
	case out.Unknown:
		return call + " -> unknown"
	case in.Kind == KindGet && out.Value == "":
		return call + " -> (absent)"
	case in.Kind == KindGet:
		return call + " -> " + out.Value
	case in.Kind == KindCAS && out.Swapped:
		return call + " -> swapped"
	case in.Kind == KindCAS:
		return call + " -> not swapped"
	default:
		return call + " -> ok"
	}
}
