package fake

import (
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// DefaultClusterID is the cluster ID of a new Fake; fixed so that test
// expectations can spell it out.
const DefaultClusterID uint64 = 0xfa4ec1a5fa4ec1a5

// Version is what the fake reports as the server version in Status unless
// SetVersion says otherwise.
const Version = "3.7.3"

// ErrUnreachable is what calls to a down endpoint return. It has the shape of
// a refused gRPC connection, so etcd.IsUnavailable recognises it.
var ErrUnreachable = status.Error(codes.Unavailable, "fake: endpoint unreachable")

// Call is one recorded call. Only the fields that the operation takes are set.
type Call struct {
	Op string
	// Endpoints are the endpoints of the client that made the call (for
	// Dial: the endpoints being dialed).
	Endpoints []string
	// Endpoint is the target of a single-endpoint call.
	Endpoint string
	// ID is the member of MemberPromote, MemberRemove, MemberUpdate and
	// MoveLeader.
	ID       uint64
	PeerURLs []string
	Revision int64
	Alarm    etcd.Alarm
	// Dial is what a Dial was given (the cluster's client TLS).
	Dial etcd.DialSettings
}

// Hook is consulted on every call of the operation it is set for, before
// the fake applies the call. A non-nil error fails the call with it (wrapped
// in an *etcd.CallError); nil lets the call proceed. Hooks run without the
// fake's lock held, so they may call the fake's setters, for example to
// simulate the cluster changing underneath the caller.
type Hook func(Call) error

var knownOps = map[string]bool{
	etcd.OpDial: true, etcd.OpMemberList: true, etcd.OpMemberAddAsLearner: true,
	etcd.OpMemberPromote: true, etcd.OpMemberRemove: true, etcd.OpMemberUpdate: true, etcd.OpStatus: true,
	etcd.OpMemberListAt: true, etcd.OpHealth: true, etcd.OpAlarmList: true,
	etcd.OpAlarmDisarm: true, etcd.OpDefragment: true, etcd.OpCompact: true,
	etcd.OpMoveLeader: true, etcd.OpAdvanceLog: true, etcd.OpSnapshot: true,
	etcd.OpAuthStatus: true, etcd.OpEnableAuth: true,
}

// Fake is the cluster model. The exported fields record what the code under
// test did; read them once no call is in flight.
type Fake struct {
	mu sync.Mutex

	clusterID   uint64
	members     []etcd.Member
	leaderID    uint64
	raftTerm    uint64
	maxLearners int
	version     string
	notReady    map[uint64]bool
	endpointErr map[string]error
	statuses    map[string]etcd.EndpointStatus
	listsAt     map[string]etcd.MemberList
	alarms      []etcd.Alarm
	usage       map[string]Usage
	revision    int64
	compactRev  int64
	failNext    map[string][]error
	hooks       map[string]Hook
	seq         uint64
	open        int
	// snapshot is the stream Snapshot sends; nil sends ValidSnapshot(2).
	snapshot []byte
	auth     authState

	Calls         []Call
	Dialed        [][]string
	AddedLearners [][]string
	Promoted      []uint64
	Removed       []uint64
	MovedLeader   []uint64
	Compacted     []int64
	Defragmented  []string
	Disarmed      []etcd.Alarm
	// Snapshotted are the endpoints snapshots were streamed from.
	Snapshotted []string
	// EnabledAuth has an entry per EnableAuth that went through: the
	// certificate users it was given.
	EnabledAuth [][]string
}

var (
	_ etcd.Dialer = (*Fake)(nil)
	_ etcd.Client = (*Fake)(nil)
	_ etcd.Client = (*Client)(nil)
)

// New returns an empty cluster that, like etcd's default, allows one learner.
func New() *Fake {
	return &Fake{
		clusterID:   DefaultClusterID,
		raftTerm:    1,
		maxLearners: 1,
		version:     Version,
		revision:    1,
		notReady:    map[uint64]bool{},
		endpointErr: map[string]error{},
		statuses:    map[string]etcd.EndpointStatus{},
		listsAt:     map[string]etcd.MemberList{},
		usage:       map[string]Usage{},
		failNext:    map[string][]error{},
		hooks:       map[string]Hook{},
	}
}

// AddVoter adds a started voting member. The first voter becomes leader.
func (f *Fake) AddVoter(name, peerURL, clientURL string) etcd.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := etcd.Member{ID: f.newID([]string{peerURL}), Name: name, PeerURLs: []string{peerURL}, ClientURLs: []string{clientURL}}
	f.members = append(f.members, m)
	if f.leaderID == 0 {
		f.leaderID = m.ID
	}
	return cloneMember(m)
}

// AddLearner adds a learner that has not started yet, as if someone else had
// called MemberAddAsLearner. It is not recorded in AddedLearners.
func (f *Fake) AddLearner(peerURL string) etcd.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := etcd.Member{ID: f.newID([]string{peerURL}), PeerURLs: []string{peerURL}, IsLearner: true}
	f.members = append(f.members, m)
	return cloneMember(m)
}

// StartMember simulates the member's process coming up: it publishes its
// name and client URL, and a learner becomes ready for promotion unless
// SetLearnerReady says otherwise.
func (f *Fake) StartMember(id uint64, name, clientURL string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := f.indexOf(id)
	if i < 0 {
		panic(fmt.Sprintf("fake: StartMember of unknown member %s", etcd.FormatMemberID(id)))
	}
	f.members[i].Name = name
	f.members[i].ClientURLs = []string{clientURL}
}

// SetLearnerReady controls whether a started learner has caught up with the
// leader; promoting one that has not fails with ErrMemberLearnerNotReady.
func (f *Fake) SetLearnerReady(id uint64, ready bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notReady[id] = !ready
}

// SetLeader makes id the leader; 0 means the cluster has lost quorum.
func (f *Fake) SetLeader(id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLeader(id)
}

func (f *Fake) setLeader(id uint64) {
	if id != f.leaderID {
		f.raftTerm++
	}
	f.leaderID = id
}

// ForceNewCluster does what etcd's --force-new-cluster does to a member's
// data on restart: the member becomes the only one, and the leader, under
// the same cluster and member IDs. Nobody called MemberRemove, so nothing
// is recorded in Removed.
func (f *Fake) ForceNewCluster(id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := f.indexOf(id)
	if i < 0 {
		panic(fmt.Sprintf("fake: ForceNewCluster of unknown member %s", etcd.FormatMemberID(id)))
	}
	m := f.members[i]
	m.IsLearner = false
	f.members = []etcd.Member{m}
	f.alarms = slices.DeleteFunc(f.alarms, func(a etcd.Alarm) bool { return a.MemberID != id })
	f.setLeader(id)
}

// SetMaxLearners mirrors etcd's --max-learners.
// SetVersion makes every member report v as its server version.
func (f *Fake) SetVersion(v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version = v
}

func (f *Fake) SetMaxLearners(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.maxLearners = n
}

// SetClusterID changes the cluster ID reported everywhere.
func (f *Fake) SetClusterID(id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clusterID = id
}

// SetRevision sets the current revision that Compact checks against.
func (f *Fake) SetRevision(rev int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revision = rev
}

// SetEndpointError makes every call that needs endpoint fail with err: use
// ErrUnreachable for a member that is down. nil clears it.
func (f *Fake) SetEndpointError(endpoint string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.endpointErr, endpoint)
		return
	}
	f.endpointErr[endpoint] = err
}

// SetStatus makes Status on endpoint return st verbatim instead of what the
// model implies, e.g. to simulate a member with another cluster ID.
func (f *Fake) SetStatus(endpoint string, st etcd.EndpointStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses[endpoint] = st
}

// ResetStatus undoes SetStatus: Status on endpoint follows the model again.
func (f *Fake) ResetStatus(endpoint string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.statuses, endpoint)
}

// SetMemberListAt makes MemberListAt on endpoint return list instead of the
// model's membership, to simulate a member whose view has diverged.
func (f *Fake) SetMemberListAt(endpoint string, list etcd.MemberList) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listsAt[endpoint] = cloneList(list)
}

// Usage is a member's database as Status reports it.
type Usage struct {
	DBSize, InUse, Quota int64
}

// DefaultUsage is what Status reports of a member whose usage was not set.
var DefaultUsage = Usage{DBSize: 1 << 20, InUse: 1 << 19}

// SetUsage sets what Status on endpoint reports of its database and quota.
// Defragment then shrinks the file to what is in use, as etcd does.
func (f *Fake) SetUsage(endpoint string, u Usage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.usage[endpoint] = u
}

// UsageOf is what Status on endpoint reports of its database now.
func (f *Fake) UsageOf(endpoint string) Usage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.usageOf(endpoint)
}

func (f *Fake) usageOf(endpoint string) Usage {
	if u, ok := f.usage[endpoint]; ok {
		return u
	}
	return DefaultUsage
}

// RaiseAlarm adds an active alarm.
func (f *Fake) RaiseAlarm(a etcd.Alarm) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.alarms = append(f.alarms, a)
}

// FailNext makes the next calls of op fail with errs, one error per call,
// before the fake looks at its model.
func (f *Fake) FailNext(op string, errs ...error) {
	mustKnowOp(op)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext[op] = append(f.failNext[op], errs...)
}

// SetHook installs h for every call of op; nil removes it.
func (f *Fake) SetHook(op string, h Hook) {
	mustKnowOp(op)
	f.mu.Lock()
	defer f.mu.Unlock()
	if h == nil {
		delete(f.hooks, op)
		return
	}
	f.hooks[op] = h
}

// Members returns a copy of the current membership.
func (f *Fake) Members() []etcd.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.list().Members
}

// Leader returns the current leader, 0 if none.
func (f *Fake) Leader() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leaderID
}

// Alarms returns a copy of the active alarms.
func (f *Fake) Alarms() []etcd.Alarm {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.alarms)
}

// OpenClients counts clients dialed and not yet closed, so tests can catch
// a reconciler that leaks connections.
func (f *Fake) OpenClients() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open
}

func mustKnowOp(op string) {
	if !knownOps[op] {
		panic(fmt.Sprintf("fake: unknown operation %q", op))
	}
}

// newID derives an ID from the peer URLs, like etcd, but mixes in a counter
// instead of the clock so that runs are repeatable and a re-added member
// never reuses a removed member's ID.
func (f *Fake) newID(peerURLs []string) uint64 {
	urls := slices.Clone(peerURLs)
	sort.Strings(urls)
	for {
		f.seq++
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%d", strings.Join(urls, ","), f.seq)
		id := h.Sum64()
		if id != 0 && f.indexOf(id) < 0 {
			return id
		}
	}
}

func (f *Fake) indexOf(id uint64) int {
	return slices.IndexFunc(f.members, func(m etcd.Member) bool { return m.ID == id })
}

// memberAt returns the member that serves endpoint.
func (f *Fake) memberAt(endpoint string) (etcd.Member, bool) {
	for _, m := range f.members {
		if slices.Contains(m.ClientURLs, endpoint) {
			return m, true
		}
	}
	return etcd.Member{}, false
}

func (f *Fake) list() etcd.MemberList {
	l := etcd.MemberList{ClusterID: f.clusterID, Members: make([]etcd.Member, 0, len(f.members))}
	for _, m := range f.members {
		l.Members = append(l.Members, cloneMember(m))
	}
	return l
}

func cloneMember(m etcd.Member) etcd.Member {
	m.PeerURLs = slices.Clone(m.PeerURLs)
	m.ClientURLs = slices.Clone(m.ClientURLs)
	return m
}

func cloneList(l etcd.MemberList) etcd.MemberList {
	out := etcd.MemberList{ClusterID: l.ClusterID, Members: make([]etcd.Member, 0, len(l.Members))}
	for _, m := range l.Members {
		out.Members = append(out.Members, cloneMember(m))
	}
	return out
}
