package chaos

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// The schedule is decided from the seed alone: which kind of fault comes
// next in each cluster, whether a second one overlaps it, the delays, how
// long a partition or an outage holds, when the operator is killed, which
// member or node is hit (as an index into the sorted candidates at that
// moment) and after how many cluster steps a global fault comes. Replaying a
// seed replays all of that; it cannot replay the timing between clusters,
// nor the names the API server generates, so the same index may land on a
// member placed elsewhere.

// Span is a range of durations to draw from, both ends included.
type Span struct{ Min, Max time.Duration }

func (s Span) draw(rng *rand.Rand) time.Duration {
	if s.Max <= s.Min {
		return s.Min
	}
	return s.Min + time.Duration(rng.Int64N(int64(s.Max-s.Min)+1))
}

// Timing bounds the random durations of a schedule.
type Timing struct {
	// PartitionHold is how long a partition lasts.
	PartitionHold Span
	// NodeStopHold is how long a node stays stopped.
	NodeStopHold Span
	// OperatorDownHold is how long the operator stays down once the member
	// faults of the outage are in.
	OperatorDownHold Span
	// CrashAfter is when, after an operation starts, the operator's leader
	// is killed.
	CrashAfter Span
	// OverlapDelay is how long after the first fault of a step a second one
	// starts.
	OverlapDelay Span
	// PauseHold is how long a paused etcd stays stopped.
	PauseHold Span
	// PeerLossHold is how long a member loses, or has delayed, its peer
	// packets, and PeerLossPercent the share it loses, in percent, from [0]
	// to [1].
	PeerLossHold    Span
	PeerLossPercent [2]int
	// SlowDiskHold is how long a member's disk is slow, and SlowDiskIOPS
	// the writes per second it is allowed, from [0] to [1].
	SlowDiskHold Span
	SlowDiskIOPS [2]int
	// MemoryIdle is the pause before each step of a cluster whose kinds are
	// all slow (the disk fill's Memory cluster), so it does not dominate.
	MemoryIdle Span
}

// DefaultTiming suits both runs: partitions shorter and longer than the
// operator's 30 s unresponsive bound, node stops shorter and longer than the
// node-loss bound the runner sets.
var DefaultTiming = Timing{
	PartitionHold:    Span{5 * time.Second, 40 * time.Second},
	NodeStopHold:     Span{10 * time.Second, 60 * time.Second},
	OperatorDownHold: Span{3 * time.Second, 15 * time.Second},
	CrashAfter:       Span{0, 20 * time.Second},
	OverlapDelay:     Span{0, 10 * time.Second},
	PauseHold:        Span{1 * time.Second, 10 * time.Second},
	PeerLossHold:     Span{5 * time.Second, 40 * time.Second},
	PeerLossPercent:  [2]int{20, 50},
	SlowDiskHold:     Span{5 * time.Second, 40 * time.Second},
	SlowDiskIOPS:     [2]int{4, 16},
	MemoryIdle:       Span{30 * time.Second, 3 * time.Minute},
}

// Fault is one fault as scheduled.
type Fault struct {
	Kind Kind `json:"kind"`
	// Cluster is the cluster hit; empty for a global fault.
	Cluster string `json:"cluster,omitempty"`
	// Delay is when the fault starts, after its step does.
	Delay time.Duration `json:"delay"`
	// Hold is how long a partition, a pause, a packet loss, a node stop or
	// an operator outage lasts.
	Hold time.Duration `json:"hold,omitempty"`
	// Percent is the share of packets a packet loss drops.
	Percent int `json:"percent,omitempty"`
	// IOPS is the writes per second a slow disk allows.
	IOPS int `json:"iops,omitempty"`
	// CrashAfter is when an operation's operator crash comes.
	CrashAfter time.Duration `json:"crashAfter,omitempty"`
	// Pick chooses the victim: an index into the sorted candidates.
	Pick uint64 `json:"pick"`
}

// Step is what one cluster does next: one operation, or one member fault,
// or (when its tolerance allows) two that overlap.
type Step struct {
	Cluster string
	Index   int
	// Idle is the pause before the step.
	Idle   time.Duration
	Faults []Fault
	// Replicas is the cluster's size before the step, ReplicasAfter after
	// it; they differ only for a scale.
	Replicas, ReplicasAfter int32
}

// LaneConfig is what a cluster may suffer.
type LaneConfig struct {
	Cluster string
	// Replicas is the size the cluster is created with; a scale-up takes it
	// two higher and a scale-down back.
	Replicas int32
	// Kinds are the member faults and operations it may draw; global kinds
	// are ignored here.
	Kinds []Kind
	// Overlap is the chance that a member fault gets a second one beside
	// it, where the tolerance allows two.
	Overlap float64
	// Idle is the pause before each step.
	Idle Span
}

// LaneScheduler draws the steps of one cluster. Kinds come out of a shuffled
// bag, refilled when empty, so every kind comes up within a bag's length of
// steps: a short run covers them all, and the order is still random.
type LaneScheduler struct {
	cfg      LaneConfig
	timing   Timing
	rng      *rand.Rand
	bag      []Kind
	replicas int32
	seedDone bool
	index    int
}

// NewLaneScheduler makes the scheduler of the lane-th cluster of a run.
func NewLaneScheduler(seed uint64, lane int, cfg LaneConfig, timing Timing) *LaneScheduler {
	var kinds []Kind
	for _, k := range cfg.Kinds {
		if (k.IsMemberFault() || k.IsOperation()) && !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	cfg.Kinds = kinds
	return &LaneScheduler{
		cfg: cfg, timing: timing, replicas: cfg.Replicas,
		rng: rand.New(rand.NewPCG(seed, uint64(lane)+1)),
	}
}

// Replicas is the cluster's size after the steps drawn so far.
func (s *LaneScheduler) Replicas() int32 { return s.replicas }

// SeedWipePending reports that the seed is still to be wiped: until then
// other faults leave the seed alone, so the wipe finds it.
func (s *LaneScheduler) SeedWipePending() bool {
	return slices.Contains(s.cfg.Kinds, WipeSeed) && !s.seedDone
}

// applicable reports whether kind k can be drawn now.
func (s *LaneScheduler) applicable(k Kind, memberOnly bool) bool {
	switch {
	case memberOnly && !k.IsMemberFault():
		return false
	case k == WipeSeed:
		return !s.seedDone
	case k == CrashScaleUp:
		return s.replicas == s.cfg.Replicas
	case k == CrashScaleDown:
		return s.replicas == s.cfg.Replicas+2
	}
	return true
}

// draw takes the first applicable kind out of the bag, refilling it once if
// none is; ok is false when no kind at all applies.
func (s *LaneScheduler) draw(memberOnly bool) (Kind, bool) {
	for range 2 {
		for i, k := range s.bag {
			if s.applicable(k, memberOnly) {
				s.bag = slices.Delete(s.bag, i, i+1)
				return k, true
			}
		}
		s.bag = append(s.bag, shuffled(s.rng, s.cfg.Kinds)...)
	}
	return "", false
}

func shuffled(rng *rand.Rand, kinds []Kind) []Kind {
	out := slices.Clone(kinds)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// Next draws the next step. A lane with no kinds idles: its steps are empty.
func (s *LaneScheduler) Next() Step {
	step := Step{Cluster: s.cfg.Cluster, Index: s.index, Idle: s.cfg.Idle.draw(s.rng), Replicas: s.replicas, ReplicasAfter: s.replicas}
	s.index++
	k, ok := s.draw(false)
	if !ok {
		return step
	}
	first := s.fault(k, 0)
	step.Faults = []Fault{first}
	switch k {
	case CrashScaleUp:
		step.ReplicasAfter = s.replicas + 2
	case CrashScaleDown:
		step.ReplicasAfter = s.replicas - 2
	case WipeSeed:
		s.seedDone = true
	}
	if k.IsMemberFault() && Tolerance(s.replicas) >= 2 && s.rng.Float64() < s.cfg.Overlap {
		if second, ok := s.draw(true); ok {
			if second == WipeSeed {
				s.seedDone = true
			}
			step.Faults = append(step.Faults, s.fault(second, s.timing.OverlapDelay.draw(s.rng)))
		}
	}
	s.replicas = step.ReplicasAfter
	return step
}

func (s *LaneScheduler) fault(k Kind, delay time.Duration) Fault {
	f := Fault{Kind: k, Cluster: s.cfg.Cluster, Delay: delay, Pick: s.rng.Uint64()}
	if k.IsOperation() {
		f.CrashAfter = s.timing.CrashAfter.draw(s.rng)
	}
	s.timing.drawHold(s.rng, &f)
	return f
}

// drawHold draws how long a member fault that holds lasts, and how hard it
// hits.
func (t Timing) drawHold(rng *rand.Rand, f *Fault) {
	switch f.Kind {
	case Partition:
		f.Hold = t.PartitionHold.draw(rng)
	case PauseLeader, PauseFollower:
		f.Hold = t.PauseHold.draw(rng)
	case PeerLatency:
		f.Hold = t.PeerLossHold.draw(rng)
	case PeerLoss:
		f.Hold = t.PeerLossHold.draw(rng)
		f.Percent = drawInt(rng, t.PeerLossPercent)
	case SlowDisk:
		f.Hold = t.SlowDiskHold.draw(rng)
		f.IOPS = drawInt(rng, t.SlowDiskIOPS)
	}
}

// drawInt draws from r[0] to r[1], both included.
func drawInt(rng *rand.Rand, r [2]int) int {
	lo, hi := r[0], max(r[0], r[1])
	return lo + rng.IntN(hi-lo+1)
}

// Admissible checks a step against the overlap rule: never more members
// down than the cluster tolerates, at its smaller size if it scales, and an
// operation alone in its cluster.
func Admissible(s Step) error {
	members := int32(0)
	for _, f := range s.Faults {
		switch {
		case f.Kind.IsGlobal():
			return fmt.Errorf("step %d of %s: %s is a global fault", s.Index, s.Cluster, f.Kind)
		case f.Kind.IsOperation() && len(s.Faults) > 1:
			return fmt.Errorf("step %d of %s: operation %s shares the step with other faults", s.Index, s.Cluster, f.Kind)
		case f.Kind.IsMemberFault():
			members++
		}
	}
	if members > 0 && s.ReplicasAfter != s.Replicas {
		return fmt.Errorf("step %d of %s: member faults in a step that scales", s.Index, s.Cluster)
	}
	if t := Tolerance(min(s.Replicas, s.ReplicasAfter)); members > t {
		return fmt.Errorf("step %d of %s: %d members down, the cluster of %d tolerates %d", s.Index, s.Cluster, members, s.Replicas, t)
	}
	return nil
}

// GlobalLane is what the global scheduler knows of a cluster.
type GlobalLane struct {
	Cluster string
	// Kinds are the member faults an operator outage may inject into it.
	Kinds []Kind
}

// GlobalConfig describes the global faults of a run.
type GlobalConfig struct {
	// Kinds are the global kinds enabled (node stop, operator down).
	Kinds []Kind
	// Every is how many cluster steps, in all, pass between two global
	// faults: from Min to Max.
	Every [2]int
	Lanes []GlobalLane
}

// GlobalEvent is one global fault.
type GlobalEvent struct {
	Index int
	// After is how many cluster steps, counted over every cluster since the
	// previous global fault, come before this one.
	After int
	Fault Fault
	// MemberFaults are injected, one per cluster, while the operator is down.
	MemberFaults []Fault
}

// GlobalScheduler draws the global faults, from a bag like a lane's.
type GlobalScheduler struct {
	cfg    GlobalConfig
	timing Timing
	rng    *rand.Rand
	bag    []Kind
	index  int
}

// NewGlobalScheduler makes the global scheduler of a run.
func NewGlobalScheduler(seed uint64, cfg GlobalConfig, timing Timing) *GlobalScheduler {
	var kinds []Kind
	for _, k := range cfg.Kinds {
		if k.IsGlobal() && !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	cfg.Kinds = kinds
	return &GlobalScheduler{cfg: cfg, timing: timing, rng: rand.New(rand.NewPCG(seed, 0))}
}

// Enabled reports whether any global fault is scheduled at all.
func (g *GlobalScheduler) Enabled() bool { return len(g.cfg.Kinds) > 0 }

// Next draws the next global fault.
func (g *GlobalScheduler) Next() (GlobalEvent, error) {
	if !g.Enabled() {
		return GlobalEvent{}, errors.New("no global fault kind is enabled")
	}
	if len(g.bag) == 0 {
		g.bag = shuffled(g.rng, g.cfg.Kinds)
	}
	k := g.bag[0]
	g.bag = g.bag[1:]
	lo, hi := max(g.cfg.Every[0], 1), max(g.cfg.Every[1], g.cfg.Every[0], 1)
	ev := GlobalEvent{Index: g.index, After: lo + g.rng.IntN(hi-lo+1), Fault: Fault{Kind: k, Pick: g.rng.Uint64()}}
	g.index++
	switch k {
	case NodeStop:
		ev.Fault.Hold = g.timing.NodeStopHold.draw(g.rng)
	case OperatorDown:
		ev.Fault.Hold = g.timing.OperatorDownHold.draw(g.rng)
		for _, l := range g.cfg.Lanes {
			var kinds []Kind
			for _, mk := range l.Kinds {
				// The seed's wipe belongs to its cluster's own schedule,
				// which keeps it for when the seed is still there.
				if mk.IsMemberFault() && !mk.NeedsOperator() && mk != WipeSeed {
					kinds = append(kinds, mk)
				}
			}
			if len(kinds) == 0 {
				continue
			}
			mk := kinds[g.rng.IntN(len(kinds))]
			f := Fault{Kind: mk, Cluster: l.Cluster, Delay: g.timing.OverlapDelay.draw(g.rng), Pick: g.rng.Uint64()}
			g.timing.drawHold(g.rng, &f)
			ev.MemberFaults = append(ev.MemberFaults, f)
		}
	}
	return ev, nil
}

// AdmissibleGlobal checks a global fault against the overlap rule: a node
// stop comes alone, and an operator outage brings at most one member fault
// per cluster, which every cluster of three or more tolerates.
func AdmissibleGlobal(ev GlobalEvent, replicas map[string]int32) error {
	switch ev.Fault.Kind {
	case NodeStop:
		if len(ev.MemberFaults) > 0 {
			return fmt.Errorf("global fault %d: a node stop with member faults", ev.Index)
		}
	case OperatorDown:
		per := map[string]int32{}
		for _, f := range ev.MemberFaults {
			if !f.Kind.IsMemberFault() || f.Kind.NeedsOperator() {
				return fmt.Errorf("global fault %d: %s cannot be injected while the operator is down", ev.Index, f.Kind)
			}
			per[f.Cluster]++
			if t := Tolerance(replicas[f.Cluster]); per[f.Cluster] > t {
				return fmt.Errorf("global fault %d: %d members of %s down, it tolerates %d", ev.Index, per[f.Cluster], f.Cluster, t)
			}
		}
	default:
		return fmt.Errorf("global fault %d: %s is not a global kind", ev.Index, ev.Fault.Kind)
	}
	return nil
}

// MemberInfo is what victim selection knows of a member.
type MemberInfo struct {
	Name string
	Seed bool
	Node string
	// Healthy: the member is a voter that follows a leader, as etcd itself
	// says, and its Pod is scheduled, running and ready. A fault meant to
	// take a member down hits nothing in one that is already down, or whose
	// Pod never ran.
	Healthy bool
	// Leader: etcd names the member its leader.
	Leader bool
}

// Candidates are the healthy members a fault of kind k may hit, sorted by
// name: the seed for the seed's wipe, anyone else for a plain wipe, the
// leader for a leader's pause (even the seed: the pause leaves it as it
// was), anyone but the leader for a follower's pause, and for the rest
// anyone; never a member already hit in this step and, but for the
// leader's pause, never the seed while the seed's wipe is pending.
func Candidates(k Kind, members []MemberInfo, avoidSeed bool, taken map[string]bool) []string {
	var out []string
	for _, m := range members {
		if taken[m.Name] || !m.Healthy {
			continue
		}
		switch {
		case k == WipeSeed && !m.Seed:
		case k == WipeMember && m.Seed:
		case k == PauseLeader && !m.Leader:
		case k == PauseFollower && m.Leader:
		case k != WipeSeed && k != PauseLeader && avoidSeed && m.Seed:
		default:
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return out
}

// PickOne chooses by index.
func PickOne(candidates []string, pick uint64) (string, bool) {
	if len(candidates) == 0 {
		return "", false
	}
	return candidates[pick%uint64(len(candidates))], true
}

// PickNode chooses a node to stop among those whose members, in every
// cluster, are no more than that cluster tolerates. onNode counts each
// cluster's members per node.
func PickNode(nodes []string, onNode map[string]map[string]int32, replicas map[string]int32, pick uint64) (string, bool) {
	var ok []string
	for _, n := range nodes {
		fits := true
		for cluster, count := range onNode[n] {
			if count > Tolerance(replicas[cluster]) {
				fits = false
			}
		}
		if fits {
			ok = append(ok, n)
		}
	}
	slices.Sort(ok)
	return PickOne(ok, pick)
}
