package linearizability

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// DefaultCheckTimeout bounds porcupine's search when CheckOptions sets none.
const DefaultCheckTimeout = 2 * time.Minute

// Op is one call as its client saw it.
type Op struct {
	// ClientID names a sequence of calls that did not overlap: porcupine's
	// visualization draws one lane per ID. A client takes a new ID after a
	// call of unknown outcome, since that call never ends.
	ClientID int
	// Endpoint is where the client sent the call, for the visualization.
	Endpoint string
	Input    Input
	Output   Output
	// Call and Return are when the call was invoked and when its answer
	// arrived, on the history's clock. Return is ignored when the outcome is
	// unknown.
	Call, Return time.Duration
}

// History is the record of a workload's calls. It is safe for concurrent use.
type History struct {
	start time.Time

	mu         sync.Mutex
	end        time.Duration
	ops        []Op
	failed     map[Kind]int
	nextClient int
}

// NewHistory starts a history whose clock reads zero now.
func NewHistory() *History {
	return &History{start: time.Now(), failed: map[Kind]int{}}
}

// Now reads the history's clock. time.Since uses the monotonic clock, so a
// wall-clock step cannot reorder calls.
func (h *History) Now() time.Duration { return time.Since(h.start) }

// NewClientID returns an ID no call of this history has used yet.
func (h *History) NewClientID() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := h.nextClient
	h.nextClient++
	return id
}

// Add records a call that either completed or whose outcome is unknown. A
// read of unknown outcome tells nothing and changed nothing, so it is counted
// as failed instead.
func (h *History) Add(op Op) {
	if op.Output.Unknown && op.Input.Kind == KindGet {
		h.AddFailed(KindGet)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if op.ClientID >= h.nextClient {
		h.nextClient = op.ClientID + 1
	}
	h.ops = append(h.ops, op)
}

// AddFailed counts a call that definitely failed: it is not checked, as it
// can have changed nothing.
func (h *History) AddFailed(kind Kind) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed[kind]++
}

// Close marks the end of the history: the time up to which write outages are
// measured. Without it, the end is the last response.
func (h *History) Close() {
	now := h.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.end = now
}

// Ops returns a copy of the recorded calls.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// CheckOptions tune History.Check.
type CheckOptions struct {
	// Timeout bounds the search; the result is porcupine.Unknown when it
	// runs out. Zero means DefaultCheckTimeout.
	Timeout time.Duration
	// VisualizationPath, if set, is where porcupine's HTML visualization is
	// written when the history is not proven linearizable.
	VisualizationPath string
}

// Report is the outcome of a check.
type Report struct {
	// Result is porcupine.Ok, porcupine.Illegal, or porcupine.Unknown when
	// the search ran out of time.
	Result porcupine.CheckResult
	// Operations counts the calls checked, including those of unknown outcome.
	Operations int
	// ByKind counts the calls checked, by kind.
	ByKind map[Kind]int
	// Acknowledged counts the writes known to have taken effect: puts that
	// succeeded and compare-and-swaps that swapped.
	Acknowledged int
	// Unknown counts the writes of unknown outcome, checked as possibly applied.
	Unknown int
	// Failed counts the calls that definitely failed, by kind; they are not
	// in the check.
	Failed map[Kind]int
	// LongestWriteOutage is the longest stretch of the history in which no
	// write call completed, from the start of the history to the first
	// completed write, between two of them, or from the last to the end. A
	// compare-and-swap that did not swap counts: it was still committed
	// through raft.
	LongestWriteOutage time.Duration
	// WriteOutageStart is when that stretch began, on the history's clock.
	WriteOutageStart time.Duration
	// Visualization is the file the visualization was written to, if any.
	Visualization string
}

// Err is nil when the history is proven linearizable, and otherwise says why
// not. A search that ran out of time is an error too: it proved nothing.
func (r Report) Err() error {
	switch r.Result {
	case porcupine.Ok:
		return nil
	case porcupine.Illegal:
		return fmt.Errorf("the history is not linearizable (%s)", r.summary())
	default:
		return fmt.Errorf("the linearizability check did not finish in time (%s)", r.summary())
	}
}

func (r Report) String() string {
	return fmt.Sprintf("%s: %s", r.Result, r.summary())
}

func (r Report) summary() string {
	var kinds []string
	for _, k := range Kinds {
		kinds = append(kinds, fmt.Sprintf("%d %s", r.ByKind[k], k))
	}
	var failed int
	for _, n := range r.Failed {
		failed += n
	}
	s := fmt.Sprintf("%d operations (%s), %d writes acknowledged, %d of unknown outcome, %d failed; longest write outage %s at %s",
		r.Operations, strings.Join(kinds, ", "), r.Acknowledged, r.Unknown, failed,
		r.LongestWriteOutage.Round(time.Millisecond), r.WriteOutageStart.Round(time.Millisecond))
	if r.Visualization != "" {
		s += "; visualization in " + r.Visualization
	}
	return s
}

// Check decides whether the history is linearizable. The error is only about
// writing the visualization; the verdict is in the report.
func (h *History) Check(opts CheckOptions) (Report, error) {
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	end := h.end
	failed := map[Kind]int{}
	for k, n := range h.failed {
		failed[k] = n
	}
	h.mu.Unlock()

	report := Report{Operations: len(ops), ByKind: map[Kind]int{}, Failed: failed}
	for _, op := range ops {
		report.ByKind[op.Input.Kind]++
		switch {
		case op.Output.Unknown:
			report.Unknown++
		case op.Input.Kind == KindPut || (op.Input.Kind == KindCAS && op.Output.Swapped):
			report.Acknowledged++
		}
	}
	report.LongestWriteOutage, report.WriteOutageStart = writeOutage(ops, end)

	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultCheckTimeout
	}
	result, info := porcupine.CheckOperationsVerbose(model, toPorcupine(ops), timeout)
	report.Result = result
	if result == porcupine.Ok || opts.VisualizationPath == "" {
		return report, nil
	}
	if err := os.MkdirAll(filepath.Dir(opts.VisualizationPath), 0o755); err != nil {
		return report, fmt.Errorf("failed to create the directory of %s: %w", opts.VisualizationPath, err)
	}
	if err := porcupine.VisualizePath(model, info, opts.VisualizationPath); err != nil {
		return report, fmt.Errorf("failed to write the visualization to %s: %w", opts.VisualizationPath, err)
	}
	report.Visualization = opts.VisualizationPath
	return report, nil
}

// toPorcupine converts the history. A call of unknown outcome returns after
// everything else, so it may be linearized anywhere after its invocation,
// including after every other call, which is what "never applied" looks like.
func toPorcupine(ops []Op) []porcupine.Operation {
	var last int64
	for _, op := range ops {
		last = max(last, int64(op.Call))
		if !op.Output.Unknown {
			last = max(last, int64(op.Return))
		}
	}
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		ret := int64(op.Return)
		if op.Output.Unknown {
			ret = last + 1
		}
		out = append(out, porcupine.Operation{
			ClientId: op.ClientID,
			Input:    op.Input,
			Call:     int64(op.Call),
			Output:   op.Output,
			Return:   ret,
			Metadata: op.Endpoint,
		})
	}
	return out
}

// writeOutage finds the longest stretch with no completed write between the
// start of the history and end (or the last response, if end is earlier).
func writeOutage(ops []Op, end time.Duration) (longest, at time.Duration) {
	var done []time.Duration
	for _, op := range ops {
		if op.Input.Kind != KindGet && !op.Output.Unknown {
			done = append(done, op.Return)
		}
		if !op.Output.Unknown {
			end = max(end, op.Return)
		}
	}
	slices.Sort(done)
	prev := time.Duration(0)
	for _, t := range append(done, end) {
		if gap := t - prev; gap > longest {
			longest, at = gap, prev
		}
		prev = t
	}
	return longest, at
}
