package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// healthKey is what etcdctl endpoint health reads; reusing it keeps our probe
// indistinguishable from the tool operators already know.
const healthKey = "health"

// failFast makes single-endpoint calls give up as soon as the connection
// fails instead of waiting for it until the deadline (clientv3's default is
// wait-for-ready): a dead member should be reported in milliseconds so the
// reconciler can get on with the living ones.
var failFast = grpc.WaitForReady(false)

type client struct {
	cli       *clientv3.Client
	opts      options
	dial      DialSettings
	endpoints []string

	closeOnce sync.Once
	closeErr  error
}

var _ Client = (*client)(nil)

func (c *client) Endpoints() []string { return slices.Clone(c.endpoints) }

func (c *client) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.cli.Close() })
	return c.closeErr
}

// balanced runs fn through clientv3's round-robin connection under the call
// timeout. A client dialed with learner and voter endpoints reaches a voter:
// clientv3's retry interceptor moves on to the next endpoint when a learner
// refuses an RPC, which is safe because learners refuse before executing.
func (c *client) balanced(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.callTimeout)
	defer cancel()
	if err := fn(ctx); err != nil {
		return &CallError{Op: op, Err: classifyReply(op, err)}
	}
	return nil
}

// single runs fn against exactly one endpoint under its own timeout.
func (c *client) single(ctx context.Context, op, endpoint string, timeout time.Duration, fn func(context.Context, *grpc.ClientConn) error) error {
	if endpoint == "" {
		return &CallError{Op: op, Err: errors.New("no endpoint given")}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := c.onEndpoint(ctx, endpoint, fn)
	// A member that has not applied the exchange of the client's password
	// for its token yet refuses the token (see IsTokenNotKnown); clientv3
	// does not renew it for etcd 3.5's maintenance calls, so ask again as
	// the member catches up, within the call's own time.
	for wait := tokenRetryWait; IsTokenNotKnown(err) && ctx.Err() == nil; wait *= 2 {
		select {
		case <-ctx.Done():
		case <-time.After(wait):
			err = c.onEndpoint(ctx, endpoint, fn)
		}
	}
	if err != nil {
		return &CallError{Op: op, Endpoint: endpoint, Err: classifyReply(op, err)}
	}
	return nil
}

// tokenRetryWait is the first wait before a single-endpoint call refused
// for an unknown token is asked again; a follower applies an entry within
// milliseconds of its commit.
const tokenRetryWait = 50 * time.Millisecond

// onEndpoint runs fn over a connection that can reach only endpoint:
// clientv3's Dial builds it with a resolver holding just that address, and it
// reuses the client's TLS settings, dial options and auth token. clientv3's
// own single-endpoint calls (Maintenance.Status, Defragment) work the same
// way. With addresses, an endpoint they do not map fails here, at once:
// in gRPC's dialer it would look like an unavailable member.
func (c *client) onEndpoint(ctx context.Context, endpoint string, fn func(context.Context, *grpc.ClientConn) error) error {
	if err := c.dial.CheckEndpoints(endpoint); err != nil {
		return err
	}
	conn, err := c.cli.Dial(endpoint)
	if err != nil {
		return fmt.Errorf("failed to dial endpoint: %w", err)
	}
	defer conn.Close()
	// ContextError turns raw gRPC statuses into the rpctypes values and our
	// own deadline into context.DeadlineExceeded, as clientv3 does for the
	// calls it wraps.
	return clientv3.ContextError(ctx, fn(ctx, conn))
}

func (c *client) MemberList(ctx context.Context) (MemberList, error) {
	var list MemberList
	err := c.balanced(ctx, OpMemberList, func(ctx context.Context) error {
		var err error
		list, err = c.memberList(ctx)
		return err
	})
	return list, err
}

func (c *client) memberList(ctx context.Context) (MemberList, error) {
	resp, err := c.cli.MemberList(ctx)
	if err != nil {
		return MemberList{}, err
	}
	return toMemberList(resp.Header, resp.Members), nil
}

func (c *client) MemberAddAsLearner(ctx context.Context, peerURLs []string) (Member, MemberList, error) {
	var (
		added Member
		list  MemberList
	)
	err := c.balanced(ctx, OpMemberAddAsLearner, func(ctx context.Context) error {
		resp, err := c.cli.MemberAddAsLearner(ctx, peerURLs)
		if err != nil {
			return err
		}
		added = toMember(resp.Member)
		list = toMemberList(resp.Header, resp.Members)
		return nil
	})
	return added, list, err
}

func (c *client) MemberPromote(ctx context.Context, id uint64) (MemberList, error) {
	var list MemberList
	err := c.balanced(ctx, OpMemberPromote, func(ctx context.Context) error {
		resp, err := c.cli.MemberPromote(ctx, id)
		if err != nil {
			return err
		}
		list = toMemberList(resp.Header, resp.Members)
		return nil
	})
	return list, err
}

func (c *client) MemberRemove(ctx context.Context, id uint64) (MemberList, error) {
	var list MemberList
	err := c.balanced(ctx, OpMemberRemove, func(ctx context.Context) error {
		resp, err := c.cli.MemberRemove(ctx, id)
		if err != nil {
			return err
		}
		list = toMemberList(resp.Header, resp.Members)
		return nil
	})
	return list, err
}

func (c *client) MemberUpdate(ctx context.Context, id uint64, peerURLs []string) (MemberList, error) {
	var list MemberList
	err := c.balanced(ctx, OpMemberUpdate, func(ctx context.Context) error {
		resp, err := c.cli.MemberUpdate(ctx, id, peerURLs)
		if err != nil {
			return err
		}
		list = toMemberList(resp.Header, resp.Members)
		return nil
	})
	return list, err
}

func (c *client) Status(ctx context.Context, endpoint string) (EndpointStatus, error) {
	var st EndpointStatus
	err := c.single(ctx, OpStatus, endpoint, c.opts.callTimeout, func(ctx context.Context, conn *grpc.ClientConn) error {
		var err error
		st, err = statusOn(ctx, conn, endpoint)
		return err
	})
	return st, err
}

func statusOn(ctx context.Context, conn *grpc.ClientConn, endpoint string) (EndpointStatus, error) {
	resp, err := pb.NewMaintenanceClient(conn).Status(ctx, &pb.StatusRequest{}, failFast)
	if err != nil {
		return EndpointStatus{}, err
	}
	return EndpointStatus{
		Endpoint:         endpoint,
		MemberID:         resp.GetHeader().GetMemberId(),
		ClusterID:        resp.GetHeader().GetClusterId(),
		LeaderID:         resp.GetLeader(),
		RaftTerm:         resp.GetRaftTerm(),
		RaftIndex:        resp.GetRaftIndex(),
		RaftAppliedIndex: resp.GetRaftAppliedIndex(),
		DBSize:           resp.GetDbSize(),
		DBSizeInUse:      resp.GetDbSizeInUse(),
		DBSizeQuota:      resp.GetDbSizeQuota(),
		Version:          resp.GetVersion(),
		IsLearner:        resp.GetIsLearner(),
		Errors:           slices.Clone(resp.GetErrors()),
		Revision:         resp.GetHeader().GetRevision(),
	}, nil
}

func (c *client) MemberListAt(ctx context.Context, endpoint string) (MemberList, error) {
	var list MemberList
	err := c.single(ctx, OpMemberListAt, endpoint, c.opts.callTimeout, func(ctx context.Context, conn *grpc.ClientConn) error {
		// Linearizable=false is what clientv3.WithSerializable sets: the member
		// answers from its local state without asking the leader.
		resp, err := pb.NewClusterClient(conn).MemberList(ctx, &pb.MemberListRequest{Linearizable: false}, failFast)
		if err != nil {
			return err
		}
		list = toMemberList(resp.Header, resp.Members)
		return nil
	})
	return list, err
}

func (c *client) Health(ctx context.Context, endpoint string) error {
	return c.single(ctx, OpHealth, endpoint, c.opts.callTimeout, func(ctx context.Context, conn *grpc.ClientConn) error {
		// Requiring a leader makes a member cut off from quorum answer
		// ErrNoLeader at once instead of letting the read hang to the deadline.
		// Counting alone proves the read went through raft as well as
		// fetching does, and no value a user stored under the key comes back.
		req := &pb.RangeRequest{Key: []byte(healthKey), CountOnly: true}
		_, err := pb.NewKVClient(conn).Range(clientv3.WithRequireLeader(ctx), req, failFast)
		// Permission is checked only after the read went through raft, so a
		// denial still proves the member serves linearizable reads (etcdctl
		// counts it as healthy for the same reason).
		if isEtcdErr(clientv3.ContextError(ctx, err), rpctypes.ErrPermissionDenied) {
			return nil
		}
		return err
	})
}

func (c *client) AlarmList(ctx context.Context) ([]Alarm, error) {
	var alarms []Alarm
	err := c.balanced(ctx, OpAlarmList, func(ctx context.Context) error {
		resp, err := c.cli.AlarmList(ctx)
		if err != nil {
			return err
		}
		alarms = make([]Alarm, 0, len(resp.Alarms))
		for _, a := range resp.Alarms {
			alarms = append(alarms, Alarm{MemberID: a.GetMemberID(), Type: a.GetAlarm().String()})
		}
		return nil
	})
	return alarms, err
}

func (c *client) AlarmDisarm(ctx context.Context, a Alarm) error {
	// etcd treats member 0 with type NONE as "disarm everything"; a zero
	// Alarm reaching us is a caller bug, not a request for that.
	t, ok := pb.AlarmType_value[a.Type]
	if !ok || pb.AlarmType(t) == pb.AlarmType_NONE || a.MemberID == 0 {
		return &CallError{Op: OpAlarmDisarm, Err: fmt.Errorf("failed to disarm alarm %+v: need a member ID and a type of %s or %s", a, AlarmNoSpace, AlarmCorrupt)}
	}
	return c.balanced(ctx, OpAlarmDisarm, func(ctx context.Context) error {
		_, err := c.cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: a.MemberID, Alarm: pb.AlarmType(t)})
		return err
	})
}

func (c *client) Defragment(ctx context.Context, endpoint string) error {
	return c.single(ctx, OpDefragment, endpoint, c.opts.defragTimeout, func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := pb.NewMaintenanceClient(conn).Defragment(ctx, &pb.DefragmentRequest{}, failFast)
		return err
	})
}

func (c *client) Compact(ctx context.Context, revision int64) error {
	// Waiting for the physical compaction takes as long as freeing the old
	// revisions does, which on a large database is more than a call's
	// timeout: it gets the defragmentation's.
	ctx, cancel := context.WithTimeout(ctx, c.opts.defragTimeout)
	defer cancel()
	if _, err := c.cli.Compact(ctx, revision, clientv3.WithCompactPhysical()); err != nil {
		return &CallError{Op: OpCompact, Err: classifyReply(OpCompact, err)}
	}
	return nil
}

// AdvanceLog grants a lease, revokes it, and revokes it again n-2 times. A
// revocation is proposed through raft before anything checks the lease, so
// each is one committed entry; once the lease is gone each applies as a
// no-op, and no key or lease is left.
func (c *client) AdvanceLog(ctx context.Context, n int) error {
	return c.balanced(ctx, OpAdvanceLog, func(ctx context.Context) error {
		grant, err := c.cli.Grant(ctx, 60)
		if err != nil {
			return err
		}
		var wg sync.WaitGroup
		errs := make(chan error, n)
		sem := make(chan struct{}, 16)
		for i := 0; i < max(n-1, 1); i++ {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if _, err := c.cli.Revoke(ctx, grant.ID); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		return <-errs
	})
}

func (c *client) MoveLeader(ctx context.Context, transfereeID uint64) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.callTimeout)
	defer cancel()
	leaderEndpoint, leaderID, answered, err := c.findLeader(ctx)
	if err != nil {
		return &CallError{Op: OpMoveLeader, Err: classifyReply(OpMoveLeader, err)}
	}
	if leaderID == transfereeID {
		return nil
	}
	if err := c.transfereeVotes(ctx, transfereeID, answered); err != nil {
		return err
	}
	// Only the leader accepts MoveLeader; clientv3's Maintenance.MoveLeader
	// goes through the balancer and would hit a follower half the time.
	err = c.onEndpoint(ctx, leaderEndpoint, func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := pb.NewMaintenanceClient(conn).MoveLeader(ctx, &pb.MoveLeaderRequest{TargetID: transfereeID}, failFast)
		return err
	})
	if err != nil {
		return &CallError{Op: OpMoveLeader, Endpoint: leaderEndpoint, Err: classifyReply(OpMoveLeader, err)}
	}
	return nil
}

// transfereeVotes asks the transferee itself whether it votes. A member
// applies its own promotion only once it learns the entry committed, up to
// a heartbeat after the leader did; until then it ignores the leader's
// hand-over (raft's MsgTimeoutNow), the leader gives up after an election
// timeout, and etcd's MoveLeader waits out the caller's whole deadline.
// That is told at once, as a *CallError wrapping ErrTransfereeNotReady. The
// transferee's answer is taken from our own endpoints when it is among
// them: its advertised URL may not be reachable from here (the plugin
// reaches members through port-forward tunnels).
func (c *client) transfereeVotes(ctx context.Context, id uint64, answered []EndpointStatus) error {
	for _, st := range answered {
		if st.MemberID != id {
			continue
		}
		if st.IsLearner {
			return &CallError{Op: OpMoveLeader, Endpoint: st.Endpoint, Err: fmt.Errorf("member %s does not vote yet in its own view (a learner, or a promotion it has not applied): %w", FormatMemberID(id), ErrTransfereeNotReady)}
		}
		return nil
	}
	list, err := c.memberList(ctx)
	if err != nil {
		return &CallError{Op: OpMoveLeader, Err: classifyReply(OpMoveLeader, err)}
	}
	m, ok := list.Find(id)
	switch {
	case !ok:
		return &CallError{Op: OpMoveLeader, Err: fmt.Errorf("member %s: %w", FormatMemberID(id), rpctypes.ErrMemberNotFound)}
	case m.IsLearner:
		return &CallError{Op: OpMoveLeader, Err: fmt.Errorf("member %s is a learner: %w", FormatMemberID(id), ErrTransfereeNotReady)}
	case len(m.ClientURLs) == 0:
		return &CallError{Op: OpMoveLeader, Err: fmt.Errorf("member %s has not started: %w", FormatMemberID(id), ErrTransfereeNotReady)}
	}
	ep := m.ClientURLs[0]
	var st EndpointStatus
	// Half the call's time at most, so that the move itself keeps some.
	pctx, cancel := context.WithTimeout(ctx, c.opts.callTimeout/2)
	defer cancel()
	err = c.onEndpoint(pctx, ep, func(ctx context.Context, conn *grpc.ClientConn) error {
		var err error
		st, err = statusOn(ctx, conn, ep)
		return err
	})
	switch {
	case err != nil:
		// Not reachable from here says nothing of the leader's view of
		// it: let etcd try, as it would without this check.
		return nil
	case st.IsLearner:
		return &CallError{Op: OpMoveLeader, Endpoint: ep, Err: fmt.Errorf("member %s does not vote yet in its own view (a learner, or a promotion it has not applied): %w", FormatMemberID(id), ErrTransfereeNotReady)}
	}
	return nil
}

// findLeader asks every endpoint for its status in parallel and returns the
// endpoint of the member that claims leadership in the highest term, and
// every answer it got. When
// the leader is not among our endpoints it falls back to the client URL the
// leader advertises in the member list.
func (c *client) findLeader(ctx context.Context) (string, uint64, []EndpointStatus, error) {
	statuses := make([]EndpointStatus, len(c.endpoints))
	errs := make([]error, len(c.endpoints))
	var wg sync.WaitGroup
	for i, ep := range c.endpoints {
		wg.Go(func() {
			errs[i] = c.onEndpoint(ctx, ep, func(ctx context.Context, conn *grpc.ClientConn) error {
				var err error
				statuses[i], err = statusOn(ctx, conn, ep)
				return err
			})
			if errs[i] != nil {
				errs[i] = fmt.Errorf("failed to get status of %s: %w", ep, errs[i])
			}
		})
	}
	wg.Wait()

	var answered, claims []EndpointStatus
	for i, st := range statuses {
		if errs[i] != nil {
			continue
		}
		answered = append(answered, st)
		if st.IsLeader() {
			claims = append(claims, st)
		}
	}
	if i := HighestTerm(claims); i >= 0 {
		return claims[i].Endpoint, claims[i].MemberID, answered, nil
	}
	if i := HighestTerm(answered); i >= 0 {
		seen := answered[i]
		list, err := c.memberList(ctx)
		if err != nil {
			return "", 0, nil, fmt.Errorf("failed to look up client URLs of leader %s: %w", FormatMemberID(seen.LeaderID), err)
		}
		if m, ok := list.Find(seen.LeaderID); ok && len(m.ClientURLs) > 0 {
			return m.ClientURLs[0], m.ID, answered, nil
		}
	}
	// ErrNoLeader keeps this classified as IsUnavailable: an election or a
	// partition is in progress, or none of our endpoints answered.
	return "", 0, nil, fmt.Errorf("failed to find the leader among %v: %w", c.endpoints, errors.Join(append([]error{rpctypes.ErrNoLeader}, errs...)...))
}

func toMember(m *pb.Member) Member {
	return Member{
		ID:         m.GetID(),
		Name:       m.GetName(),
		PeerURLs:   slices.Clone(m.GetPeerURLs()),
		ClientURLs: slices.Clone(m.GetClientURLs()),
		IsLearner:  m.GetIsLearner(),
	}
}

func toMemberList(h *pb.ResponseHeader, members []*pb.Member) MemberList {
	list := MemberList{ClusterID: h.GetClusterId(), Members: make([]Member, 0, len(members))}
	for _, m := range members {
		list.Members = append(list.Members, toMember(m))
	}
	return list
}
