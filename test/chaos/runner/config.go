package runner

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/quorumctl/etcd-operator/test/chaos"
)

// SeedFromEnv reads CHAOS_SEED, or draws a seed when it is unset.
func SeedFromEnv() (uint64, error) {
	s := os.Getenv("CHAOS_SEED")
	if s == "" {
		return rand.Uint64N(1 << 53), nil
	}
	seed, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("CHAOS_SEED must be an unsigned decimal number, got %q: %w", s, err)
	}
	return seed, nil
}

// PlantInRunFromEnv reads CHAOS_PLANT_STALE_READ: when it is 1, the
// self-test's planted stale read counts as an ordinary epoch's, and the run
// must fail with it.
func PlantInRunFromEnv() bool { return os.Getenv("CHAOS_PLANT_STALE_READ") == "1" }

// shortTiming keeps each fault of the short run short: partitions and
// outages of seconds, the operator killed early in an operation.
var shortTiming = chaos.Timing{
	PartitionHold:    chaos.Span{Min: 5 * time.Second, Max: 35 * time.Second},
	NodeStopHold:     chaos.Span{Min: 10 * time.Second, Max: 40 * time.Second},
	OperatorDownHold: chaos.Span{Min: 3 * time.Second, Max: 10 * time.Second},
	CrashAfter:       chaos.Span{Min: 0, Max: 10 * time.Second},
	OverlapDelay:     chaos.Span{Min: 0, Max: 5 * time.Second},
	PauseHold:        chaos.Span{Min: 1 * time.Second, Max: 10 * time.Second},
	PeerLossHold:     chaos.Span{Min: 5 * time.Second, Max: 30 * time.Second},
	PeerLossPercent:  [2]int{20, 50},
	SlowDiskHold:     chaos.Span{Min: 5 * time.Second, Max: 30 * time.Second},
	SlowDiskIOPS:     [2]int{4, 16},
	MemoryIdle:       chaos.Span{Min: 30 * time.Second, Max: 2 * time.Minute},
}

// ShortConfig is the run inside make test: a 3-member and a 5-member
// cluster on volumes, each drawing every fast member fault and the
// replacement and rollout under an operator crash, the 5-member one's
// member faults overlapping two at a time three times in four, and operator
// outages between their steps, for about five minutes and at least 25
// faults.
func ShortConfig(seed uint64, ns, artifacts string) Config {
	kinds := slices.DeleteFunc(slices.Clone(chaos.ShortKinds), func(k chaos.Kind) bool { return k.IsGlobal() })
	idle := chaos.Span{Min: 0, Max: 2 * time.Second}
	return Config{
		Seed: seed, Namespace: ns, Artifacts: artifacts,
		Clusters: []ClusterSpec{
			{Name: "short-a", Replicas: 3, Kinds: kinds, Idle: idle},
			{Name: "short-b", Replicas: 5, Kinds: kinds, Idle: idle},
		},
		GlobalKinds: []chaos.Kind{chaos.OperatorDown},
		GlobalEvery: [2]int{4, 7},
		Duration:    4 * time.Minute, MinFaults: 25, MaxFaults: 40, Overlap: 0.75,
		Timing: shortTiming, NodeLostAfter: 15, SelfTest: true,
	}
}

// LongConfig is make chaos: a 3-member cluster that also scales to 5 and
// back, a 5-member cluster whose member faults overlap two at a time, and a
// Memory cluster whose tmpfs fills up, with node stops and operator outages
// between their steps.
func LongConfig(seed uint64, ns, artifacts string, d time.Duration, minFaults int) Config {
	var volumes []chaos.Kind
	for _, k := range chaos.AllKinds {
		if !k.IsGlobal() && k != chaos.DiskFill {
			volumes = append(volumes, k)
		}
	}
	five := slices.DeleteFunc(slices.Clone(volumes), func(k chaos.Kind) bool { return k == chaos.CrashScaleUp || k == chaos.CrashScaleDown })
	return Config{
		Seed: seed, Namespace: ns, Artifacts: artifacts,
		Clusters: []ClusterSpec{
			{Name: "three", Replicas: 3, Kinds: volumes, Idle: chaos.Span{Max: 3 * time.Second}},
			{Name: "five", Replicas: 5, Kinds: five, Idle: chaos.Span{Max: 3 * time.Second}},
			{Name: "memory", Replicas: 3, Memory: true, Kinds: []chaos.Kind{chaos.DiskFill, chaos.Kill, chaos.DeletePod, chaos.Partition}, Idle: chaos.DefaultTiming.MemoryIdle},
		},
		GlobalKinds: []chaos.Kind{chaos.NodeStop, chaos.OperatorDown},
		GlobalEvery: [2]int{5, 10},
		Duration:    d, MinFaults: minFaults, Overlap: 0.5,
		Timing: chaos.DefaultTiming, NodeLostAfter: 15, SelfTest: true,
	}
}

// Without leaves kinds out of a configuration: its clusters' lanes and the
// global faults. A cluster left with no kind is not created.
func (c Config) Without(kinds []chaos.Kind) Config {
	drop := func(k chaos.Kind) bool { return slices.Contains(kinds, k) }
	var clusters []ClusterSpec
	for _, s := range c.Clusters {
		s.Kinds = slices.DeleteFunc(slices.Clone(s.Kinds), drop)
		if len(s.Kinds) > 0 {
			clusters = append(clusters, s)
		}
	}
	c.Clusters = clusters
	c.GlobalKinds = slices.DeleteFunc(slices.Clone(c.GlobalKinds), drop)
	return c
}
