package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Seconds is a duration that JSON writes as seconds, for the benchmarks.
type Seconds time.Duration

// MarshalJSON writes the duration in seconds, to the millisecond.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(s).Round(time.Millisecond).Seconds())
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*s = Seconds(time.Duration(f * float64(time.Second)))
	return nil
}

func (s Seconds) String() string { return time.Duration(s).Round(100 * time.Millisecond).String() }

// FaultRecord is one fault as injected.
type FaultRecord struct {
	Kind Kind `json:"kind"`
	// Cluster is the cluster hit; empty for a global fault.
	Cluster string `json:"cluster,omitempty"`
	// Victim is the member or node hit.
	Victim string `json:"victim,omitempty"`
	// Step names the step: the cluster and its step number, or global.
	Step     string    `json:"step"`
	Injected time.Time `json:"injected"`
	// ToReady is from the injection to the cluster Ready again with its
	// size, the victim recovered.
	ToReady Seconds `json:"toReadySeconds"`
	// Note says what happened instead of the plan, if anything did.
	Note string `json:"note,omitempty"`
}

// EpochRecord is the check of one stretch of a cluster's history: each step
// starts a new workload on new keys with the members of the moment.
type EpochRecord struct {
	Cluster      string `json:"cluster"`
	Index        int    `json:"index"`
	Operations   int    `json:"operations"`
	Acknowledged int    `json:"acknowledged"`
	Unknown      int    `json:"unknown"`
	Failed       int    `json:"failed"`
	// Result is porcupine's verdict with the final reads: Ok, Illegal, or
	// Unknown when the search ran out of time.
	Result             string    `json:"result"`
	LongestWriteOutage Seconds   `json:"longestWriteOutageSeconds"`
	OutageStarted      time.Time `json:"outageStarted"`
	Visualization      string    `json:"visualization,omitempty"`
	// Lost are the writes lost, invented, repeated or reordered: keys whose
	// final value no acknowledged write explains, and writes that etcd's
	// own history of the keys does not hold as acknowledged.
	Lost []string `json:"lost,omitempty"`
	// StartRevision is the cluster's revision before the epoch's first
	// call; its keys' history is replayed from there.
	StartRevision int64 `json:"startRevision"`
	// WritesChecked counts the acknowledged writes found in that history.
	WritesChecked int `json:"writesChecked"`
	// HashRevision is the revision every member hashed its store at when
	// the epoch ended, Hashes what each answered; empty when the epoch's
	// faults left no cluster to hash.
	HashRevision int64        `json:"hashRevision,omitempty"`
	Hashes       []MemberHash `json:"hashes,omitempty"`
	// Recovered: the cluster was Ready again when the epoch ended, so its
	// members were hashed and a watcher was made to meet a compaction.
	Recovered bool `json:"recovered"`
	// SelfTest marks the self-test's epoch: a planted stale read makes its
	// history illegal, which the run expects and does not count.
	SelfTest bool `json:"selfTest,omitempty"`
	// KubeWrites counts the Kubernetes-like writer's acknowledged writes,
	// WatchEvents the events its watchers received, all checked against
	// them, WatchCompactions the compactions the watchers went through.
	KubeWrites       int `json:"kubeWrites"`
	WatchEvents      int `json:"watchEvents"`
	WatchCompactions int `json:"watchCompactions"`
	// WatchViolations are the watch guarantees broken; any fails the run.
	WatchViolations []Violation `json:"watchViolations,omitempty"`
}

// SelfTestRecord is the check of the checker: a planted stale read, in the
// history of an epoch checked as every epoch is, that it must call a
// violation.
type SelfTestRecord struct {
	// Cluster and Epoch name the self-test's epoch.
	Cluster       string `json:"cluster"`
	Epoch         int    `json:"epoch"`
	Caught        bool   `json:"caught"`
	Result        string `json:"result"`
	Operations    int    `json:"operations"`
	Visualization string `json:"visualization,omitempty"`
}

// ClusterInfo describes a cluster of the run.
type ClusterInfo struct {
	Name     string `json:"name"`
	Replicas int32  `json:"replicas"`
	Memory   bool   `json:"memory,omitempty"`
}

// FaultRef points at a fault from an aggregate.
type FaultRef struct {
	Kind    Kind    `json:"kind"`
	Cluster string  `json:"cluster,omitempty"`
	Step    string  `json:"step"`
	Took    Seconds `json:"seconds"`
}

// Report is the outcome of a run.
type Report struct {
	Seed     uint64        `json:"seed"`
	Started  time.Time     `json:"started"`
	Duration Seconds       `json:"durationSeconds"`
	Clusters []ClusterInfo `json:"clusters"`

	Faults       []FaultRecord `json:"faults"`
	FaultsByKind map[Kind]int  `json:"faultsByKind"`
	FaultsTotal  int           `json:"faultsTotal"`
	KindsSeen    int           `json:"kinds"`
	// Overlaps counts the cluster steps that had two member faults at once.
	Overlaps int `json:"overlappingSteps"`

	Epochs       []EpochRecord `json:"epochs"`
	Operations   int           `json:"operationsChecked"`
	Acknowledged int           `json:"acknowledgedWrites"`
	// Violations counts epochs whose history is not linearizable;
	// Inconclusive those whose check ran out of time.
	Violations   int `json:"linearizabilityViolations"`
	Inconclusive int `json:"inconclusiveChecks"`
	LostWrites   int `json:"lostWrites"`
	// WritesChecked counts the acknowledged writes found in etcd's history.
	WritesChecked int `json:"writesChecked"`
	// HashChecks counts the epochs whose members were hashed at a common
	// revision, MembersHashed the hashes compared.
	HashChecks    int `json:"hashChecks"`
	MembersHashed int `json:"membersHashed"`
	// RecoveredEpochs counts the epochs that ended with the cluster
	// recovered: each must have been hashed and compacted.
	RecoveredEpochs int `json:"recoveredEpochs"`
	// KubeWrites, WatchEvents and WatchCompactions add up the epochs'
	// Kubernetes-like traffic; WatchViolations counts the watch guarantees
	// broken.
	KubeWrites       int `json:"kubeWrites"`
	WatchEvents      int `json:"watchEventsChecked"`
	WatchCompactions int `json:"watchCompactions"`
	WatchViolations  int `json:"watchViolations"`

	InvariantViolations []Violation `json:"invariantViolations,omitempty"`

	LongestToReady     FaultRef         `json:"longestToReady"`
	ToReadyByKind      map[Kind]Seconds `json:"longestToReadyByKindSeconds"`
	LongestWriteOutage Seconds          `json:"longestWriteOutageSeconds"`
	// WriteOutageAt says where the longest write outage was: the cluster
	// and epoch, and when it started.
	WriteOutageCluster string    `json:"writeOutageCluster,omitempty"`
	WriteOutageEpoch   int       `json:"writeOutageEpoch"`
	WriteOutageStarted time.Time `json:"writeOutageStarted"`

	SelfTest *SelfTestRecord `json:"selfTest,omitempty"`
	// Error is what stopped the run early, if anything did.
	Error     string `json:"error,omitempty"`
	Artifacts string `json:"artifacts,omitempty"`
}

// Summarize computes the aggregates from the faults and epochs.
func (r *Report) Summarize() {
	r.FaultsByKind = map[Kind]int{}
	r.ToReadyByKind = map[Kind]Seconds{}
	r.FaultsTotal = len(r.Faults)
	// Lanes record a fault when it is over; the report lists them in the
	// order they were injected.
	sortFaults(r.Faults)
	r.LongestToReady = FaultRef{}
	for _, f := range r.Faults {
		r.FaultsByKind[f.Kind]++
		r.ToReadyByKind[f.Kind] = max(r.ToReadyByKind[f.Kind], f.ToReady)
		if f.ToReady > r.LongestToReady.Took {
			r.LongestToReady = FaultRef{Kind: f.Kind, Cluster: f.Cluster, Step: f.Step, Took: f.ToReady}
		}
	}
	r.KindsSeen = len(r.FaultsByKind)
	perStep := map[string]int{}
	r.Overlaps = 0
	for _, f := range r.Faults {
		if f.Kind.IsMemberFault() && f.Cluster != "" {
			perStep[f.Cluster+"/"+f.Step]++
			if perStep[f.Cluster+"/"+f.Step] == 2 {
				r.Overlaps++
			}
		}
	}
	r.Operations, r.Acknowledged, r.Violations, r.Inconclusive, r.LostWrites = 0, 0, 0, 0, 0
	r.WritesChecked, r.HashChecks, r.MembersHashed, r.RecoveredEpochs = 0, 0, 0, 0
	r.KubeWrites, r.WatchEvents, r.WatchCompactions, r.WatchViolations = 0, 0, 0, 0
	r.LongestWriteOutage = 0
	for _, e := range r.Epochs {
		r.Operations += e.Operations
		r.Acknowledged += e.Acknowledged
		r.LostWrites += len(e.Lost)
		r.WritesChecked += e.WritesChecked
		r.KubeWrites += e.KubeWrites
		r.WatchEvents += e.WatchEvents
		r.WatchCompactions += e.WatchCompactions
		r.WatchViolations += len(e.WatchViolations)
		if e.Recovered {
			r.RecoveredEpochs++
		}
		if len(e.Hashes) > 0 {
			r.HashChecks++
			r.MembersHashed += len(e.Hashes)
		}
		switch {
		case e.SelfTest:
			// Its verdict is the self-test's.
		case e.Result == "Illegal":
			r.Violations++
		case e.Result == "Ok":
		default:
			r.Inconclusive++
		}
		if e.LongestWriteOutage > r.LongestWriteOutage {
			r.LongestWriteOutage = e.LongestWriteOutage
			r.WriteOutageCluster, r.WriteOutageEpoch, r.WriteOutageStarted = e.Cluster, e.Index, e.OutageStarted
		}
	}
}

// Passed reports a run that stopped for no reason but its end, with every
// history linearizable, no write lost, every invariant and watch guarantee
// held and, if it ran, the self-test caught.
func (r *Report) Passed() bool {
	return r.Error == "" && r.Violations == 0 && r.Inconclusive == 0 && r.LostWrites == 0 && r.WatchViolations == 0 &&
		len(r.InvariantViolations) == 0 && (r.SelfTest == nil || r.SelfTest.Caught)
}

// Table renders the report for people.
func (r *Report) Table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	verdict := "PASSED"
	if !r.Passed() {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "chaos run\t%s, seed %d, %s\n", verdict, r.Seed, r.Duration)
	var clusters []string
	for _, c := range r.Clusters {
		medium := "volumes"
		if c.Memory {
			medium = "memory"
		}
		clusters = append(clusters, fmt.Sprintf("%s (%d members, %s)", c.Name, c.Replicas, medium))
	}
	fmt.Fprintf(w, "clusters\t%s\n", strings.Join(clusters, ", "))
	fmt.Fprintf(w, "faults injected\t%d, of %d kinds; %d steps with two member faults at once\n", r.FaultsTotal, r.KindsSeen, r.Overlaps)
	for _, k := range AllKinds {
		if n := r.FaultsByKind[k]; n > 0 {
			fmt.Fprintf(w, "  %s\t%d, longest to Ready %s\n", k, n, r.ToReadyByKind[k])
		}
	}
	fmt.Fprintf(w, "operations checked\t%d in %d histories, %d writes acknowledged\n", r.Operations, len(r.Epochs), r.Acknowledged)
	fmt.Fprintf(w, "linearizability violations\t%d (and %d checks that ran out of time)\n", r.Violations, r.Inconclusive)
	fmt.Fprintf(w, "acknowledged writes lost\t%d (%d acknowledged writes found in etcd's history)\n", r.LostWrites, r.WritesChecked)
	fmt.Fprintf(w, "HashKV compared\t%d histories of %d recovered, %d member hashes\n", r.HashChecks, r.RecoveredEpochs, r.MembersHashed)
	fmt.Fprintf(w, "watch events checked\t%d, against %d Kubernetes-like writes acknowledged, through %d compactions\n", r.WatchEvents, r.KubeWrites, r.WatchCompactions)
	fmt.Fprintf(w, "watch violations\t%d\n", r.WatchViolations)
	fmt.Fprintf(w, "invariant violations\t%d\n", len(r.InvariantViolations))
	fmt.Fprintf(w, "longest fault to Ready\t%s (%s, %s)\n", r.LongestToReady.Took, r.LongestToReady.Kind, r.LongestToReady.Step)
	fmt.Fprintf(w, "longest write outage\t%s (%s, history %d)\n", r.LongestWriteOutage, r.WriteOutageCluster, r.WriteOutageEpoch)
	if r.SelfTest != nil {
		fmt.Fprintf(w, "self-test (planted stale read)\tcaught=%t, %s over %d operations (%s history %d)\n", r.SelfTest.Caught, r.SelfTest.Result, r.SelfTest.Operations, r.SelfTest.Cluster, r.SelfTest.Epoch)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "stopped by\t%s\n", r.Error)
	}
	for _, v := range r.InvariantViolations {
		fmt.Fprintf(w, "  violation\t%s\n", v)
	}
	for _, e := range r.Epochs {
		for _, v := range e.WatchViolations {
			fmt.Fprintf(w, "  watch violation\t%s history %d: %s\n", e.Cluster, e.Index, v)
		}
		for _, l := range e.Lost {
			fmt.Fprintf(w, "  lost write\t%s history %d: %s\n", e.Cluster, e.Index, l)
		}
		if e.Visualization != "" {
			label := "history"
			if e.SelfTest {
				label = "self-test's history"
			}
			fmt.Fprintf(w, "  %s\t%s history %d: %s, %s\n", label, e.Cluster, e.Index, e.Result, e.Visualization)
		}
	}
	if r.Artifacts != "" {
		fmt.Fprintf(w, "artifacts\t%s\n", r.Artifacts)
	}
	_ = w.Flush()
	return b.String()
}

// WriteJSON writes the report to path, creating its directory.
func (r *Report) WriteJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("failed to encode the report: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("failed to create the directory of %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("failed to write the report to %s: %w", path, err)
	}
	return nil
}

// sortFaults orders the faults by injection time.
func sortFaults(fs []FaultRecord) {
	slices.SortStableFunc(fs, func(a, b FaultRecord) int { return a.Injected.Compare(b.Injected) })
}
