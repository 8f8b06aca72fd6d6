package fake

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// errNotSupportedForLearner is what a learner answers to anything but Status.
var errNotSupportedForLearner = rpctypes.Error(rpctypes.ErrGRPCNotSupportedForLearner)

// Client talks to the fake cluster through a fixed set of endpoints, as a
// real client does: balanced calls need one of them to reach a voter, and
// single-endpoint calls only ever look at their target.
type Client struct {
	f *Fake
	// endpoints is nil for the Fake's own Client methods, which see every
	// member's client URLs.
	endpoints []string
	// dial is what Dial was given; with addresses, a single-endpoint call
	// to an endpoint they do not map fails as the real client's does.
	dial   etcd.DialSettings
	closed bool
}

// Dial records the endpoints and returns a Client bound to them. It does
// not check reachability, just as the real Dial does not.
func (f *Fake) Dial(ctx context.Context, endpoints []string, opts ...etcd.DialOption) (etcd.Client, error) {
	eps := slices.Clone(endpoints)
	dial := etcd.ResolveDial(etcd.DialSettings{}, opts...)
	if err := f.begin(ctx, nil, Call{Op: etcd.OpDial, Endpoints: eps, Dial: dial}); err != nil {
		return nil, fail(etcd.OpDial, "", err)
	}
	if len(eps) == 0 {
		return nil, fail(etcd.OpDial, "", errors.New("no endpoints given"))
	}
	if err := dial.CheckEndpoints(eps...); err != nil {
		return nil, fail(etcd.OpDial, "", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkDial(dial); err != nil {
		return nil, fail(etcd.OpDial, "", err)
	}
	f.Dialed = append(f.Dialed, slices.Clone(eps))
	f.open++
	return &Client{f: f, endpoints: eps, dial: dial}, nil
}

// begin records the call and applies scripted failures. It runs hooks
// without the lock so that they may reconfigure the fake.
func (f *Fake) begin(ctx context.Context, c *Client, call Call) error {
	f.mu.Lock()
	f.Calls = append(f.Calls, call)
	if err := ctx.Err(); err != nil {
		f.mu.Unlock()
		return err
	}
	if c != nil && c.closed {
		f.mu.Unlock()
		return context.Canceled
	}
	if c != nil {
		if err := c.permit(call.Op); err != nil {
			f.mu.Unlock()
			return err
		}
	}
	var injected error
	if q := f.failNext[call.Op]; len(q) > 0 {
		injected, f.failNext[call.Op] = q[0], q[1:]
	}
	hook := f.hooks[call.Op]
	f.mu.Unlock()
	if injected != nil {
		return injected
	}
	if hook != nil {
		return hook(call)
	}
	return nil
}

// fail wraps err like the real client does, leaving a scripted *CallError
// untouched so tests can inject exactly what they want.
func fail(op, endpoint string, err error) error {
	var ce *etcd.CallError
	if errors.As(err, &ce) {
		return err
	}
	return &etcd.CallError{Op: op, Endpoint: endpoint, Err: err}
}

// eps must be called with f.mu held.
func (c *Client) eps() []string {
	if c.endpoints != nil {
		return c.endpoints
	}
	var out []string
	for _, m := range c.f.members {
		out = append(out, m.ClientURLs...)
	}
	return out
}

// reachLeader reports what a balanced, linearizable call through c's
// endpoints runs into. Real clientv3 skips learners and waits for a
// connection until the deadline, which is what we return when nothing
// reachable is left. Must be called with f.mu held.
func (c *Client) reachLeader() error {
	f := c.f
	sawLearner := false
	for _, ep := range c.eps() {
		m, ok := f.memberAt(ep)
		if !ok || f.endpointErr[ep] != nil {
			continue
		}
		if m.IsLearner {
			sawLearner = true
			continue
		}
		if f.leaderID == 0 {
			return context.DeadlineExceeded
		}
		return nil
	}
	if sawLearner {
		return errNotSupportedForLearner
	}
	return context.DeadlineExceeded
}

// reach returns the member serving endpoint. Must be called with f.mu held.
func (c *Client) reach(endpoint string) (etcd.Member, error) {
	if err := c.dial.CheckEndpoints(endpoint); err != nil {
		return etcd.Member{}, err
	}
	if err := c.f.endpointErr[endpoint]; err != nil {
		return etcd.Member{}, err
	}
	m, ok := c.f.memberAt(endpoint)
	if !ok {
		return etcd.Member{}, ErrUnreachable
	}
	return m, nil
}

func (c *Client) Endpoints() []string {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	return slices.Clone(c.eps())
}

func (c *Client) Close() error {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	if !c.closed && c.endpoints != nil {
		c.f.open--
	}
	c.closed = true
	return nil
}

func (c *Client) MemberList(ctx context.Context) (etcd.MemberList, error) {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpMemberList, Endpoints: c.Endpoints()}); err != nil {
		return etcd.MemberList{}, fail(etcd.OpMemberList, "", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := c.reachLeader(); err != nil {
		return etcd.MemberList{}, fail(etcd.OpMemberList, "", err)
	}
	return f.list(), nil
}

func (c *Client) MemberAddAsLearner(ctx context.Context, peerURLs []string) (etcd.Member, etcd.MemberList, error) {
	f := c.f
	urls := slices.Clone(peerURLs)
	if err := f.begin(ctx, c, Call{Op: etcd.OpMemberAddAsLearner, Endpoints: c.Endpoints(), PeerURLs: urls}); err != nil {
		return etcd.Member{}, etcd.MemberList{}, fail(etcd.OpMemberAddAsLearner, "", err)
	}
	// Like clientv3, reject malformed URLs before contacting anyone.
	if err := validatePeerURLs(urls); err != nil {
		return etcd.Member{}, etcd.MemberList{}, fail(etcd.OpMemberAddAsLearner, "", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := c.reachLeader(); err != nil {
		return etcd.Member{}, etcd.MemberList{}, fail(etcd.OpMemberAddAsLearner, "", err)
	}
	// Same order of checks as etcd's membership validation.
	for _, m := range f.members {
		for _, u := range urls {
			if slices.Contains(m.PeerURLs, u) {
				return etcd.Member{}, etcd.MemberList{}, fail(etcd.OpMemberAddAsLearner, "", rpctypes.ErrPeerURLExist)
			}
		}
	}
	learners := 0
	for _, m := range f.members {
		if m.IsLearner {
			learners++
		}
	}
	if learners >= f.maxLearners {
		return etcd.Member{}, etcd.MemberList{}, fail(etcd.OpMemberAddAsLearner, "", rpctypes.ErrTooManyLearners)
	}
	m := etcd.Member{ID: f.newID(urls), PeerURLs: urls, IsLearner: true}
	f.members = append(f.members, m)
	f.AddedLearners = append(f.AddedLearners, slices.Clone(urls))
	return cloneMember(m), f.list(), nil
}

func validatePeerURLs(urls []string) error {
	if len(urls) == 0 {
		return errors.New("failed to add member: no peer URLs given")
	}
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil {
			return fmt.Errorf("failed to parse peer URL %q: %w", s, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("failed to add member: peer URL %q must be http(s)://host:port", s)
		}
	}
	return nil
}

func (c *Client) MemberPromote(ctx context.Context, id uint64) (etcd.MemberList, error) {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpMemberPromote, Endpoints: c.Endpoints(), ID: id}); err != nil {
		return etcd.MemberList{}, fail(etcd.OpMemberPromote, "", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := c.reachLeader(); err != nil {
		return etcd.MemberList{}, fail(etcd.OpMemberPromote, "", err)
	}
	i := f.indexOf(id)
	switch {
	case i < 0:
		return etcd.MemberList{}, fail(etcd.OpMemberPromote, "", rpctypes.ErrMemberNotFound)
	case !f.members[i].IsLearner:
		return etcd.MemberList{}, fail(etcd.OpMemberPromote, "", rpctypes.ErrMemberNotLearner)
	case f.members[i].Name == "" || f.notReady[id]:
		return etcd.MemberList{}, fail(etcd.OpMemberPromote, "", rpctypes.ErrMemberLearnerNotReady)
	}
	f.members[i].IsLearner = false
	f.Promoted = append(f.Promoted, id)
	return f.list(), nil
}

func (c *Client) MemberUpdate(ctx context.Context, id uint64, peerURLs []string) (etcd.MemberList, error) {
	f := c.f
	urls := slices.Clone(peerURLs)
	if err := f.begin(ctx, c, Call{Op: etcd.OpMemberUpdate, Endpoints: c.Endpoints(), ID: id, PeerURLs: urls}); err != nil {
		return etcd.MemberList{}, fail(etcd.OpMemberUpdate, "", err)
	}
	if err := validatePeerURLs(urls); err != nil {
		return etcd.MemberList{}, fail(etcd.OpMemberUpdate, "", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := c.reachLeader(); err != nil {
		return etcd.MemberList{}, fail(etcd.OpMemberUpdate, "", err)
	}
	i := f.indexOf(id)
	if i < 0 {
		return etcd.MemberList{}, fail(etcd.OpMemberUpdate, "", rpctypes.ErrMemberNotFound)
	}
	// etcd refuses a URL another member already has.
	for j, m := range f.members {
		for _, u := range urls {
			if j != i && slices.Contains(m.PeerURLs, u) {
				return etcd.MemberList{}, fail(etcd.OpMemberUpdate, "", rpctypes.ErrPeerURLExist)
			}
		}
	}
	f.members[i].PeerURLs = urls
	return f.list(), nil
}

func (c *Client) MemberRemove(ctx context.Context, id uint64) (etcd.MemberList, error) {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpMemberRemove, Endpoints: c.Endpoints(), ID: id}); err != nil {
		return etcd.MemberList{}, fail(etcd.OpMemberRemove, "", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := c.reachLeader(); err != nil {
		return etcd.MemberList{}, fail(etcd.OpMemberRemove, "", err)
	}
	i := f.indexOf(id)
	if i < 0 {
		return etcd.MemberList{}, fail(etcd.OpMemberRemove, "", rpctypes.ErrMemberNotFound)
	}
	f.members = slices.Delete(f.members, i, i+1)
	f.alarms = slices.DeleteFunc(f.alarms, func(a etcd.Alarm) bool { return a.MemberID == id })
	delete(f.notReady, id)
	if f.leaderID == id {
		// The remaining voters elect a new leader; pick one deterministically.
		next := uint64(0)
		if j := slices.IndexFunc(f.members, func(m etcd.Member) bool { return !m.IsLearner }); j >= 0 {
			next = f.members[j].ID
		}
		f.setLeader(next)
	}
	f.Removed = append(f.Removed, id)
	return f.list(), nil
}

func (c *Client) Status(ctx context.Context, endpoint string) (etcd.EndpointStatus, error) {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpStatus, Endpoints: c.Endpoints(), Endpoint: endpoint}); err != nil {
		return etcd.EndpointStatus{}, fail(etcd.OpStatus, endpoint, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.statuses[endpoint]; ok && f.endpointErr[endpoint] == nil {
		st.Errors = slices.Clone(st.Errors)
		return st, nil
	}
	m, err := c.reach(endpoint)
	if err != nil {
		return etcd.EndpointStatus{}, fail(etcd.OpStatus, endpoint, err)
	}
	u := f.usageOf(endpoint)
	st := etcd.EndpointStatus{
		Endpoint:         endpoint,
		MemberID:         m.ID,
		ClusterID:        f.clusterID,
		LeaderID:         f.leaderID,
		RaftTerm:         f.raftTerm,
		RaftIndex:        uint64(f.revision),
		RaftAppliedIndex: uint64(f.revision),
		Revision:         f.revision,
		DBSize:           u.DBSize,
		DBSizeInUse:      u.InUse,
		DBSizeQuota:      u.Quota,
		Version:          f.version,
		IsLearner:        m.IsLearner,
	}
	// Alarms are the cluster's, replicated through raft: every member
	// lists all of them, whoever raised them.
	for _, a := range f.alarms {
		st.Errors = append(st.Errors, fmt.Sprintf("memberID:%d alarm:%s", a.MemberID, a.Type))
	}
	return st, nil
}

func (c *Client) MemberListAt(ctx context.Context, endpoint string) (etcd.MemberList, error) {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpMemberListAt, Endpoints: c.Endpoints(), Endpoint: endpoint}); err != nil {
		return etcd.MemberList{}, fail(etcd.OpMemberListAt, endpoint, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := c.reach(endpoint)
	if err != nil {
		return etcd.MemberList{}, fail(etcd.OpMemberListAt, endpoint, err)
	}
	if m.IsLearner {
		return etcd.MemberList{}, fail(etcd.OpMemberListAt, endpoint, errNotSupportedForLearner)
	}
	if l, ok := f.listsAt[endpoint]; ok {
		return cloneList(l), nil
	}
	// Serializable: answered from local state even without a leader.
	return f.list(), nil
}

func (c *Client) Health(ctx context.Context, endpoint string) error {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpHealth, Endpoints: c.Endpoints(), Endpoint: endpoint}); err != nil {
		return fail(etcd.OpHealth, endpoint, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := c.reach(endpoint)
	switch {
	case err != nil:
		return fail(etcd.OpHealth, endpoint, err)
	case m.IsLearner:
		return fail(etcd.OpHealth, endpoint, errNotSupportedForLearner)
	case f.leaderID == 0:
		return fail(etcd.OpHealth, endpoint, rpctypes.ErrNoLeader)
	}
	return nil
}

func (c *Client) AlarmList(ctx context.Context) ([]etcd.Alarm, error) {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpAlarmList, Endpoints: c.Endpoints()}); err != nil {
		return nil, fail(etcd.OpAlarmList, "", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := c.reachLeader(); err != nil {
		return nil, fail(etcd.OpAlarmList, "", err)
	}
	return append([]etcd.Alarm{}, f.alarms...), nil
}

func (c *Client) AlarmDisarm(ctx context.Context, a etcd.Alarm) error {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpAlarmDisarm, Endpoints: c.Endpoints(), Alarm: a}); err != nil {
		return fail(etcd.OpAlarmDisarm, "", err)
	}
	if t, ok := pb.AlarmType_value[a.Type]; !ok || pb.AlarmType(t) == pb.AlarmType_NONE || a.MemberID == 0 {
		return fail(etcd.OpAlarmDisarm, "", fmt.Errorf("failed to disarm alarm %+v: need a member ID and a type of %s or %s", a, etcd.AlarmNoSpace, etcd.AlarmCorrupt))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := c.reachLeader(); err != nil {
		return fail(etcd.OpAlarmDisarm, "", err)
	}
	f.alarms = slices.DeleteFunc(f.alarms, func(x etcd.Alarm) bool { return x == a })
	f.Disarmed = append(f.Disarmed, a)
	return nil
}

func (c *Client) Defragment(ctx context.Context, endpoint string) error {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpDefragment, Endpoints: c.Endpoints(), Endpoint: endpoint}); err != nil {
		return fail(etcd.OpDefragment, endpoint, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := c.reach(endpoint); err != nil {
		return fail(etcd.OpDefragment, endpoint, err)
	}
	if u, ok := f.usage[endpoint]; ok {
		u.DBSize = u.InUse
		f.usage[endpoint] = u
	}
	f.Defragmented = append(f.Defragmented, endpoint)
	return nil
}

func (c *Client) Compact(ctx context.Context, revision int64) error {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpCompact, Endpoints: c.Endpoints(), Revision: revision}); err != nil {
		return fail(etcd.OpCompact, "", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := c.reachLeader(); err != nil {
		return fail(etcd.OpCompact, "", err)
	}
	switch {
	case revision <= f.compactRev:
		return fail(etcd.OpCompact, "", rpctypes.ErrCompacted)
	case revision > f.revision:
		return fail(etcd.OpCompact, "", rpctypes.ErrFutureRev)
	}
	f.compactRev = revision
	f.Compacted = append(f.Compacted, revision)
	return nil
}

func (c *Client) MoveLeader(ctx context.Context, transfereeID uint64) error {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpMoveLeader, Endpoints: c.Endpoints(), ID: transfereeID}); err != nil {
		return fail(etcd.OpMoveLeader, "", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	leader, err := c.findLeader()
	if err != nil {
		return fail(etcd.OpMoveLeader, "", err)
	}
	if leader.ID == transfereeID {
		return nil
	}
	// As the real client, the transferee is asked first whether it votes.
	i := f.indexOf(transfereeID)
	switch {
	case i < 0:
		return fail(etcd.OpMoveLeader, "", rpctypes.ErrMemberNotFound)
	case f.members[i].IsLearner || len(f.members[i].ClientURLs) == 0:
		return fail(etcd.OpMoveLeader, "", etcd.ErrTransfereeNotReady)
	}
	if f.endpointErr[f.members[i].ClientURLs[0]] != nil {
		// A transferee that is down never takes over; the call times out.
		return fail(etcd.OpMoveLeader, leader.ClientURLs[0], context.DeadlineExceeded)
	}
	f.setLeader(transfereeID)
	f.MovedLeader = append(f.MovedLeader, transfereeID)
	return nil
}

// findLeader mirrors the real client: the leader must answer, and some
// endpoint of ours must be up to tell us who it is. Must be called with
// f.mu held.
func (c *Client) findLeader() (etcd.Member, error) {
	f := c.f
	i := f.indexOf(f.leaderID)
	reachable := slices.ContainsFunc(c.eps(), func(ep string) bool {
		_, err := c.reach(ep)
		return err == nil
	})
	if i < 0 || !reachable || len(f.members[i].ClientURLs) == 0 || f.endpointErr[f.members[i].ClientURLs[0]] != nil {
		return etcd.Member{}, fmt.Errorf("failed to find the leader among %v: %w", c.eps(), rpctypes.ErrNoLeader)
	}
	return f.members[i], nil
}

// The Fake is itself a Client that reaches every member, for tests that do
// not care about endpoints.

func (f *Fake) self() *Client { return &Client{f: f} }

func (f *Fake) MemberList(ctx context.Context) (etcd.MemberList, error) {
	return f.self().MemberList(ctx)
}

func (f *Fake) MemberAddAsLearner(ctx context.Context, peerURLs []string) (etcd.Member, etcd.MemberList, error) {
	return f.self().MemberAddAsLearner(ctx, peerURLs)
}

func (f *Fake) MemberPromote(ctx context.Context, id uint64) (etcd.MemberList, error) {
	return f.self().MemberPromote(ctx, id)
}

func (f *Fake) MemberUpdate(ctx context.Context, id uint64, peerURLs []string) (etcd.MemberList, error) {
	return f.self().MemberUpdate(ctx, id, peerURLs)
}

func (f *Fake) MemberRemove(ctx context.Context, id uint64) (etcd.MemberList, error) {
	return f.self().MemberRemove(ctx, id)
}

func (f *Fake) Status(ctx context.Context, endpoint string) (etcd.EndpointStatus, error) {
	return f.self().Status(ctx, endpoint)
}

func (f *Fake) MemberListAt(ctx context.Context, endpoint string) (etcd.MemberList, error) {
	return f.self().MemberListAt(ctx, endpoint)
}

func (f *Fake) Health(ctx context.Context, endpoint string) error {
	return f.self().Health(ctx, endpoint)
}

func (f *Fake) AlarmList(ctx context.Context) ([]etcd.Alarm, error) {
	return f.self().AlarmList(ctx)
}

func (f *Fake) AlarmDisarm(ctx context.Context, a etcd.Alarm) error {
	return f.self().AlarmDisarm(ctx, a)
}

func (f *Fake) Defragment(ctx context.Context, endpoint string) error {
	return f.self().Defragment(ctx, endpoint)
}

// AdvanceLog commits n entries: the raft index moves, and as the real
// revocations do, the revision moves with it in this fake, whose index is
// its revision.
func (c *Client) AdvanceLog(ctx context.Context, n int) error {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpAdvanceLog, Endpoints: c.Endpoints()}); err != nil {
		return fail(etcd.OpAdvanceLog, "", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := c.reachLeader(); err != nil {
		return fail(etcd.OpAdvanceLog, "", err)
	}
	f.revision += int64(n)
	return nil
}

func (f *Fake) AdvanceLog(ctx context.Context, n int) error {
	return f.self().AdvanceLog(ctx, n)
}

func (f *Fake) Compact(ctx context.Context, revision int64) error {
	return f.self().Compact(ctx, revision)
}

func (f *Fake) MoveLeader(ctx context.Context, transfereeID uint64) error {
	return f.self().MoveLeader(ctx, transfereeID)
}

func (f *Fake) Endpoints() []string { return f.self().Endpoints() }

// Close is a no-op: the Fake's own Client view is never dialed.
func (f *Fake) Close() error { return nil }
