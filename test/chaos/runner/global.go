package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/test/chaos"
)

// runGlobal runs a global fault with a workload on every cluster.
func (r *run) runGlobal(ctx context.Context, ev chaos.GlobalEvent, replicas map[string]int32) error {
	var clusters []string
	for _, s := range r.cfg.Clusters {
		clusters = append(clusters, s.Name)
	}
	step := fmt.Sprintf("global#%d", ev.Index)
	return r.withEpochs(ctx, clusters, func() error {
		switch ev.Fault.Kind {
		case chaos.NodeStop:
			return r.nodeStop(ctx, ev, replicas, clusters, step)
		case chaos.OperatorDown:
			return r.operatorDown(ctx, ev, clusters, step)
		}
		return fmt.Errorf("%s is not a global fault", ev.Fault.Kind)
	})
}

// nodeStop stops a node whose loss every cluster tolerates, starts it again
// after the hold, and waits until every cluster has recovered.
func (r *run) nodeStop(ctx context.Context, ev chaos.GlobalEvent, replicas map[string]int32, clusters []string, step string) error {
	nodes, err := r.env.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	onNode := map[string]map[string]int32{}
	var names []string
	byCluster := map[string][]chaos.MemberInfo{}
	for _, n := range nodes.Items {
		names = append(names, n.Name)
		onNode[n.Name] = map[string]int32{}
	}
	for _, c := range clusters {
		ms, err := r.members(ctx, c)
		if err != nil {
			return err
		}
		byCluster[c] = ms
		for _, m := range ms {
			if onNode[m.Node] != nil {
				onNode[m.Node][c]++
			}
		}
	}
	node, ok := chaos.PickNode(names, onNode, replicas, ev.Fault.Pick)
	if !ok {
		r.cfg.Logf("chaos: %s: no node can be stopped within every cluster's tolerance; skipped", step)
		return nil
	}
	rec := &chaos.FaultRecord{Kind: chaos.NodeStop, Victim: node, Step: step}
	victims := map[string][]victim{}
	var hit []string
	for _, c := range clusters {
		for _, m := range byCluster[c] {
			if m.Node != node {
				continue
			}
			before, err := r.memberState(ctx, m.Name)
			if err != nil {
				return err
			}
			victims[c] = append(victims[c], victim{fault: rec, recovery: chaos.RecoverBack, before: before})
			hit = append(hit, m.Name)
		}
	}
	rec.Note = fmt.Sprintf("stopped for %s; members on it: %s", ev.Fault.Hold.Round(100*time.Millisecond), strings.Join(hit, ", "))
	rec.Injected = time.Now()
	if err := r.env.Layout.StopNode(ctx, node); err != nil {
		return fmt.Errorf("failed to stop node %s: %w", node, err)
	}
	// The node comes back whatever happens meanwhile: the run must not leave
	// the local cluster a node short.
	t := time.NewTimer(ev.Fault.Hold)
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	startCtx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := r.env.StartNode(startCtx, node); err != nil {
		return fmt.Errorf("failed to start node %s again: %w", node, err)
	}
	return r.recoverAll(ctx, clusters, victims, rec)
}

// recoverAll waits for every cluster; a fault that hit several clusters is
// recorded once, with the longest time to Ready.
func (r *run) recoverAll(ctx context.Context, clusters []string, victims map[string][]victim, global *chaos.FaultRecord) error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	for _, c := range clusters {
		vs := victims[c]
		if len(vs) == 0 {
			// The cluster was not hit, but must still be well: an invariant
			// check without a victim.
			vs = []victim{{fault: &chaos.FaultRecord{Kind: "none"}}}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := r.waitRecovered(ctx, c, vs, false)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	now := time.Now()
	seen := map[*chaos.FaultRecord]bool{}
	for _, vs := range victims {
		for _, v := range vs {
			if v.fault != global && !seen[v.fault] {
				seen[v.fault] = true
				v.fault.ToReady = chaos.Seconds(now.Sub(v.fault.Injected))
				r.record(*v.fault)
			}
		}
	}
	global.ToReady = chaos.Seconds(now.Sub(global.Injected))
	r.record(*global)
	return nil
}

// operatorDown scales the operator to zero, injects one member fault per
// cluster while it is down, holds the outage, brings it back and waits.
func (r *run) operatorDown(ctx context.Context, ev chaos.GlobalEvent, clusters []string, step string) error {
	replicas, err := r.env.OperatorReplicas(ctx)
	if err != nil {
		return err
	}
	rec := &chaos.FaultRecord{Kind: chaos.OperatorDown, Victim: "operator", Step: step, Injected: time.Now()}
	if err := r.env.ScaleOperatorTo(ctx, 0); err != nil {
		return fmt.Errorf("failed to scale the operator to 0: %w", err)
	}
	victims := map[string][]victim{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	// One map for the whole outage: two faults drawn for one cluster must
	// hit two members, as the admission of the event counted them.
	taken := map[string]bool{}
	for _, f := range ev.MemberFaults {
		name, err := r.pickVictim(ctx, f, taken)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if name == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := r.memberFault(ctx, f, name, step)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if v != nil {
				victims[f.Cluster] = append(victims[f.Cluster], *v)
			}
		}()
	}
	wg.Wait()
	t := time.NewTimer(ev.Fault.Hold)
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	// The operator comes back whatever happened: a run must not leave the
	// local cluster without it.
	upCtx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := r.env.ScaleOperatorTo(upCtx, replicas); err != nil {
		errs = append(errs, fmt.Errorf("failed to scale the operator back to %d: %w", replicas, err))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return r.recoverAll(ctx, clusters, victims, rec)
}
