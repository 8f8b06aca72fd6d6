package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quorumctl/etcd-operator/test/chaos"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// revisionKey is read for its response header alone: the revision.
const revisionKey = "chaos-revision"

// revision reads the cluster's revision linearizably through an endpoint.
func (r *run) revision(ctx context.Context, endpoint string) (int64, error) {
	cli, err := framework.EtcdClient(endpoint)
	if err != nil {
		return 0, err
	}
	defer func() { _ = cli.Close() }()
	return currentRevision(ctx, cli)
}

// currentRevision reads the cluster's revision linearizably, retrying for as
// long as the final reads do.
func currentRevision(ctx context.Context, cli *clientv3.Client) (int64, error) {
	var rev int64
	err := framework.WaitFor(ctx, finalReadWithin, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, revisionKey)
		if err != nil {
			return false, err
		}
		rev = resp.Header.Revision
		return true, nil
	})
	return rev, err
}

// writeEvents replays etcd's history of the epoch's keys: every put since
// the epoch started, from a watch at the revision after its start up to the
// latest revision of any of its keys, read linearizably first. Only the
// workload writes those keys, and nothing deletes them.
func (r *run) writeEvents(ctx context.Context, cli *clientv3.Client, e *epoch) ([]chaos.WriteEvent, error) {
	var last int64
	err := framework.WaitFor(ctx, finalReadWithin, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, e.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return false, err
		}
		last = 0
		for _, kv := range resp.Kvs {
			last = max(last, kv.ModRevision)
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to list the keys of %s: %w", e.prefix, err)
	}
	if last <= e.startRev {
		return nil, nil
	}
	var events []chaos.WriteEvent
	err = framework.WaitFor(ctx, finalReadWithin, time.Second, func(ctx context.Context) (bool, error) {
		events = nil
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		wch := cli.Watch(clientv3.WithRequireLeader(ctx), e.prefix, clientv3.WithPrefix(), clientv3.WithRev(e.startRev+1))
		for resp := range wch {
			if err := resp.Err(); err != nil {
				if resp.CompactRevision > 0 {
					return false, framework.Final(fmt.Errorf("the history of %s from revision %d is compacted (at %d): %w", e.prefix, e.startRev+1, resp.CompactRevision, err))
				}
				return false, err
			}
			for _, ev := range resp.Events {
				if ev.Type != clientv3.EventTypePut {
					return false, framework.Final(fmt.Errorf("%s was deleted at revision %d; nothing deletes the workload's keys", ev.Kv.Key, ev.Kv.ModRevision))
				}
				events = append(events, chaos.WriteEvent{Key: string(ev.Kv.Key), Value: string(ev.Kv.Value), Revision: ev.Kv.ModRevision})
				if ev.Kv.ModRevision >= last {
					return true, nil
				}
			}
		}
		return false, errors.New("the watch ended before it reached the last revision")
	})
	if err != nil {
		return nil, fmt.Errorf("failed to replay the history of %s: %w", e.prefix, err)
	}
	return events, nil
}
