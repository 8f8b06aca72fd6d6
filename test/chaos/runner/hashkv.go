package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
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

// hashMarkKey is written before the members are hashed.
const hashMarkKey = "chaos-hash-mark"

// hashMembers asks every voter, on its own endpoint, for the hash of its
// key-value store at one revision: the cluster's revision now, read
// linearizably through the client Service. A member behind that revision
// answers with an error until it has applied it, and one behind the latest
// compaction another member reports hashes more revisions (a compaction is
// an entry of the log like any other, which a follower applies up to a
// heartbeat after the leader); so each is asked until it answers at the
// latest compaction seen or hashWithin has passed. Only etcd's voters are
// hashed, by their EtcdMember's name: a learner the operator has just added
// (self-heal may replace a member at any time) may have no Pod yet, and
// holds no data anyone relies on.
func (r *run) hashMembers(ctx context.Context, svc *clientv3.Client, cluster string) ([]chaos.MemberHash, error) {
	// A member keeps the hash it computed when it finished a compaction,
	// and answers HashKV at exactly that revision with it: a hash from the
	// compaction before, which a member that did not compute it (one that
	// joined from a snapshot) does not give. The checker's own compaction
	// is at the latest revision, so one write past it first.
	if err := framework.WaitFor(ctx, finalReadWithin, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err := svc.Put(ctx, hashMarkKey, "")
		return err == nil, err
	}); err != nil {
		return nil, fmt.Errorf("failed to write past the compaction of %s: %w", cluster, err)
	}
	rev, err := currentRevision(ctx, svc)
	if err != nil {
		return nil, fmt.Errorf("failed to read the revision of %s: %w", cluster, err)
	}
	voters, err := votersByName(ctx, svc)
	if err != nil {
		return nil, fmt.Errorf("failed to list the members of %s: %w", cluster, err)
	}
	members, err := r.listMembers(ctx, cluster)
	if err != nil {
		return nil, err
	}
	var out []chaos.MemberHash
	for _, m := range members {
		if !m.DeletionTimestamp.IsZero() || !voters[m.Name] {
			continue
		}
		out = append(out, chaos.MemberHash{Member: m.Name, Revision: rev})
	}
	hashEach(ctx, out, func(ctx context.Context, name string) (string, error) { return r.podEndpoint(ctx, cluster, name) })
	sort.Slice(out, func(i, j int) bool { return out[i].Member < out[j].Member })
	return out, nil
}

// hashEach fills each of hs from its member's HashKV, on the endpoint
// endpoint gives for it, then asks again those that answered behind the
// latest compaction seen until they have applied it.
func hashEach(ctx context.Context, hs []chaos.MemberHash, endpoint func(context.Context, string) (string, error)) {
	eps := make([]string, len(hs))
	// etcd reports -1 before its first compaction.
	compacted := int64(math.MinInt64)
	for i := range hs {
		ep, err := endpoint(ctx, hs[i].Member)
		if err != nil {
			hs[i].Err = err.Error()
			continue
		}
		eps[i] = ep
		hashMember(ctx, ep, &hs[i], math.MinInt64)
		compacted = max(compacted, hs[i].CompactRevision)
	}
	behind := false
	for i := range hs {
		if h := &hs[i]; h.Err == "" && h.CompactRevision < compacted {
			hashMember(ctx, eps[i], h, compacted)
			behind = behind || h.CompactRevision < compacted
		}
	}
	if behind {
		// Each member's raft view, the one ahead included, for the report.
		for i := range hs {
			if hs[i].Err == "" {
				hs[i].Raft = raftView(ctx, eps[i])
			}
		}
	}
}

// raftView is the member's own Status, as one line.
func raftView(ctx context.Context, ep string) string {
	cli, err := framework.EtcdClient(ep)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, ep)
	if err != nil {
		return "no status: " + err.Error()
	}
	return fmt.Sprintf("member %x sees leader %x in term %d, raft index %d, applied %d, revision %d", st.Header.MemberId, st.Leader, st.RaftTerm, st.RaftIndex, st.RaftAppliedIndex, st.Header.Revision)
}

// votersByName is the set of the names etcd lists as voters.
func votersByName(ctx context.Context, svc *clientv3.Client) (map[string]bool, error) {
	var names map[string]bool
	err := framework.WaitFor(ctx, finalReadWithin, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		resp, err := svc.MemberList(ctx)
		if err != nil {
			return false, nil
		}
		names = map[string]bool{}
		for _, m := range resp.Members {
			if !m.IsLearner {
				names[m.Name] = true
			}
		}
		return true, nil
	})
	return names, err
}

// podEndpoint is the client URL of the member's running Pod, once it has an
// address (within hashWithin).
func (r *run) podEndpoint(ctx context.Context, cluster, name string) (string, error) {
	var ep string
	err := framework.WaitFor(ctx, hashWithin, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		pods, err := r.env.MemberPods(ctx, r.cfg.Namespace, cluster)
		if err != nil {
			return false, nil
		}
		if p := pods[name]; p != nil && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			ep = fmt.Sprintf("http://%s:%d", p.Status.PodIP, v1alpha1.ClientPort)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return "", errors.New("no running Pod with an address")
	}
	return ep, nil
}

// hashMember fills h from the member's HashKV at h.Revision, at a
// compaction no older than compacted, or its last error. Having answered
// at all, it keeps that answer if the compaction is not reached in time.
func hashMember(ctx context.Context, ep string, h *chaos.MemberHash, compacted int64) {
	cli, err := framework.EtcdClient(ep)
	if err != nil {
		h.Err = err.Error()
		return
	}
	defer func() { _ = cli.Close() }()
	var last error
	answered := false
	err = framework.WaitFor(ctx, hashWithin, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := cli.HashKV(ctx, ep, h.Revision)
		if err != nil {
			last = err
			return false, nil
		}
		answered = true
		h.Hash, h.HashRevision, h.CompactRevision = resp.Hash, resp.HashRevision, resp.CompactRevision
		return resp.CompactRevision >= compacted, nil
	})
	if err != nil && !answered {
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
