package chaos

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

var testLanes = []LaneConfig{
	{Cluster: "c3", Replicas: 3, Kinds: append(slices.Clone(ShortKinds), CrashScaleUp, CrashScaleDown), Overlap: 0.5},
	{Cluster: "c5", Replicas: 5, Kinds: ShortKinds, Overlap: 0.5},
}

func drawSteps(seed uint64, lane int, cfg LaneConfig, n int) []Step {
	s := NewLaneScheduler(seed, lane, cfg, DefaultTiming)
	var out []Step
	for range n {
		out = append(out, s.Next())
	}
	return out
}

func TestSameSeedSameSchedule(t *testing.T) {
	for i, cfg := range testLanes {
		a, b := drawSteps(42, i, cfg, 50), drawSteps(42, i, cfg, 50)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("lane %s: two schedulers from seed 42 differ", cfg.Cluster)
		}
		if c := drawSteps(43, i, cfg, 50); reflect.DeepEqual(a, c) {
			t.Fatalf("lane %s: seeds 42 and 43 give the same schedule", cfg.Cluster)
		}
	}
	if reflect.DeepEqual(drawSteps(42, 0, testLanes[1], 20), drawSteps(42, 1, testLanes[1], 20)) {
		t.Fatal("two lanes of one seed draw the same steps")
	}
	g1 := NewGlobalScheduler(7, GlobalConfig{Kinds: []Kind{NodeStop, OperatorDown}, Every: [2]int{2, 6}}, DefaultTiming)
	g2 := NewGlobalScheduler(7, GlobalConfig{Kinds: []Kind{NodeStop, OperatorDown}, Every: [2]int{2, 6}}, DefaultTiming)
	for range 20 {
		a, _ := g1.Next()
		b, _ := g2.Next()
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("global events of one seed differ: %+v, %+v", a, b)
		}
	}
}

// TestEveryStepAdmissible: over many seeds, no step takes more members down
// than its cluster tolerates, an operation is always alone, and scaling
// keeps the two sizes the lane moves between.
func TestEveryStepAdmissible(t *testing.T) {
	for seed := range uint64(200) {
		for i, cfg := range testLanes {
			for _, s := range drawSteps(seed, i, cfg, 40) {
				if err := Admissible(s); err != nil {
					t.Fatalf("seed %d: %v (%+v)", seed, err, s)
				}
				if s.ReplicasAfter != cfg.Replicas && s.ReplicasAfter != cfg.Replicas+2 {
					t.Fatalf("seed %d: lane %s went to %d members", seed, cfg.Cluster, s.ReplicasAfter)
				}
				if len(s.Faults) == 0 {
					t.Fatalf("seed %d: an empty step in a lane with kinds", seed)
				}
			}
		}
	}
}

// TestOverlapOnlyWhereTolerated: two faults at once come up, and only in
// a cluster of five.
func TestOverlapOnlyWhereTolerated(t *testing.T) {
	doubles := map[int32]int{}
	for seed := range uint64(50) {
		for i, cfg := range testLanes {
			for _, s := range drawSteps(seed, i, cfg, 30) {
				if len(s.Faults) == 2 {
					doubles[s.Replicas]++
					if s.Faults[1].Delay < DefaultTiming.OverlapDelay.Min || s.Faults[1].Delay > DefaultTiming.OverlapDelay.Max {
						t.Fatalf("the second fault starts after %s", s.Faults[1].Delay)
					}
				}
			}
		}
	}
	if doubles[3] != 0 {
		t.Fatalf("%d steps took two members of a 3-member cluster", doubles[3])
	}
	if doubles[5] == 0 {
		t.Fatal("no step of a 5-member cluster overlapped two faults")
	}
}

// TestBagCoversEveryKind: within the first bag of steps every kind of the
// lane comes up, whatever the seed: exactly once without overlaps, at least
// once with them (a second fault draws from the same bag).
func TestBagCoversEveryKind(t *testing.T) {
	for _, overlap := range []float64{0, 0.5} {
		cfg := LaneConfig{Cluster: "c5", Replicas: 5, Kinds: ShortKinds, Overlap: overlap}
		var kinds []Kind
		for _, k := range ShortKinds {
			if !k.IsGlobal() {
				kinds = append(kinds, k)
			}
		}
		for seed := range uint64(100) {
			seen := map[Kind]int{}
			for _, s := range drawSteps(seed, 1, cfg, len(kinds)) {
				for _, f := range s.Faults {
					seen[f.Kind]++
				}
			}
			for _, k := range kinds {
				if seen[k] == 0 || (overlap == 0 && seen[k] != 1) {
					t.Fatalf("overlap %.1f, seed %d: %s came up %d times in the first %d steps", overlap, seed, k, seen[k], len(kinds))
				}
			}
		}
	}
}

func TestSeedWipedOnce(t *testing.T) {
	for seed := range uint64(100) {
		s := NewLaneScheduler(seed, 0, testLanes[0], DefaultTiming)
		if !s.SeedWipePending() {
			t.Fatal("a lane with wipe-seed starts with the wipe pending")
		}
		wipes := 0
		for range 60 {
			for _, f := range s.Next().Faults {
				if f.Kind == WipeSeed {
					wipes++
				}
			}
		}
		if wipes != 1 || s.SeedWipePending() {
			t.Fatalf("seed %d: the seed was wiped %d times (pending %t)", seed, wipes, s.SeedWipePending())
		}
	}
	if NewLaneScheduler(1, 0, LaneConfig{Cluster: "x", Replicas: 3, Kinds: []Kind{Kill}}, DefaultTiming).SeedWipePending() {
		t.Fatal("a lane without wipe-seed has no wipe pending")
	}
}

func TestScaleAlternates(t *testing.T) {
	cfg := LaneConfig{Cluster: "c3", Replicas: 3, Kinds: []Kind{CrashScaleUp, CrashScaleDown}}
	s := NewLaneScheduler(9, 0, cfg, DefaultTiming)
	want := CrashScaleUp
	for range 10 {
		st := s.Next()
		if got := st.Faults[0].Kind; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
		if st.Faults[0].CrashAfter < DefaultTiming.CrashAfter.Min || st.Faults[0].CrashAfter > DefaultTiming.CrashAfter.Max {
			t.Fatalf("crash after %s", st.Faults[0].CrashAfter)
		}
		if want == CrashScaleUp {
			want = CrashScaleDown
		} else {
			want = CrashScaleUp
		}
	}
}

func TestAdmissibleRefuses(t *testing.T) {
	kill := Fault{Kind: Kill}
	for name, s := range map[string]Step{
		"two down of three":         {Replicas: 3, ReplicasAfter: 3, Faults: []Fault{kill, kill}},
		"three down of five":        {Replicas: 5, ReplicasAfter: 5, Faults: []Fault{kill, kill, kill}},
		"an operation with a fault": {Replicas: 5, ReplicasAfter: 5, Faults: []Fault{{Kind: CrashRollout}, kill}},
		"a global kind in a lane":   {Replicas: 5, ReplicasAfter: 5, Faults: []Fault{{Kind: NodeStop}}},
		"a fault while scaling":     {Replicas: 5, ReplicasAfter: 3, Faults: []Fault{kill}},
	} {
		if Admissible(s) == nil {
			t.Errorf("%s: admitted", name)
		}
	}
	for name, s := range map[string]Step{
		"one down of three": {Replicas: 3, ReplicasAfter: 3, Faults: []Fault{kill}},
		"two down of five":  {Replicas: 5, ReplicasAfter: 5, Faults: []Fault{kill, {Kind: Partition}}},
		"a scale-down":      {Replicas: 5, ReplicasAfter: 3, Faults: []Fault{{Kind: CrashScaleDown}}},
	} {
		if err := Admissible(s); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestGlobalEvents(t *testing.T) {
	cfg := GlobalConfig{
		Kinds: []Kind{NodeStop, OperatorDown, Kill},
		Every: [2]int{3, 5},
		Lanes: []GlobalLane{{Cluster: "c3", Kinds: ShortKinds}, {Cluster: "c5", Kinds: ShortKinds}, {Cluster: "m3", Kinds: []Kind{DiskFill}}},
	}
	g := NewGlobalScheduler(3, cfg, DefaultTiming)
	replicas := map[string]int32{"c3": 3, "c5": 5, "m3": 3}
	seen := map[Kind]int{}
	for range 40 {
		ev, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		seen[ev.Fault.Kind]++
		if err := AdmissibleGlobal(ev, replicas); err != nil {
			t.Fatal(err)
		}
		if ev.After < 3 || ev.After > 5 {
			t.Fatalf("a global fault after %d steps", ev.After)
		}
		if ev.Fault.Kind == OperatorDown {
			if len(ev.MemberFaults) != 2 {
				t.Fatalf("an outage with %d member faults, want one in each PVC cluster: %+v", len(ev.MemberFaults), ev.MemberFaults)
			}
			for _, f := range ev.MemberFaults {
				if f.Kind == WipeSeed || f.Cluster == "m3" {
					t.Fatalf("an outage brought %s to %s", f.Kind, f.Cluster)
				}
			}
		}
	}
	if seen[NodeStop] != 20 || seen[OperatorDown] != 20 || seen[Kill] != 0 {
		t.Fatalf("global kinds drawn: %v", seen)
	}
	if AdmissibleGlobal(GlobalEvent{Fault: Fault{Kind: NodeStop}, MemberFaults: []Fault{{Kind: Kill, Cluster: "c3"}}}, replicas) == nil {
		t.Fatal("a node stop with a member fault was admitted")
	}
	two := GlobalEvent{Fault: Fault{Kind: OperatorDown}, MemberFaults: []Fault{{Kind: Kill, Cluster: "c3"}, {Kind: Kill, Cluster: "c3"}}}
	if AdmissibleGlobal(two, replicas) == nil {
		t.Fatal("two members of three down during an outage were admitted")
	}
	if _, err := NewGlobalScheduler(1, GlobalConfig{}, DefaultTiming).Next(); err == nil {
		t.Fatal("a global scheduler without kinds drew an event")
	}
}

func TestCandidates(t *testing.T) {
	members := []MemberInfo{{Name: "c-b", Healthy: true}, {Name: "c-a", Seed: true, Healthy: true}, {Name: "c-c", Healthy: true}, {Name: "c-d"}}
	for _, c := range []struct {
		kind  Kind
		avoid bool
		taken map[string]bool
		want  []string
	}{
		{WipeSeed, false, nil, []string{"c-a"}},
		{WipeSeed, true, nil, []string{"c-a"}},
		{WipeMember, false, nil, []string{"c-b", "c-c"}},
		{DeletePVC, false, nil, []string{"c-a", "c-b", "c-c"}},
		{DeletePVC, true, nil, []string{"c-b", "c-c"}},
		{Kill, false, nil, []string{"c-a", "c-b", "c-c"}},
		{Kill, true, nil, []string{"c-b", "c-c"}},
		{Partition, false, map[string]bool{"c-b": true}, []string{"c-a", "c-c"}},
		{WipeSeed, false, map[string]bool{"c-a": true}, nil},
		{CrashReplace, false, nil, []string{"c-a", "c-b", "c-c"}},
		{PauseLeader, false, nil, []string{"c-a"}},
		{PauseLeader, true, nil, []string{"c-a"}},
		{PauseLeader, false, map[string]bool{"c-a": true}, nil},
		{PauseFollower, false, nil, []string{"c-b", "c-c"}},
		{PeerLoss, true, nil, []string{"c-b", "c-c"}},
	} {
		members := slices.Clone(members)
		members[1].Leader = true // the seed leads
		if got := Candidates(c.kind, members, c.avoid, c.taken); !slices.Equal(got, c.want) {
			t.Errorf("%s avoid=%t taken=%v: %v, want %v", c.kind, c.avoid, c.taken, got, c.want)
		}
	}
	unhealthySeed := []MemberInfo{{Name: "c-a", Seed: true}, {Name: "c-b", Healthy: true}}
	if got := Candidates(WipeSeed, unhealthySeed, false, nil); got != nil {
		t.Errorf("a seed that is not healthy is a candidate for its wipe: %v", got)
	}
	if got, _ := PickOne([]string{"a", "b", "c"}, 7); got != "b" {
		t.Fatalf("PickOne by 7 of 3 = %s", got)
	}
	if _, ok := PickOne(nil, 1); ok {
		t.Fatal("picked from nothing")
	}
}

// TestPickNode: a node stop counts for every member on the node, so a node
// that holds two members of a three-member cluster is never stopped; two of
// a five-member cluster is fine.
func TestPickNode(t *testing.T) {
	replicas := map[string]int32{"c3": 3, "c5": 5}
	nodes := []string{"node0", "node1", "node2"}
	onNode := map[string]map[string]int32{
		"node0": {"c3": 2, "c5": 1},
		"node1": {"c3": 1, "c5": 2},
		"node2": {"c5": 3},
	}
	for pick := range uint64(10) {
		if got, ok := PickNode(nodes, onNode, replicas, pick); !ok || got != "node1" {
			t.Fatalf("pick %d: %s, %t; only node1 fits", pick, got, ok)
		}
	}
	onNode["node1"]["c3"] = 2
	if got, ok := PickNode(nodes, onNode, replicas, 0); ok {
		t.Fatalf("picked %s, where no node fits", got)
	}
}

func TestSpanDraw(t *testing.T) {
	s := NewLaneScheduler(1, 0, LaneConfig{Cluster: "x", Replicas: 3, Kinds: []Kind{Partition}}, Timing{PartitionHold: Span{time.Second, 2 * time.Second}})
	for range 100 {
		h := s.Next().Faults[0].Hold
		if h < time.Second || h > 2*time.Second {
			t.Fatalf("a hold of %s outside its span", h)
		}
	}
	if got := (Span{Min: 3 * time.Second}).draw(nil); got != 3*time.Second {
		t.Fatalf("an empty span draws %s", got)
	}
}

func TestParseKinds(t *testing.T) {
	got, err := ParseKinds("kill, partition,kill")
	if err != nil || !slices.Equal(got, []Kind{Kill, Partition}) {
		t.Fatalf("%v, %v", got, err)
	}
	if _, err := ParseKinds("kill,explode"); err == nil {
		t.Fatal("an unknown kind was accepted")
	}
	if _, err := ParseKinds(" , "); err == nil {
		t.Fatal("an empty list was accepted")
	}
	if Tolerance(3) != 1 || Tolerance(5) != 2 || Tolerance(4) != 1 || Tolerance(1) != 0 || Tolerance(0) != 0 {
		t.Fatal("tolerance")
	}
}

// The faults that hold draw their hold, and a packet loss its share, from
// the timing; the global scheduler's member faults do too.
func TestHoldsDrawn(t *testing.T) {
	timing := DefaultTiming
	s := NewLaneScheduler(3, 0, LaneConfig{Cluster: "c", Replicas: 3, Kinds: []Kind{PauseLeader, PauseFollower, PeerLoss, PeerLatency, SlowDisk, Partition}}, timing)
	seen := map[Kind]bool{}
	for range 40 {
		f := s.Next().Faults[0]
		seen[f.Kind] = true
		var span Span
		switch f.Kind {
		case PauseLeader, PauseFollower:
			span = timing.PauseHold
		case PeerLatency:
			span = timing.PeerLossHold
		case SlowDisk:
			span = timing.SlowDiskHold
			if f.IOPS < 4 || f.IOPS > 16 {
				t.Errorf("a slow disk of %d writes per second", f.IOPS)
			}
		case PeerLoss:
			span = timing.PeerLossHold
			if f.Percent < 20 || f.Percent > 50 {
				t.Errorf("a packet loss of %d%%", f.Percent)
			}
		case Partition:
			span = timing.PartitionHold
		}
		if f.Hold < span.Min || f.Hold > span.Max {
			t.Errorf("%s holds %s, outside %v", f.Kind, f.Hold, span)
		}
		if f.Kind != SlowDisk && f.IOPS != 0 {
			t.Errorf("%s allows %d writes per second", f.Kind, f.IOPS)
		}
		if f.Kind != PeerLoss && f.Percent != 0 {
			t.Errorf("%s has a loss of %d%%", f.Kind, f.Percent)
		}
	}
	if len(seen) != 6 {
		t.Fatalf("kinds drawn: %v", seen)
	}
	g := NewGlobalScheduler(3, GlobalConfig{Kinds: []Kind{OperatorDown}, Every: [2]int{1, 1}, Lanes: []GlobalLane{{Cluster: "c", Kinds: []Kind{PeerLoss}}}}, timing)
	ev, err := g.Next()
	if err != nil {
		t.Fatal(err)
	}
	if f := ev.MemberFaults[0]; f.Kind != PeerLoss || f.Hold < timing.PeerLossHold.Min || f.Percent < 20 {
		t.Fatalf("the outage's packet loss: %+v", f)
	}
}
