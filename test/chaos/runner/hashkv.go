package runner

import (
	"context"
	"fmt"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/chaos"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// hashWithin bounds the wait for every member to answer HashKV at the
// common revision: a member that just caught up may still be applying.
const hashWithin = time.Minute

// hashMembers asks every live member, on its own endpoint, for the hash of
// its key-value store at one revision: the cluster's revision now, read
// linearizably through the client Service. A member behind that revision
// answers with an error until it has applied it, so each is asked until it
// answers or hashWithin has passed.
func (r *run) hashMembers(ctx context.Context, svc *clientv3.Client, cluster string) ([]chaos.MemberHash, error) {
	rev, err := currentRevision(ctx, svc)
	if err != nil {
		return nil, fmt.Errorf("failed to read the revision of %s: %w", cluster, err)
	}
	pods, err := r.env.MemberPods(ctx, r.cfg.Namespace, cluster)
	if err != nil {
		return nil, err
	}
	members, err := r.listMembers(ctx, cluster)
	if err != nil {
		return nil, err
	}
	var out []chaos.MemberHash
	for _, m := range members {
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		h := chaos.MemberHash{Member: m.Name, Revision: rev}
		p := pods[m.Name]
		if p == nil || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			h.Err = "no running Pod with an address"
			out = append(out, h)
			continue
		}
		r.hashMember(ctx, fmt.Sprintf("http://%s:%d", p.Status.PodIP, v1alpha1.ClientPort), &h)
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Member < out[j].Member })
	return out, nil
}

// hashMember fills h from the member's HashKV at h.Revision, or its last
// error.
func (r *run) hashMember(ctx context.Context, ep string, h *chaos.MemberHash) {
	cli, err := framework.EtcdClient(ep)
	if err != nil {
		h.Err = err.Error()
		return
	}
	defer func() { _ = cli.Close() }()
	var last error
	err = framework.WaitFor(ctx, hashWithin, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := cli.HashKV(ctx, ep, h.Revision)
		if err != nil {
			last = err
			return false, nil
		}
		h.Hash, h.HashRevision, h.CompactRevision = resp.Hash, resp.HashRevision, resp.CompactRevision
		return true, nil
	})
	if err != nil {
		if last == nil {
			last = err
		}
		h.Err = last.Error()
	}
}

// serviceClient is a client of the cluster's client Service.
func (r *run) serviceClient(ctx context.Context, cluster string) (*clientv3.Client, error) {
	svc, err := r.env.ClientServiceEndpoint(ctx, r.cfg.Namespace, cluster)
	if err != nil {
		return nil, err
	}
	return framework.EtcdClient(svc)
}
