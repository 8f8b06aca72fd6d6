package runner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/chaos"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
	"github.com/quorumctl/etcd-operator/test/linearizability"
)

// selfTest shows that the run's own pipeline catches a stale read served by
// a live member. It starts an epoch, the workload and all, as a step does;
// meanwhile one member is cut off from its peers (its clients still reach
// it), a value is written through another member and acknowledged, and the
// cut-off member answers a read from its own store with the value before.
// That read goes into the epoch's history as what the workload's reads are,
// a linearizable read, and the epoch is checked as every epoch is: the
// linearizability check must call it illegal, while the writes, the final
// values and the members' hashes must all hold. The read really is served
// stale by etcd: only its label in the history is planted.
//
// The self-test's epoch is marked as such, so its expected violation does
// not count against the run, unless plantInRun is set: then it is an
// ordinary epoch and the run must fail with its violation, which shows the
// planted read reaches the run's verdict.
func (r *run) selfTest(ctx context.Context, cluster string) (*chaos.SelfTestRecord, error) {
	e, err := r.startEpoch(ctx, cluster)
	if err != nil {
		return nil, err
	}
	e.selfTest = !r.cfg.PlantInRun
	if err := r.plantStaleRead(ctx, e); err != nil {
		e.abort()
		return nil, fmt.Errorf("failed to plant a stale read: %w", err)
	}
	err = r.finish(ctx, e, true)
	rec := r.epochRecord(e)
	if rec == nil {
		return nil, errors.Join(err, errors.New("the self-test's epoch was not recorded"))
	}
	st := &chaos.SelfTestRecord{Caught: rec.Result == "Illegal", Result: rec.Result, Operations: rec.Operations, Visualization: rec.Visualization, Cluster: rec.Cluster, Epoch: rec.Index}
	if err != nil && r.cfg.PlantInRun {
		err = fmt.Errorf("the planted stale read, counted as an ordinary epoch's (CHAOS_PLANT_STALE_READ=1), failed the run: %w", err)
	}
	return st, err
}

// epochRecord is the record of an epoch once finished.
func (r *run) epochRecord(e *epoch) *chaos.EpochRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.report.Epochs {
		if ep := &r.report.Epochs[i]; ep.Cluster == e.cluster && ep.Index == e.index {
			c := *ep
			return &c
		}
	}
	return nil
}

// plantStaleRead adds to the epoch's history a stale read that a member cut
// off from its peers really serves, on a key of the epoch's prefix that the
// workload does not use, and heals the member.
func (r *run) plantStaleRead(ctx context.Context, e *epoch) error {
	pods, err := r.env.MemberPods(ctx, r.cfg.Namespace, e.cluster)
	if err != nil {
		return err
	}
	members, err := r.members(ctx, e.cluster)
	if err != nil {
		return err
	}
	if len(members) < 3 {
		return fmt.Errorf("the self-test needs 3 members, %s has %d", e.cluster, len(members))
	}
	stale, writer := pods[members[1].Name], pods[members[2].Name]
	if stale == nil || writer == nil {
		return errors.New("the self-test's members have no Pods")
	}
	ep := func(ip string) string { return fmt.Sprintf("http://%s:%d", ip, v1alpha1.ClientPort) }
	wcli, err := framework.EtcdClient(ep(writer.Status.PodIP))
	if err != nil {
		return err
	}
	defer func() { _ = wcli.Close() }()
	scli, err := framework.EtcdClient(ep(stale.Status.PodIP))
	if err != nil {
		return err
	}
	defer func() { _ = scli.Close() }()

	h := e.w.History()
	key := e.prefix + "self-test"
	put := func(value string) error {
		// A write can time out while the cut-off member was the leader and
		// the others elect another. Each attempt writes a value of its
		// own, and one that timed out goes into the history as of unknown
		// outcome, as the workload records it: the same value written
		// twice would be one write applied twice in etcd's history.
		client := h.NewClientID()
		for attempt := 0; ; attempt++ {
			v := value + "-" + strconv.Itoa(attempt)
			op := linearizability.Op{ClientID: client, Endpoint: ep(writer.Status.PodIP), Input: linearizability.Input{Kind: linearizability.KindPut, Key: key, Value: v}, Call: h.Now()}
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := wcli.Put(cctx, key, v)
			cancel()
			op.Return = h.Now()
			if err == nil {
				h.Add(op)
				return nil
			}
			op.Output.Unknown = true
			h.Add(op)
			client = h.NewClientID()
			if attempt >= 5 || ctx.Err() != nil {
				return fmt.Errorf("failed to write %s: %w", value, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	localRead := func(ctx context.Context) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		resp, err := scli.Get(cctx, key, clientv3.WithSerializable())
		if err != nil || len(resp.Kvs) == 0 {
			return "", err
		}
		return string(resp.Kvs[0].Value), nil
	}
	if err := put("before"); err != nil {
		return err
	}
	var before string
	if err := framework.WaitFor(ctx, 30*time.Second, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		v, err := localRead(ctx)
		before = v
		return v != "", err
	}); err != nil {
		return fmt.Errorf("%s never applied the first write: %w", stale.Name, err)
	}
	if err := framework.PartitionPodPorts(ctx, stale, time.Now().Add(2*time.Minute), v1alpha1.PeerPort); err != nil {
		return err
	}
	healed := false
	defer func() {
		if healed {
			return
		}
		hctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = framework.HealPartition(hctx, stale)
	}()
	if err := put("after"); err != nil {
		return err
	}
	call := h.Now()
	got, err := localRead(ctx)
	if err != nil {
		return fmt.Errorf("the member cut off from its peers did not answer: %w", err)
	}
	if got != before {
		return fmt.Errorf("the member cut off from its peers read %q, not the stale value %q: nothing was planted", got, before)
	}
	h.Add(linearizability.Op{ClientID: h.NewClientID(), Endpoint: ep(stale.Status.PodIP), Input: linearizability.Input{Kind: linearizability.KindGet, Key: key},
		Output: linearizability.Output{Value: got}, Call: call, Return: h.Now()})
	if err := framework.HealPartition(ctx, stale); err != nil {
		return err
	}
	healed = true
	// The healed member must catch up before the epoch ends.
	_, err = r.env.WaitForPodReady(ctx, r.cfg.Namespace, stale.Name, 2*time.Minute)
	return err
}
