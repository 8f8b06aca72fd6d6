package runner

import (
	"slices"
	"testing"

	"github.com/quorumctl/etcd-operator/test/chaos"
)

// The short run's lanes, drawn as the runner draws them, cover at least
// eight kinds within the first 25 faults, and every step keeps the overlap
// rule.
func TestShortConfigCoversEightKindsInTwentyFiveFaults(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		cfg := ShortConfig(seed, "ns", t.TempDir())
		kinds := map[chaos.Kind]bool{}
		faults, overlaps := 0, 0
		for i, c := range cfg.Clusters {
			s := chaos.NewLaneScheduler(seed, i, chaos.LaneConfig{Cluster: c.Name, Replicas: c.Replicas, Kinds: c.Kinds, Overlap: cfg.Overlap, Idle: c.Idle}, cfg.Timing)
			for range 13 {
				step := s.Next()
				if err := chaos.Admissible(step); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				for _, f := range step.Faults {
					kinds[f.Kind] = true
					faults++
				}
				if len(step.Faults) > 1 {
					if c.Replicas < 5 {
						t.Fatalf("seed %d: the %d-member %s overlaps faults: %+v", seed, c.Replicas, c.Name, step)
					}
					overlaps++
				}
			}
		}
		if overlaps == 0 {
			t.Fatalf("seed %d: no step of the 5-member cluster overlaps two faults in 13", seed)
		}
		if faults < 25 || len(kinds) < 8 {
			t.Fatalf("seed %d: %d faults of %d kinds in 13 steps per lane", seed, faults, len(kinds))
		}
	}
}

func TestWithoutDropsKindsAndEmptyClusters(t *testing.T) {
	cfg := LongConfig(1, "ns", t.TempDir(), 0, 0).Without([]chaos.Kind{chaos.DiskFill, chaos.Kill, chaos.DeletePod, chaos.Partition, chaos.NodeStop})
	for _, c := range cfg.Clusters {
		if c.Memory {
			t.Errorf("the Memory cluster, left with no kind, is still there: %+v", c)
		}
		if slices.Contains(c.Kinds, chaos.Kill) {
			t.Errorf("%s still draws kill", c.Name)
		}
	}
	if len(cfg.Clusters) != 2 || !slices.Equal(cfg.GlobalKinds, []chaos.Kind{chaos.OperatorDown}) {
		t.Errorf("clusters %d, global kinds %v", len(cfg.Clusters), cfg.GlobalKinds)
	}
}

// The same-peer-URL replacement (a member's claim and Pod deleted) is drawn
// by every cluster on volumes, in both runs, and never by the Memory
// cluster, whose members have no claim.
func TestDeletePVCOnEveryVolumeCluster(t *testing.T) {
	for _, cfg := range []Config{ShortConfig(1, "ns", t.TempDir()), LongConfig(1, "ns", t.TempDir(), 0, 0)} {
		for _, c := range cfg.Clusters {
			if got := slices.Contains(c.Kinds, chaos.DeletePVC); got == c.Memory {
				t.Errorf("%s (Memory %t) draws delete-pvc: %t", c.Name, c.Memory, got)
			}
		}
	}
}
