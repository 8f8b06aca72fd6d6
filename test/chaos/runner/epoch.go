package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quorumctl/etcd-operator/test/chaos"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
	"github.com/quorumctl/etcd-operator/test/linearizability"
)

// Workload settings: a few keys so that clients collide, two clients per
// member and on the Service, and a pause after a failure so that a member
// that is down does not fill the history with calls of unknown outcome.
const (
	epochKeys       = 6
	clientsPerEp    = 2
	errorPause      = 250 * time.Millisecond
	checkTimeout    = 90 * time.Second
	finalReadWithin = 2 * time.Minute
)

// epoch is one stretch of a cluster's history: a workload on fresh keys
// against the members of the moment and the client Service, from before a
// step's faults until the cluster has recovered from them.
type epoch struct {
	cluster string
	index   int
	prefix  string
	// startRev is the cluster's revision before the workload's first call.
	startRev int64
	w        *linearizability.Workload
	// kube is the Kubernetes-like traffic beside the workload, on keys of
	// its own that nothing else writes.
	kube *kubeTraffic
	// selfTest marks the self-test's epoch, whose history must be illegal.
	selfTest bool
}

func (r *run) nextEpoch(cluster string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.epochs == nil {
		r.epochs = map[string]int{}
	}
	i := r.epochs[cluster]
	r.epochs[cluster]++
	return i
}

func (r *run) startEpoch(ctx context.Context, cluster string) (*epoch, error) {
	eps, err := r.env.MemberEndpoints(ctx, r.cfg.Namespace, cluster)
	if err != nil {
		return nil, fmt.Errorf("failed to find the members of %s: %w", cluster, err)
	}
	svc, err := r.env.ClientServiceEndpoint(ctx, r.cfg.Namespace, cluster)
	if err != nil {
		return nil, fmt.Errorf("failed to find the client Service of %s: %w", cluster, err)
	}
	e := &epoch{cluster: cluster, index: r.nextEpoch(cluster)}
	e.prefix = fmt.Sprintf("chaos/%d/%s/%d/", r.cfg.Seed, cluster, e.index)
	if e.startRev, err = r.revision(ctx, svc); err != nil {
		return nil, fmt.Errorf("failed to read the revision of %s before its workload: %w", cluster, err)
	}
	e.w, err = linearizability.Start(linearizability.Config{
		Endpoints: append(eps, svc), ClientsPerEndpoint: clientsPerEp, Keys: epochKeys,
		KeyPrefix: e.prefix, ErrorPause: errorPause, Seed: r.cfg.Seed + uint64(e.index)*7919 + 1,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to start the workload on %s: %w", cluster, err)
	}
	// Outside the workload's prefix: its history replay allows no delete.
	kubePrefix := fmt.Sprintf("kube/%d/%s/%d/", r.cfg.Seed, cluster, e.index)
	if e.kube, err = startKubeTraffic(append(eps, svc), kubePrefix, r.cfg.Seed+uint64(e.index)*7919+2); err != nil {
		e.w.Stop()
		return nil, err
	}
	return e, nil
}

// abort stops an epoch's traffic without checking it.
func (e *epoch) abort() {
	e.w.Stop()
	e.kube.halt()
}

// finish stops the workload and checks the epoch: its history must be
// linearizable; every key's final value, and etcd's own history of the keys,
// must hold every acknowledged write; and, when the step recovered, every
// member must hash its store alike at a common revision. It records the
// epoch; a history not proven linearizable, a lost write or different hashes
// is an error that ends the run.
func (r *run) finish(ctx context.Context, e *epoch, recovered bool) error {
	h := e.w.Stop()
	// An error before the watches are checked must not leave the
	// Kubernetes-like traffic running.
	defer e.kube.halt()
	name := fmt.Sprintf("%s-%03d", e.cluster, e.index)
	viz := filepath.Join(r.cfg.Artifacts, "histories", name+".html")
	rep, err := h.Check(linearizability.CheckOptions{Timeout: checkTimeout, VisualizationPath: viz})
	if err != nil {
		return err
	}
	rec := chaos.EpochRecord{
		Cluster: e.cluster, Index: e.index, Operations: rep.Operations, Acknowledged: rep.Acknowledged,
		Unknown: rep.Unknown, Result: resultName(rep.Result), Visualization: rep.Visualization,
		LongestWriteOutage: chaos.Seconds(rep.LongestWriteOutage),
		OutageStarted:      r.historyStart(e).Add(rep.WriteOutageStart),
		StartRevision:      e.startRev,
		SelfTest:           e.selfTest,
		Recovered:          recovered,
	}
	for _, n := range rep.Failed {
		rec.Failed += n
	}
	ops := h.Ops()
	svc, err := r.serviceClient(ctx, e.cluster)
	if err != nil {
		return err
	}
	defer func() { _ = svc.Close() }()
	lost, err := r.finalReads(ctx, svc, e, ops)
	if err != nil {
		return err
	}
	events, err := r.writeEvents(ctx, svc, e)
	if err != nil {
		return err
	}
	found, problems := chaos.CheckWrites(ops, events)
	rec.WritesChecked, rec.Lost = found, append(lost, problems...)
	// After the workload's history is replayed: the watchers' compaction
	// removes the revisions the replay reads.
	watchErrs := r.checkWatches(ctx, e, name, recovered, &rec)
	var hashViolations []chaos.Violation
	if recovered {
		if rec.Hashes, err = r.hashMembers(ctx, svc, e.cluster); err != nil {
			return err
		}
		if len(rec.Hashes) > 0 {
			rec.HashRevision = rec.Hashes[0].Revision
		}
		hashViolations = chaos.CompareHashes(rec.Hashes)
	}
	r.mu.Lock()
	r.report.Epochs = append(r.report.Epochs, rec)
	if rec.LongestWriteOutage > r.longestOutage {
		r.longestOutage = rec.LongestWriteOutage
		// The report names the run's longest write outage; its history,
		// kept under one name and replaced by a longer one, shows which
		// clients stalled and what their calls returned.
		if err := saveHistory(filepath.Join(r.cfg.Artifacts, "histories", "longest-write-outage.json"), ops); err != nil {
			r.cfg.Logf("chaos: %v", err)
		}
	}
	r.mu.Unlock()
	if rep.Result != porcupine.Ok || len(rec.Lost) > 0 {
		if err := saveHistory(filepath.Join(r.cfg.Artifacts, "histories", name+".json"), ops); err != nil {
			r.cfg.Logf("chaos: %v", err)
		}
	}
	errs := watchErrs
	switch {
	case e.selfTest && rep.Result != porcupine.Illegal:
		errs = append(errs, fmt.Errorf("history %s: the self-test's planted stale read was not caught: %s", name, rep))
	case !e.selfTest && rep.Result != porcupine.Ok:
		errs = append(errs, fmt.Errorf("history %s: %w", name, rep.Err()))
	}
	if len(rec.Lost) > 0 {
		errs = append(errs, fmt.Errorf("history %s: %d acknowledged writes lost: %v", name, len(rec.Lost), rec.Lost))
	}
	for _, v := range hashViolations {
		errs = append(errs, fmt.Errorf("history %s: %w", name, r.violation(v)))
	}
	return errors.Join(errs...)
}

// historyStart approximates when the workload's clock read zero: the
// report only needs the outage's wall-clock start to the second.
func (r *run) historyStart(e *epoch) time.Time {
	return time.Now().Add(-e.w.History().Now())
}

func resultName(res porcupine.CheckResult) string {
	switch res {
	case porcupine.Ok:
		return "Ok"
	case porcupine.Illegal:
		return "Illegal"
	}
	return "Unknown"
}

// finalReads reads every key of the epoch through the client Service,
// linearizably, and checks each value against the acknowledged writes.
func (r *run) finalReads(ctx context.Context, cli *clientv3.Client, e *epoch, ops []linearizability.Op) ([]string, error) {
	var lost []string
	for i := range epochKeys {
		key := e.prefix + strconv.Itoa(i)
		var value string
		err := framework.WaitFor(ctx, finalReadWithin, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
			ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			resp, err := cli.Get(ctx, key)
			if err != nil {
				return false, err
			}
			value = ""
			if len(resp.Kvs) > 0 {
				value = string(resp.Kvs[0].Value)
			}
			return true, nil
		})
		if err != nil {
			return nil, fmt.Errorf("failed to read %s at the end of its history: %w", key, err)
		}
		if err := chaos.FinalRead(ops, key, value); err != nil {
			lost = append(lost, err.Error())
		}
	}
	return lost, nil
}

func saveHistory(path string, ops []linearizability.Op) error { return saveJSON(path, ops) }

func saveJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return fmt.Errorf("failed to encode the history: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("failed to create the directory of %s: %w", path, err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("failed to write the history to %s: %w", path, err)
	}
	return nil
}

// withEpochs runs fn with a workload on each cluster and checks every
// history afterwards, even when fn failed; fn's error comes first.
func (r *run) withEpochs(ctx context.Context, clusters []string, fn func() error) error {
	var eps []*epoch
	for _, c := range clusters {
		e, err := r.startEpoch(ctx, c)
		if err != nil {
			for _, e := range eps {
				e.abort()
			}
			return err
		}
		eps = append(eps, e)
	}
	err := fn()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, e := range eps {
		if err := r.finish(ctx, e, err == nil); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkWatches ends the epoch's Kubernetes-like traffic and checks its
// watches. When the cluster has recovered, the first watcher is first made
// to meet a compaction, and every watcher must then reach the writer's last
// acknowledged write; when it has not, the watches are checked as far as
// they went. Every broken guarantee is an error; so is a compaction that
// could not be made in a recovered cluster.
func (r *run) checkWatches(ctx context.Context, e *epoch, name string, recovered bool, rec *chaos.EpochRecord) []error {
	var errs []error
	if recovered {
		if _, err := e.kube.compact(ctx); err != nil {
			errs = append(errs, fmt.Errorf("history %s: failed to make a watcher meet a compaction: %w", name, err))
		}
	}
	h, err := e.kube.stop(ctx, recovered)
	events, violations := chaos.CheckWatches(h)
	if err != nil {
		violations = append(violations, chaos.Violation{Invariant: chaos.InvWatchCaughtUp, Detail: err.Error()})
	}
	rec.KubeWrites, rec.WatchEvents, rec.WatchCompactions, rec.WatchViolations = acknowledged(h), events, len(h.Compactions), violations
	if len(violations) > 0 {
		if err := saveJSON(filepath.Join(r.cfg.Artifacts, "histories", name+"-watch.json"), h); err != nil {
			r.cfg.Logf("chaos: %v", err)
		}
	}
	for _, v := range violations {
		errs = append(errs, fmt.Errorf("history %s: watch invariant %s", name, v))
	}
	return errs
}
