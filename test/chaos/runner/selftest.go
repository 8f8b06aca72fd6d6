package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/chaos"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
	"github.com/quorumctl/etcd-operator/test/linearizability"
)

// selfTest shows the checker catches a stale read served by a live member.
// One member is cut off from its peers (its clients still reach it); a
// value is written through another member and acknowledged; the cut-off
// member then answers a read from its own store with the value before.
// That read is recorded in the history as what the workload's reads are,
// a linearizable read, and the checker must call the history illegal. The
// read really is served stale by etcd: only its label in the history is
// planted.
func (r *run) selfTest(ctx context.Context, cluster string) (*chaos.SelfTestRecord, error) {
	pods, err := r.env.MemberPods(ctx, r.cfg.Namespace, cluster)
	if err != nil {
		return nil, err
	}
	members, err := r.members(ctx, cluster)
	if err != nil {
		return nil, err
	}
	if len(members) < 3 {
		return nil, fmt.Errorf("the self-test needs 3 members, %s has %d", cluster, len(members))
	}
	stale, writer := pods[members[1].Name], pods[members[2].Name]
	if stale == nil || writer == nil {
		return nil, errors.New("the self-test's members have no Pods")
	}
	ep := func(ip string) string { return fmt.Sprintf("http://%s:%d", ip, v1alpha1.ClientPort) }
	wcli, err := framework.EtcdClient(ep(writer.Status.PodIP))
	if err != nil {
		return nil, err
	}
	defer func() { _ = wcli.Close() }()
	scli, err := framework.EtcdClient(ep(stale.Status.PodIP))
	if err != nil {
		return nil, err
	}
	defer func() { _ = scli.Close() }()

	h := linearizability.NewHistory()
	key := fmt.Sprintf("chaos/%d/self-test", r.cfg.Seed)
	put := func(value string) error {
		op := linearizability.Op{ClientID: 0, Endpoint: ep(writer.Status.PodIP), Input: linearizability.Input{Kind: linearizability.KindPut, Key: key, Value: value}, Call: h.Now()}
		// A write can time out while the cut-off member was the leader
		// and the others elect another. Writing the same value again is
		// one put that took effect somewhere between the first call and
		// the last return, which is what the history records.
		err := framework.WaitFor(ctx, time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, err := wcli.Put(cctx, key, value)
			return err == nil, nil
		})
		if err != nil {
			return fmt.Errorf("failed to write %s: %w", value, err)
		}
		op.Return = h.Now()
		h.Add(op)
		return nil
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
		return nil, err
	}
	if err := framework.WaitFor(ctx, 30*time.Second, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		v, err := localRead(ctx)
		return v == "before", err
	}); err != nil {
		return nil, fmt.Errorf("%s never applied the first write: %w", stale.Name, err)
	}
	if err := framework.PartitionPodPorts(ctx, stale, time.Now().Add(2*time.Minute), v1alpha1.PeerPort); err != nil {
		return nil, err
	}
	defer func() {
		hctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = framework.HealPartition(hctx, stale)
	}()
	if err := put("after"); err != nil {
		return nil, err
	}
	call := h.Now()
	got, err := localRead(ctx)
	if err != nil {
		return nil, fmt.Errorf("the member cut off from its peers did not answer: %w", err)
	}
	if got != "before" {
		return nil, fmt.Errorf("the member cut off from its peers read %q, not the stale value: nothing was planted", got)
	}
	h.Add(linearizability.Op{ClientID: 1, Endpoint: ep(stale.Status.PodIP), Input: linearizability.Input{Kind: linearizability.KindGet, Key: key},
		Output: linearizability.Output{Value: got}, Call: call, Return: h.Now()})
	h.Close()
	if err := framework.HealPartition(ctx, stale); err != nil {
		return nil, err
	}
	rep, err := h.Check(linearizability.CheckOptions{Timeout: time.Minute, VisualizationPath: filepath.Join(r.cfg.Artifacts, "self-test.html")})
	if err != nil {
		return nil, err
	}
	// The healed member must catch up before the faults begin.
	if _, err := r.env.WaitForPodReady(ctx, r.cfg.Namespace, stale.Name, 2*time.Minute); err != nil {
		return nil, err
	}
	return &chaos.SelfTestRecord{Caught: rep.Result == porcupine.Illegal, Result: resultName(rep.Result), Operations: rep.Operations, Visualization: rep.Visualization}, nil
}
