package linearizability_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/test/linearizability"
)

type (
	in  = linearizability.Input
	out = linearizability.Output
)

const (
	put = linearizability.KindPut
	get = linearizability.KindGet
	cas = linearizability.KindCAS
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// op is a completed call of client c from call to ret (in milliseconds).
func op(c int, input in, output out, call, ret int) linearizability.Op {
	return linearizability.Op{ClientID: c, Endpoint: "e", Input: input, Output: output, Call: ms(call), Return: ms(ret)}
}

// unknown is a write of unknown outcome invoked at call. Its client gave up
// on it a millisecond later, yet it may take effect at any time after.
func unknown(c int, input in, call int) linearizability.Op {
	return linearizability.Op{ClientID: c, Endpoint: "e", Input: input, Output: out{Unknown: true}, Call: ms(call), Return: ms(call + 1)}
}

func putOK(c int, key, value string, call, ret int) linearizability.Op {
	return op(c, in{Kind: put, Key: key, Value: value}, out{}, call, ret)
}

func read(c int, key, value string, call, ret int) linearizability.Op {
	return op(c, in{Kind: get, Key: key}, out{Value: value}, call, ret)
}

func swap(c int, key, expected, value string, swapped bool, call, ret int) linearizability.Op {
	return op(c, in{Kind: cas, Key: key, Expected: expected, Value: value}, out{Swapped: swapped}, call, ret)
}

func check(t *testing.T, ops ...linearizability.Op) linearizability.Report {
	t.Helper()
	h := linearizability.NewHistory()
	for _, o := range ops {
		h.Add(o)
	}
	report, err := h.Check(linearizability.CheckOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	return report
}

func TestCheck(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		ops  []linearizability.Op
		want porcupine.CheckResult
	}{
		{
			name: "concurrent calls on two keys, each read seeing a write it overlaps or follows",
			ops: []linearizability.Op{
				putOK(0, "x", "a", 0, 10),
				read(1, "x", "", 2, 4), // overlaps the put: may precede it
				read(2, "x", "a", 5, 15),
				putOK(3, "y", "p", 1, 3),
				putOK(0, "x", "b", 20, 30),
				read(1, "x", "a", 21, 22), // the second put is still in flight
				read(2, "x", "b", 31, 35),
				read(3, "y", "p", 4, 40),
			},
			want: porcupine.Ok,
		},
		{
			name: "a read after an acknowledged write misses it",
			ops: []linearizability.Op{
				putOK(0, "x", "a", 0, 10),
				read(1, "x", "", 20, 25),
			},
			want: porcupine.Illegal,
		},
		{
			name: "a read returns an overwritten value after the overwrite was acknowledged",
			ops: []linearizability.Op{
				putOK(0, "x", "a", 0, 10),
				putOK(0, "x", "b", 20, 30),
				read(1, "x", "a", 40, 45),
			},
			want: porcupine.Illegal,
		},
		{
			name: "two reads in sequence disagree on the order of two writes",
			ops: []linearizability.Op{
				putOK(0, "x", "a", 0, 100),
				putOK(1, "x", "b", 0, 100),
				read(2, "x", "a", 10, 20),
				read(2, "x", "b", 30, 40),
				read(3, "x", "a", 50, 60),
			},
			want: porcupine.Illegal,
		},
		{
			name: "a read returns a value nobody wrote",
			ops: []linearizability.Op{
				read(0, "x", "ghost", 0, 10),
			},
			want: porcupine.Illegal,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			report := check(t, tc.ops...)
			g.Expect(report.Result).To(Equal(tc.want), report.String())
			g.Expect(report.Operations).To(Equal(len(tc.ops)))
			if tc.want == porcupine.Ok {
				g.Expect(report.Err()).NotTo(HaveOccurred())
			} else {
				g.Expect(report.Err()).To(MatchError(ContainSubstring("not linearizable")))
			}
		})
	}
}

func TestCheckUnknownOutcome(t *testing.T) {
	t.Parallel()
	lost := unknown(0, in{Kind: put, Key: "x", Value: "a"}, 0)
	cases := []struct {
		name string
		ops  []linearizability.Op
		want porcupine.CheckResult
	}{
		{
			name: "a later read sees the write: it was applied",
			ops:  []linearizability.Op{lost, read(1, "x", "a", 20, 25)},
			want: porcupine.Ok,
		},
		{
			name: "a later read does not see the write: it was not applied",
			ops:  []linearizability.Op{lost, read(1, "x", "", 20, 25)},
			want: porcupine.Ok,
		},
		{
			name: "it was applied only after the first later read",
			ops:  []linearizability.Op{lost, read(1, "x", "", 20, 25), read(1, "x", "a", 30, 35)},
			want: porcupine.Ok,
		},
		{
			name: "once seen it cannot be unseen",
			ops:  []linearizability.Op{lost, read(1, "x", "a", 20, 25), read(1, "x", "", 30, 35)},
			want: porcupine.Illegal,
		},
		{
			name: "it cannot be applied before it was invoked",
			ops: []linearizability.Op{
				read(1, "x", "a", 0, 5),
				unknown(0, in{Kind: put, Key: "x", Value: "a"}, 10),
			},
			want: porcupine.Illegal,
		},
		{
			name: "it may land between two acknowledged writes",
			ops: []linearizability.Op{
				putOK(1, "x", "p", 0, 1),
				unknown(0, in{Kind: put, Key: "x", Value: "a"}, 2),
				putOK(1, "x", "q", 10, 11),
				read(2, "x", "q", 20, 21),
			},
			want: porcupine.Ok,
		},
		{
			name: "an unknown compare-and-swap whose comparison held, seen applied",
			ops: []linearizability.Op{
				putOK(1, "x", "p", 0, 1),
				unknown(0, in{Kind: cas, Key: "x", Expected: "p", Value: "a"}, 2),
				read(2, "x", "a", 20, 21),
			},
			want: porcupine.Ok,
		},
		{
			name: "an unknown compare-and-swap whose comparison held, seen not applied",
			ops: []linearizability.Op{
				putOK(1, "x", "p", 0, 1),
				unknown(0, in{Kind: cas, Key: "x", Expected: "p", Value: "a"}, 2),
				read(2, "x", "p", 20, 21),
			},
			want: porcupine.Ok,
		},
		{
			name: "an unknown compare-and-swap whose comparison never held cannot have written",
			ops: []linearizability.Op{
				putOK(1, "x", "p", 0, 1),
				unknown(0, in{Kind: cas, Key: "x", Expected: "zzz", Value: "a"}, 2),
				read(2, "x", "a", 20, 21),
			},
			want: porcupine.Illegal,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			report := check(t, tc.ops...)
			g.Expect(report.Result).To(Equal(tc.want), report.String())
		})
	}
}

func TestCheckCompareAndSwap(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		ops  []linearizability.Op
		want porcupine.CheckResult
	}{
		{
			name: "a swap of an absent key, then a swap of its value",
			ops: []linearizability.Op{
				swap(0, "x", "", "a", true, 0, 10),
				swap(1, "x", "a", "b", true, 20, 30),
				read(2, "x", "b", 40, 45),
			},
			want: porcupine.Ok,
		},
		{
			name: "a refused swap while the value differs",
			ops: []linearizability.Op{
				putOK(0, "x", "a", 0, 10),
				swap(1, "x", "zzz", "b", false, 20, 30),
				read(2, "x", "a", 40, 45),
			},
			want: porcupine.Ok,
		},
		{
			name: "a refused swap although the value matched",
			ops: []linearizability.Op{
				putOK(0, "x", "a", 0, 10),
				swap(1, "x", "a", "b", false, 20, 30),
			},
			want: porcupine.Illegal,
		},
		{
			name: "a swap although the value differed",
			ops: []linearizability.Op{
				putOK(0, "x", "a", 0, 10),
				swap(1, "x", "zzz", "b", true, 20, 30),
			},
			want: porcupine.Illegal,
		},
		{
			name: "two concurrent swaps from the same value both succeed",
			ops: []linearizability.Op{
				putOK(0, "x", "a", 0, 10),
				swap(1, "x", "a", "b", true, 20, 30),
				swap(2, "x", "a", "c", true, 20, 30),
			},
			want: porcupine.Illegal,
		},
		{
			name: "two concurrent swaps from the same value, one wins",
			ops: []linearizability.Op{
				putOK(0, "x", "a", 0, 10),
				swap(1, "x", "a", "b", false, 20, 30),
				swap(2, "x", "a", "c", true, 20, 30),
				read(0, "x", "c", 40, 45),
			},
			want: porcupine.Ok,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			report := check(t, tc.ops...)
			g.Expect(report.Result).To(Equal(tc.want), report.String())
		})
	}
}

func TestReportCounts(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := linearizability.NewHistory()
	for _, o := range []linearizability.Op{
		putOK(0, "x", "a", 0, 10),
		swap(1, "x", "a", "b", true, 20, 30),
		swap(1, "x", "a", "c", false, 40, 50),
		read(2, "x", "b", 60, 200),
		unknown(3, in{Kind: put, Key: "y", Value: "p"}, 5),
		// A read of unknown outcome tells nothing: it counts as failed.
		{ClientID: 4, Input: in{Kind: get, Key: "x"}, Output: out{Unknown: true}, Call: ms(1)},
	} {
		h.Add(o)
	}
	h.AddFailed(put)
	h.AddFailed(get)

	report, err := h.Check(linearizability.CheckOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(report.Result).To(Equal(porcupine.Ok), report.String())
	g.Expect(report.Operations).To(Equal(5))
	g.Expect(report.ByKind).To(Equal(map[linearizability.Kind]int{put: 2, cas: 2, get: 1}))
	g.Expect(report.Acknowledged).To(Equal(2), "the put and the swap that swapped")
	g.Expect(report.Unknown).To(Equal(1))
	g.Expect(report.Failed).To(Equal(map[linearizability.Kind]int{put: 1, get: 2}))
	// Writes completed at 10, 30 and 50 ms; the history ends with the read at 200 ms.
	g.Expect(report.LongestWriteOutage).To(Equal(ms(150)))
	g.Expect(report.WriteOutageStart).To(Equal(ms(50)))
	g.Expect(report.String()).To(ContainSubstring("5 operations (2 put, 1 get, 2 cas)"))
	g.Expect(h.Ops()).To(HaveLen(5))
}

func TestWriteOutage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		ops       []linearizability.Op
		longest   time.Duration
		startedAt time.Duration
	}{
		{
			name:      "before the first write",
			ops:       []linearizability.Op{putOK(0, "x", "a", 0, 300), putOK(0, "x", "b", 301, 310)},
			longest:   ms(300),
			startedAt: 0,
		},
		{
			name: "between two writes, unknown writes and reads not counting",
			ops: []linearizability.Op{
				putOK(0, "x", "a", 0, 10),
				unknown(1, in{Kind: put, Key: "x", Value: "b"}, 11),
				read(2, "x", "a", 12, 100),
				putOK(0, "x", "c", 110, 120),
				read(2, "x", "c", 121, 130),
			},
			longest:   ms(110),
			startedAt: ms(10),
		},
		{
			name:      "no write completed at all",
			ops:       []linearizability.Op{read(0, "x", "", 0, 50)},
			longest:   ms(50),
			startedAt: 0,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			report := check(t, tc.ops...)
			g.Expect(report.LongestWriteOutage).To(Equal(tc.longest))
			g.Expect(report.WriteOutageStart).To(Equal(tc.startedAt))
		})
	}
}

func TestVisualizationOnViolation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		ops   []linearizability.Op
		wrote bool
	}{
		{name: "illegal", ops: []linearizability.Op{putOK(0, "x", "a", 0, 10), read(1, "x", "", 20, 25)}, wrote: true},
		{name: "linearizable", ops: []linearizability.Op{putOK(0, "x", "a", 0, 10), read(1, "x", "a", 20, 25)}, wrote: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			h := linearizability.NewHistory()
			for _, o := range tc.ops {
				h.Add(o)
			}
			path := filepath.Join(t.TempDir(), "nested", "history.html")
			report, err := h.Check(linearizability.CheckOptions{VisualizationPath: path})
			g.Expect(err).NotTo(HaveOccurred())
			_, statErr := os.Stat(path)
			if !tc.wrote {
				g.Expect(statErr).To(MatchError(os.ErrNotExist))
				g.Expect(report.Visualization).To(BeEmpty())
				return
			}
			g.Expect(statErr).NotTo(HaveOccurred())
			g.Expect(report.Visualization).To(Equal(path))
			html, err := os.ReadFile(path)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(html)).To(ContainSubstring("put(x, a)"), "operations are described for the reader")
			g.Expect(report.Err()).To(MatchError(ContainSubstring(path)))
		})
	}
}
