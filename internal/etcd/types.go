package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Member is our own view of an etcd member.
type Member struct {
	ID uint64
	// Name stays empty until the member has started and published itself;
	// an empty name is how a caller tells "added" from "running".
	Name       string
	PeerURLs   []string
	ClientURLs []string
	IsLearner  bool
}

// IDString renders the ID the way etcd prints it, so it can be matched
// against etcd logs, etcdctl output and flags.
func (m Member) IDString() string {
	return FormatMemberID(m.ID)
}

// FormatMemberID renders a member ID as etcd does: 16 lower-case hex digits.
func FormatMemberID(id uint64) string {
	return fmt.Sprintf("%016x", id)
}

// ParseMemberID is the inverse of FormatMemberID. It rejects zero because
// raft reserves it for "no member", so a zero ID is always a bug upstream.
func ParseMemberID(s string) (uint64, error) {
	if s == "" {
		return 0, errors.New("failed to parse member ID: empty string")
	}
	id, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("failed to parse member ID %q: %w", s, err)
	}
	if id == 0 {
		return 0, fmt.Errorf("failed to parse member ID %q: zero is not a valid member ID", s)
	}
	return id, nil
}

// MemberList is the membership as seen by whichever member answered.
type MemberList struct {
	ClusterID uint64
	Members   []Member
}

// Find returns the member with the given ID.
func (l MemberList) Find(id uint64) (Member, bool) {
	for _, m := range l.Members {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// EndpointStatus is what one member says about itself; it comes from
// Maintenance.Status on that endpoint only.
type EndpointStatus struct {
	Endpoint         string
	MemberID         uint64
	ClusterID        uint64
	LeaderID         uint64
	RaftTerm         uint64
	RaftIndex        uint64
	RaftAppliedIndex uint64
	DBSize           int64
	DBSizeInUse      int64
	// DBSizeQuota is the member's backend quota as it runs, etcd's default
	// when it was started with none; 0 from releases that do not report it
	// (3.5).
	DBSizeQuota int64
	Version     string
	IsLearner   bool
	Errors      []string
	// Revision is the store revision the member had applied when it answered.
	Revision int64
}

// Healthy reports whether the member can count towards a quorum: it reports
// no errors and follows a leader. A member that answers Status but sees no
// leader (cut off from its peers, or between elections) cannot commit
// anything, so counting it would let a quorum gate pass on a cluster that
// has none.
func (s EndpointStatus) Healthy() bool { return len(s.Errors) == 0 && s.LeaderID != 0 }

// HealthyDespiteNoSpace is Healthy, except that an active NOSPACE alarm does
// not count against the member: it still follows the leader, replicates and
// serves reads and deletes. alarms are the cluster's active alarms
// (AlarmList). etcd lists every alarm of the cluster among each member's
// Status errors, and "no leader" when it follows none; so a member that
// follows a leader and reports exactly as many errors as there are alarms,
// all of them NOSPACE, is healthy but for the alarm. Errors are counted, not
// read: their text is not a stable interface.
func (s EndpointStatus) HealthyDespiteNoSpace(alarms []Alarm) bool {
	if s.Healthy() {
		return true
	}
	if s.LeaderID == 0 || len(alarms) == 0 || len(s.Errors) != len(alarms) {
		return false
	}
	for _, a := range alarms {
		if a.Type != AlarmNoSpace {
			return false
		}
	}
	return true
}

// IsLeader reports whether the member believes it is the leader. During a
// partition a stale leader can still believe this, so compare RaftTerm when
// several endpoints claim it.
func (s EndpointStatus) IsLeader() bool {
	return s.MemberID != 0 && s.MemberID == s.LeaderID
}

// HighestTerm is the index of the status that answered in the highest raft
// term while knowing a leader, or -1 when none knows one: during a partition
// a stale member can still name an old leader, and the higher term wins, as
// etcd's own findLeader decides. Of equal terms the earlier wins, so a
// caller that orders the statuses makes the choice repeatable.
func HighestTerm(statuses []EndpointStatus) int {
	best := -1
	for i, st := range statuses {
		if st.LeaderID != 0 && (best < 0 || st.RaftTerm > statuses[best].RaftTerm) {
			best = i
		}
	}
	return best
}

// Alarm types as etcd names them.
const (
	AlarmNoSpace = "NOSPACE"
	AlarmCorrupt = "CORRUPT"
)

// Alarm is one active alarm raised by a member.
type Alarm struct {
	MemberID uint64
	Type     string
}

// Client is the narrow interface the controllers use. Every call runs under
// its own timeout on top of the caller's ctx.
type Client interface {
	// MemberList is linearizable: it reflects every committed membership change.
	MemberList(ctx context.Context) (MemberList, error)
	MemberAddAsLearner(ctx context.Context, peerURLs []string) (Member, MemberList, error)
	MemberPromote(ctx context.Context, id uint64) (MemberList, error)
	MemberRemove(ctx context.Context, id uint64) (MemberList, error)
	// MemberUpdate replaces a member's peer URLs in etcd's membership. The
	// plain-to-TLS transition (docs/design/0023) moves a member from http
	// to https with it while the member is stopped.
	MemberUpdate(ctx context.Context, id uint64, peerURLs []string) (MemberList, error)
	// Status asks exactly one endpoint about itself.
	Status(ctx context.Context, endpoint string) (EndpointStatus, error)
	// MemberListAt asks exactly one endpoint for its own, serializable view,
	// so a partitioned or diverged member answers from local state. Learners
	// refuse it (see IsNotSupportedForLearner).
	MemberListAt(ctx context.Context, endpoint string) (MemberList, error)
	// Health performs a linearizable read routed to exactly one endpoint, as
	// etcdctl endpoint health does; nil means healthy. Learners refuse it
	// (see IsNotSupportedForLearner); use Status for them.
	Health(ctx context.Context, endpoint string) error
	AlarmList(ctx context.Context) ([]Alarm, error)
	AlarmDisarm(ctx context.Context, a Alarm) error
	// Defragment blocks the member while it rewrites its database, so it has
	// a longer timeout of its own.
	Defragment(ctx context.Context, endpoint string) error
	// Compact compacts the key space up to revision and returns once the
	// old revisions are freed (a physical compaction), so that the space
	// shows as free in each member's Status; it has the defragmentation's
	// timeout.
	Compact(ctx context.Context, revision int64) error
	// AdvanceLog commits about n raft entries that change nothing anyone
	// can see, so that every member takes a raft snapshot sooner (see
	// docs/design/0007).
	AdvanceLog(ctx context.Context, n int) error
	// MoveLeader finds the current leader among the client's endpoints and
	// asks it to hand over; it is a no-op when the transferee already leads.
	MoveLeader(ctx context.Context, transfereeID uint64) error
	// Snapshot streams one endpoint's database as etcd sends it, the
	// SHA-256 etcd appends included: the bytes etcdctl snapshot save
	// writes. The stream is bounded by ctx alone, as a large database takes
	// minutes; it is never buffered whole.
	Snapshot(ctx context.Context, endpoint string) (*SnapshotStream, error)
	// AuthEnabled reports whether etcd's authentication is on.
	AuthEnabled(ctx context.Context) (bool, error)
	// EnableAuth turns authentication on with root and setup's users (see
	// AuthSetup); it is idempotent.
	EnableAuth(ctx context.Context, setup AuthSetup) error
	Endpoints() []string
	Close() error
}

// SnapshotStream is a snapshot being received. Read errors are
// *CallError values; Close releases the connection.
type SnapshotStream struct {
	io.ReadCloser
	// StorageVersion is what the stream reports as the database's storage
	// version (etcd 3.6 and later; empty before), known after the first Read.
	StorageVersion func() string
}

// Dialer creates Clients. Controllers get one injected so tests can use the
// fake. Options carry what a dial to one cluster needs (WithClientTLS,
// WithAddresses); a Dialer's own options are the defaults.
type Dialer interface {
	Dial(ctx context.Context, endpoints []string, opts ...DialOption) (Client, error)
}
