// Package runner runs a chaos schedule against real clusters on the local
// cluster: it creates the clusters, draws the faults from the seed, injects
// them under the linearizability checker's clients, waits for each recovery
// and checks the invariants, and stops at the first violation, keeping the
// seed, the histories and a dump of the objects.
package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/chaos"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// ClusterSpec is a cluster of the run.
type ClusterSpec struct {
	Name     string
	Replicas int32
	// Memory puts the members on a small tmpfs, for the disk fill.
	Memory bool
	// Kinds are the member faults and operations its lane draws.
	Kinds []chaos.Kind
	// Idle is the pause before each of its steps.
	Idle chaos.Span
}

// Config describes a run.
type Config struct {
	Seed      uint64
	Namespace string
	Clusters  []ClusterSpec
	// GlobalKinds are the global faults (node stop, operator down).
	GlobalKinds []chaos.Kind
	// GlobalEvery is how many cluster steps pass between global faults.
	GlobalEvery [2]int
	// Duration is how long faults are started for; MinFaults keeps the run
	// going past it until that many were injected, MaxFaults ends it early.
	Duration             time.Duration
	MinFaults, MaxFaults int
	Timing               chaos.Timing
	// Overlap is the chance of a second member fault in a step, where the
	// cluster tolerates two.
	Overlap float64
	// RecoveryTimeout bounds the wait from a fault to a recovered cluster.
	RecoveryTimeout time.Duration
	// NodeLostAfter is the clusters' node-loss bound.
	NodeLostAfter int32
	// SelfTest plants a stale read on a live cluster first and requires the
	// checker to catch it.
	SelfTest bool
	// PlantInRun counts the self-test's epoch as an ordinary one: its
	// planted stale read must then fail the run, which shows the read
	// reaches the run's verdict (CHAOS_PLANT_STALE_READ=1).
	PlantInRun bool
	// Artifacts is where the report, histories and dumps go.
	Artifacts string
	Logf      func(format string, args ...any)
}

// run is the state of one run.
type run struct {
	cfg   Config
	env   *framework.Env
	c     client.Client
	start time.Time

	// global is held shared by every lane step and exclusively by a global
	// fault, which thus finds every cluster between steps.
	global sync.RWMutex

	mu       sync.Mutex
	report   *chaos.Report
	steps    int
	stopErr  error
	stopped  chan struct{}
	stopOnce sync.Once
	replicas map[string]int32
	scheds   map[string]*chaos.LaneScheduler
	epochs   map[string]int
	// longestOutage is the longest write outage of an epoch so far, whose
	// history is kept (see finish).
	longestOutage chaos.Seconds
}

// Run runs the chaos schedule and returns its report; the error is what
// stopped it early, also in the report.
func Run(ctx context.Context, env *framework.Env, cfg Config) (*chaos.Report, error) {
	c, err := env.Client()
	if err != nil {
		return nil, err
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.RecoveryTimeout == 0 {
		cfg.RecoveryTimeout = 6 * time.Minute
	}
	r := &run{
		cfg: cfg, env: env, c: c, start: time.Now(), stopped: make(chan struct{}),
		report:   &chaos.Report{Seed: cfg.Seed, Started: time.Now(), Artifacts: cfg.Artifacts},
		replicas: map[string]int32{}, scheds: map[string]*chaos.LaneScheduler{},
	}
	cfg.Logf("chaos: seed %d (replay with CHAOS_SEED=%d), namespace %s, artifacts in %s", cfg.Seed, cfg.Seed, cfg.Namespace, cfg.Artifacts)
	err = r.execute(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.report.Duration = chaos.Seconds(time.Since(r.start))
	if err != nil {
		r.report.Error = err.Error()
	}
	r.report.Summarize()
	if !r.report.Passed() {
		r.keepArtifacts()
	}
	if werr := r.report.WriteJSON(filepath.Join(cfg.Artifacts, "report.json")); werr != nil && err == nil {
		err = werr
	}
	return r.report, err
}

func (r *run) execute(ctx context.Context) error {
	for i, spec := range r.cfg.Clusters {
		if err := r.createCluster(ctx, spec); err != nil {
			return err
		}
		r.report.Clusters = append(r.report.Clusters, chaos.ClusterInfo{Name: spec.Name, Replicas: spec.Replicas, Memory: spec.Memory})
		r.replicas[spec.Name] = spec.Replicas
		r.scheds[spec.Name] = chaos.NewLaneScheduler(r.cfg.Seed, i, chaos.LaneConfig{
			Cluster: spec.Name, Replicas: spec.Replicas, Kinds: spec.Kinds, Overlap: r.cfg.Overlap, Idle: spec.Idle,
		}, r.cfg.Timing)
	}
	for _, spec := range r.cfg.Clusters {
		if _, err := framework.WaitForClusterReady(ctx, r.c, r.cfg.Namespace, spec.Name, 5*time.Minute); err != nil {
			return fmt.Errorf("failed to bring cluster %s up: %w", spec.Name, err)
		}
	}
	if r.cfg.SelfTest {
		rec, err := r.selfTest(ctx, r.cfg.Clusters[0].Name)
		r.mu.Lock()
		r.report.SelfTest = rec
		r.mu.Unlock()
		if err != nil && r.cfg.PlantInRun {
			return err
		}
		if err != nil {
			return fmt.Errorf("the self-test failed: %w", err)
		}
		if !rec.Caught {
			return errors.New("the self-test's planted stale read was not caught by the checker")
		}
		r.cfg.Logf("chaos: self-test: the planted stale read was caught (%s over %d operations)", rec.Result, rec.Operations)
	}
	var wg sync.WaitGroup
	for _, spec := range r.cfg.Clusters {
		if len(spec.Kinds) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.lane(ctx, spec.Name)
		}()
	}
	if len(r.cfg.GlobalKinds) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.globalLane(ctx)
		}()
	}
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopErr
}

func (r *run) createCluster(ctx context.Context, spec ClusterSpec) error {
	cl := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: r.cfg.Namespace},
		Spec: v1alpha1.EtcdClusterSpec{
			Replicas: ptr.To(spec.Replicas),
			MemberTemplate: v1alpha1.MemberTemplate{
				Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("256Mi"))},
			},
		},
	}
	if r.cfg.NodeLostAfter > 0 {
		cl.Spec.SelfHeal.NodeLostAfterSeconds = ptr.To(r.cfg.NodeLostAfter)
	}
	if spec.Memory {
		cl.Spec.Storage = v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: ptr.To(resource.MustParse(memorySize))}
	}
	if err := r.c.Create(ctx, cl); err != nil {
		return fmt.Errorf("failed to create cluster %s: %w", spec.Name, err)
	}
	return nil
}

// stop ends the run with err; the first error wins.
func (r *run) stop(err error) {
	r.stopOnce.Do(func() {
		r.mu.Lock()
		r.stopErr = err
		r.mu.Unlock()
		close(r.stopped)
	})
}

// more reports whether another fault may start.
func (r *run) more() bool {
	select {
	case <-r.stopped:
		return false
	default:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.report.Faults)
	if r.cfg.MaxFaults > 0 && n >= r.cfg.MaxFaults {
		return false
	}
	return time.Since(r.start) < r.cfg.Duration || n < r.cfg.MinFaults
}

// pause waits d, or less if the run stops.
func (r *run) pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.stopped:
		return false
	case <-ctx.Done():
		return false
	}
}

// lane runs one cluster's steps until the run ends.
func (r *run) lane(ctx context.Context, cluster string) {
	sched := r.scheds[cluster]
	for r.more() {
		step := sched.Next()
		if err := chaos.Admissible(step); err != nil {
			r.stop(fmt.Errorf("the schedule broke its own rule: %w", err))
			return
		}
		if !r.pause(ctx, step.Idle) || !r.more() {
			return
		}
		if len(step.Faults) == 0 {
			continue
		}
		r.global.RLock()
		err := r.runStep(ctx, step, sched)
		r.global.RUnlock()
		if err != nil {
			r.stop(err)
			return
		}
		r.mu.Lock()
		r.steps++
		r.replicas[cluster] = step.ReplicasAfter
		r.mu.Unlock()
	}
}

// globalLane runs the global faults between cluster steps.
func (r *run) globalLane(ctx context.Context) {
	var lanes []chaos.GlobalLane
	for _, s := range r.cfg.Clusters {
		lanes = append(lanes, chaos.GlobalLane{Cluster: s.Name, Kinds: s.Kinds})
	}
	g := chaos.NewGlobalScheduler(r.cfg.Seed, chaos.GlobalConfig{Kinds: r.cfg.GlobalKinds, Every: r.cfg.GlobalEvery, Lanes: lanes}, r.cfg.Timing)
	for r.more() {
		ev, err := g.Next()
		if err != nil {
			r.stop(err)
			return
		}
		r.mu.Lock()
		due := r.steps + ev.After
		r.mu.Unlock()
		for {
			r.mu.Lock()
			done := r.steps >= due
			r.mu.Unlock()
			if done || !r.more() {
				break
			}
			if !r.pause(ctx, time.Second) {
				return
			}
		}
		if !r.more() {
			return
		}
		r.global.Lock()
		r.mu.Lock()
		replicas := map[string]int32{}
		for k, v := range r.replicas {
			replicas[k] = v
		}
		r.mu.Unlock()
		if err := chaos.AdmissibleGlobal(ev, replicas); err != nil {
			r.global.Unlock()
			r.stop(fmt.Errorf("the schedule broke its own rule: %w", err))
			return
		}
		err = r.runGlobal(ctx, ev, replicas)
		r.global.Unlock()
		if err != nil {
			r.stop(err)
			return
		}
	}
}

// record adds an injected fault to the report.
func (r *run) record(f chaos.FaultRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.report.Faults = append(r.report.Faults, f)
	note := ""
	if f.Note != "" {
		note = " (" + f.Note + ")"
	}
	r.cfg.Logf("chaos: %-26s %-8s %-22s %s to Ready %s%s", f.Kind, f.Cluster, f.Victim, f.Step, f.ToReady, note)
}

// violation ends the run with an invariant that did not hold.
func (r *run) violation(v chaos.Violation) error {
	r.mu.Lock()
	r.report.InvariantViolations = append(r.report.InvariantViolations, v)
	r.mu.Unlock()
	return fmt.Errorf("invariant %s", v)
}

// keepArtifacts writes the dump of the objects; the caller holds mu.
func (r *run) keepArtifacts() {
	if err := os.MkdirAll(r.cfg.Artifacts, 0o755); err != nil {
		return
	}
	f, err := os.Create(filepath.Join(r.cfg.Artifacts, "objects.txt"))
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	fmt.Fprintf(f, "chaos seed %d\n", r.cfg.Seed)
	r.env.DumpNamespaceTo(f, r.cfg.Namespace)
	_ = os.WriteFile(filepath.Join(r.cfg.Artifacts, "seed"), []byte(fmt.Sprintf("%d\n", r.cfg.Seed)), 0o644)
}
