package chaos

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sampleReport() *Report {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &Report{
		Seed: 1234, Started: t0, Duration: Seconds(5 * time.Minute),
		Clusters: []ClusterInfo{{Name: "c3", Replicas: 3}, {Name: "c5", Replicas: 5}},
		Faults: []FaultRecord{
			{Kind: Kill, Cluster: "c3", Step: "c3#0", ToReady: Seconds(8 * time.Second)},
			{Kind: WipeSeed, Cluster: "c5", Step: "c5#0", ToReady: Seconds(41 * time.Second)},
			{Kind: Kill, Cluster: "c5", Step: "c5#1", ToReady: Seconds(12 * time.Second)},
			{Kind: OperatorDown, Step: "global#0", ToReady: Seconds(30 * time.Second)},
		},
		Epochs: []EpochRecord{
			{Cluster: "c3", Index: 0, Operations: 1000, Acknowledged: 300, Result: "Ok", LongestWriteOutage: Seconds(2 * time.Second),
				WritesChecked: 300, Recovered: true, HashRevision: 90, Hashes: []MemberHash{{Member: "a"}, {Member: "b"}, {Member: "c"}},
				KubeWrites: 400, WatchEvents: 790, WatchCompactions: 1},
			{Cluster: "c5", Index: 3, Operations: 2000, Acknowledged: 600, Result: "Ok", LongestWriteOutage: Seconds(3500 * time.Millisecond), OutageStarted: t0.Add(time.Minute),
				WritesChecked: 600, KubeWrites: 200, WatchEvents: 400, WatchCompactions: 1},
		},
		SelfTest: &SelfTestRecord{Caught: true, Result: "Illegal", Operations: 900, Cluster: "c3", Epoch: 0},
	}
	r.Summarize()
	return r
}

func TestSummarize(t *testing.T) {
	r := sampleReport()
	if r.FaultsTotal != 4 || r.KindsSeen != 3 || r.FaultsByKind[Kill] != 2 {
		t.Fatalf("faults %d, kinds %d, by kind %v", r.FaultsTotal, r.KindsSeen, r.FaultsByKind)
	}
	if r.LongestToReady.Kind != WipeSeed || r.LongestToReady.Took != Seconds(41*time.Second) || r.ToReadyByKind[Kill] != Seconds(12*time.Second) {
		t.Fatalf("to Ready: %+v, by kind %v", r.LongestToReady, r.ToReadyByKind)
	}
	if r.Operations != 3000 || r.Acknowledged != 900 || r.LongestWriteOutage != Seconds(3500*time.Millisecond) || r.WriteOutageCluster != "c5" || r.WriteOutageEpoch != 3 {
		t.Fatalf("ops %d, acked %d, outage %s in %s/%d", r.Operations, r.Acknowledged, r.LongestWriteOutage, r.WriteOutageCluster, r.WriteOutageEpoch)
	}
	if r.Overlaps != 0 {
		t.Fatalf("overlaps %d in steps of one fault each", r.Overlaps)
	}
	two := sampleReport()
	two.Faults = append(two.Faults, FaultRecord{Kind: PauseLeader, Cluster: "c5", Step: "c5#1"}, FaultRecord{Kind: Kill, Cluster: "c3", Step: "global#0"})
	two.Summarize()
	if two.Overlaps != 1 {
		t.Fatalf("overlaps %d, want the one step of c5 with two faults", two.Overlaps)
	}
	if r.WritesChecked != 900 || r.HashChecks != 1 || r.MembersHashed != 3 || r.RecoveredEpochs != 1 {
		t.Fatalf("writes checked %d, hash checks %d of %d members, %d epochs recovered", r.WritesChecked, r.HashChecks, r.MembersHashed, r.RecoveredEpochs)
	}
	if r.KubeWrites != 600 || r.WatchEvents != 1190 || r.WatchCompactions != 2 || r.WatchViolations != 0 {
		t.Fatalf("kube writes %d, watch events %d, compactions %d, watch violations %d", r.KubeWrites, r.WatchEvents, r.WatchCompactions, r.WatchViolations)
	}
	if !r.Passed() {
		t.Fatal("a clean run did not pass")
	}
	for name, spoil := range map[string]func(*Report){
		"violation":    func(r *Report) { r.Epochs[0].Result = "Illegal" },
		"inconclusive": func(r *Report) { r.Epochs[0].Result = "Unknown" },
		"lost":         func(r *Report) { r.Epochs[1].Lost = []string{"k holds v1"} },
		"invariant":    func(r *Report) { r.InvariantViolations = []Violation{{InvReady, "x"}} },
		"error":        func(r *Report) { r.Error = "stopped" },
		"self-test":    func(r *Report) { r.SelfTest.Caught = false },
		"watch":        func(r *Report) { r.Epochs[1].WatchViolations = []Violation{{InvWatchReliable, "w missed 12"}} },
	} {
		r := sampleReport()
		spoil(r)
		r.Summarize()
		if r.Passed() {
			t.Errorf("%s: passed", name)
		}
	}
	r.Epochs[0].Result = "Illegal"
	r.Epochs[1].Lost = []string{"a", "b"}
	r.Epochs[1].WatchViolations = []Violation{{InvWatchPrevKV, "x"}}
	r.Summarize()
	if r.Violations != 1 || r.LostWrites != 2 || r.WatchViolations != 1 {
		t.Fatalf("violations %d, lost %d, watch violations %d", r.Violations, r.LostWrites, r.WatchViolations)
	}
	if table := r.Table(); !strings.Contains(table, "c5 history 3: watch-prevkv: x") {
		t.Errorf("the table lacks the watch violation:\n%s", table)
	}
	// The self-test's epoch is illegal by design: it does not count, but
	// its operations, writes and lost writes do.
	r = sampleReport()
	r.Epochs = append(r.Epochs, EpochRecord{Cluster: "c3", Index: 1, SelfTest: true, Result: "Illegal", Operations: 50, Lost: []string{"x"}})
	r.Summarize()
	if r.Violations != 0 || r.Inconclusive != 0 || r.Operations != 3050 || r.LostWrites != 1 {
		t.Fatalf("with the self-test's epoch: violations %d, inconclusive %d, operations %d, lost %d", r.Violations, r.Inconclusive, r.Operations, r.LostWrites)
	}
	// Counted as an ordinary epoch, the planted read fails the run.
	r.Epochs[2].SelfTest, r.Epochs[2].Lost = false, nil
	r.Summarize()
	if r.Violations != 1 || r.Passed() {
		t.Fatalf("the planted read counted: violations %d, passed %t", r.Violations, r.Passed())
	}
}

func TestTableAndJSON(t *testing.T) {
	r := sampleReport()
	table := r.Table()
	for _, want := range []string{
		"PASSED, seed 1234", "faults injected", "4, of 3 kinds", "kill", "2, longest to Ready 12s",
		"operations checked", "3000", "linearizability violations", "acknowledged writes lost",
		"longest fault to Ready", "41s (wipe-seed, c5#0)", "longest write outage", "3.5s (c5, history 3)",
		"caught=true, Illegal over 900 operations (c3 history 0)", "900 acknowledged writes found in etcd's history", "1 histories of 1 recovered, 3 member hashes",
		"watch events checked", "1190, against 600 Kubernetes-like writes acknowledged, through 2 compactions", "watch violations",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	path := filepath.Join(t.TempDir(), "sub", "report.json")
	if err := r.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"seed": 1234.0, "faultsTotal": 4.0, "operationsChecked": 3000.0, "linearizabilityViolations": 0.0,
		"lostWrites": 0.0, "longestWriteOutageSeconds": 3.5, "watchEventsChecked": 1190.0, "watchViolations": 0.0,
	} {
		if raw[key] != want {
			t.Errorf("%s = %v, want %v", key, raw[key], want)
		}
	}
	if got := raw["longestToReady"].(map[string]any)["seconds"]; got != 41.0 {
		t.Errorf("longestToReady.seconds = %v", got)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.LongestWriteOutage != r.LongestWriteOutage || back.FaultsByKind[Kill] != 2 {
		t.Fatalf("round trip: %+v", back)
	}
}
