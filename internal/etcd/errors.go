package etcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"syscall"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/raft/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Operation names as they appear in CallError.Op; the fake uses the same
// names to script failures, so a typo there cannot go unnoticed.
const (
	OpDial               = "Dial"
	OpMemberList         = "MemberList"
	OpMemberAddAsLearner = "MemberAddAsLearner"
	OpMemberPromote      = "MemberPromote"
	OpMemberRemove       = "MemberRemove"
	OpMemberUpdate       = "MemberUpdate"
	OpStatus             = "Status"
	OpMemberListAt       = "MemberListAt"
	OpHealth             = "Health"
	OpAlarmList          = "AlarmList"
	OpAlarmDisarm        = "AlarmDisarm"
	OpDefragment         = "Defragment"
	OpCompact            = "Compact"
	OpMoveLeader         = "MoveLeader"
	OpAdvanceLog         = "AdvanceLog"
	OpSnapshot           = "Snapshot"
	OpAuthStatus         = "AuthStatus"
	OpEnableAuth         = "EnableAuth"
)

// CallError says which operation against which endpoint failed, so that
// callers can log and report it without threading that context through.
// Endpoint is empty for calls that the client balanced across its endpoints.
type CallError struct {
	Op       string
	Endpoint string
	Err      error
}

func (e *CallError) Error() string {
	if e.Endpoint == "" {
		return fmt.Sprintf("failed to call etcd %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("failed to call etcd %s on %s: %v", e.Op, e.Endpoint, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }

// grpcStatusError is satisfied by the error values grpc-go produces, however
// deeply they are wrapped.
type grpcStatusError interface {
	error
	GRPCStatus() *status.Status
}

// errNotSupportedForLearner has no client-side value in rpctypes, so derive it
// the same way rpctypes derives the others.
var errNotSupportedForLearner = rpctypes.Error(rpctypes.ErrGRPCNotSupportedForLearner)

// asEtcdError finds the etcd server error inside err. clientv3 usually hands
// back rpctypes.EtcdError already, but raw gRPC calls, a server that sent a
// client-side value (which arrives as codes.Unknown) or a wrapped status
// leave a *status.Error in the chain; rpctypes.Error maps those onto the same
// comparable EtcdError values so one errors.Is-style check covers all shapes.
func asEtcdError(err error) (rpctypes.EtcdError, bool) {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee, true
	}
	var se grpcStatusError
	if errors.As(err, &se) {
		if errors.As(rpctypes.Error(se), &ee) {
			return ee, true
		}
	}
	return rpctypes.EtcdError{}, false
}

// grpcCode reports the gRPC code carried by err, preferring etcd's own
// classification because some server errors travel as codes.Unknown.
func grpcCode(err error) (codes.Code, bool) {
	if ee, ok := asEtcdError(err); ok {
		return ee.Code(), true
	}
	var se grpcStatusError
	if errors.As(err, &se) {
		return se.GRPCStatus().Code(), true
	}
	return codes.OK, false
}

// isEtcdErr reports whether err is one of the given rpctypes client-side
// values (ErrMemberNotFound, ...), in any of the shapes asEtcdError knows.
func isEtcdErr(err error, targets ...error) bool {
	if err == nil {
		return false
	}
	ee, ok := asEtcdError(err)
	for _, t := range targets {
		if errors.Is(err, t) || (ok && error(ee) == t) {
			return true
		}
	}
	return false
}

// IsUnavailable means "retry later, conclude nothing": the member or cluster
// could not answer right now (timeout, no leader, connection refused, leader
// changed, overloaded, or our view of the leader was stale). A caller's own
// cancellation is deliberately not included.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	if isEtcdErr(err, rpctypes.ErrTooManyRequests, rpctypes.ErrNotLeader) || IsTokenNotKnown(err) {
		return true
	}
	if isProposalDropped(err) {
		return true
	}
	code, ok := grpcCode(err)
	// Unavailable covers ErrNoLeader, ErrLeaderChanged, ErrStopped, ErrUnhealthy
	// and the whole ErrTimeout family, including ErrTimeoutWaitAppliedIndex,
	// which rpctypes cannot map back to a client-side value.
	return ok && (code == codes.Unavailable || code == codes.DeadlineExceeded)
}

// isProposalDropped: raft refused the request's proposal, so it was never
// applied, as happens while leadership moves (a handoff before a member's
// maintenance, say). etcd's server maps raft.ErrProposalDropped to no gRPC
// code of its own: it arrives as codes.Unknown carrying that error's text,
// which is compared whole, as the one thing that names it.
func isProposalDropped(err error) bool {
	var se grpcStatusError
	if !errors.As(err, &se) {
		return false
	}
	st := se.GRPCStatus()
	return st.Code() == codes.Unknown && st.Message() == raft.ErrProposalDropped.Error()
}

// ReplyTooLargeError: a member sent more than the operator reads of one
// reply (MaxReplyBytes for an etcd call, MaxMetricsBytes for a metrics
// page). No etcd the operator runs sends that much to any request it makes,
// so the member runs something else, a user's image say, and asking again
// gets the same answer: it is not an unreachable member.
type ReplyTooLargeError struct {
	// What was read: an etcd operation's name, or "metrics".
	What  string
	Limit int
	// Err is gRPC's own error when there is one.
	Err error
}

func (e *ReplyTooLargeError) Error() string {
	msg := fmt.Sprintf("reply to %s is larger than the %d bytes the operator reads", e.What, e.Limit)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *ReplyTooLargeError) Unwrap() error { return e.Err }

// IsReplyTooLarge: a reply went past the operator's bound on what it reads
// of one (see ReplyTooLargeError).
func IsReplyTooLarge(err error) bool {
	var tl *ReplyTooLargeError
	return errors.As(err, &tl) || isOverReceiveLimit(err)
}

// isOverReceiveLimit: gRPC refused a received message over the call's
// receive limit. gRPC reports that as ResourceExhausted, as etcd does for
// NOSPACE and too many requests; those two are in etcd's error table and
// this one is not, which is what tells them apart.
func isOverReceiveLimit(err error) bool {
	if _, ok := asEtcdError(err); ok {
		return false
	}
	var se grpcStatusError
	return errors.As(err, &se) && se.GRPCStatus().Code() == codes.ResourceExhausted
}

// classifyReply makes a reply over the receive limit a *ReplyTooLargeError
// naming op, and returns any other error as it is.
func classifyReply(op string, err error) error {
	if err == nil || !isOverReceiveLimit(err) {
		return err
	}
	return &ReplyTooLargeError{What: op, Limit: MaxReplyBytes, Err: err}
}

// IsMemberNotFound: the member ID is not (or no longer) in the cluster.
func IsMemberNotFound(err error) bool {
	return isEtcdErr(err, rpctypes.ErrMemberNotFound)
}

// IsLearnerNotReady: the learner has not caught up with the leader yet;
// promoting it later may succeed.
func IsLearnerNotReady(err error) bool {
	return isEtcdErr(err, rpctypes.ErrMemberLearnerNotReady)
}

// ErrTransfereeNotReady: leadership cannot move to the member yet, because
// it does not vote in its own view (a learner, or a promotion it has not
// applied) or does not answer. Moving later may succeed.
var ErrTransfereeNotReady = errors.New("the member cannot take leadership yet")

// IsTransfereeNotReady reports ErrTransfereeNotReady, however wrapped.
func IsTransfereeNotReady(err error) bool {
	return errors.Is(err, ErrTransfereeNotReady)
}

// IsUnhealthyCluster: etcd refused a reconfiguration that could cost quorum,
// typically right after a member joined or was promoted (peers must have been
// connected for etcd's 5s health interval) or while some voter has not
// started. The plan is still right; retry soon.
func IsUnhealthyCluster(err error) bool {
	return isEtcdErr(err, rpctypes.ErrUnhealthy, rpctypes.ErrMemberNotEnoughStarted)
}

// IsTooManyLearners: the cluster already holds --max-learners learners.
func IsTooManyLearners(err error) bool {
	return isEtcdErr(err, rpctypes.ErrTooManyLearners)
}

// IsPeerURLExists: some member already owns one of the peer URLs, which after
// a lost response usually means our own earlier add went through. etcd derives
// a new member's ID from its peer URLs and the current second, so an add
// repeated within the same second collides on the ID first and reports
// ErrMemberExist instead; both mean the same to a caller.
func IsPeerURLExists(err error) bool {
	return isEtcdErr(err, rpctypes.ErrPeerURLExist, rpctypes.ErrMemberExist)
}

// IsMemberNotLearner: a promote targeted a member that already votes, which
// after a lost response usually means our own earlier promote went through.
func IsMemberNotLearner(err error) bool {
	return isEtcdErr(err, rpctypes.ErrMemberNotLearner)
}

// IsNotSupportedForLearner: the endpoint is a learner, which only serves
// Status and serializable reads. Ask a voting member instead.
func IsNotSupportedForLearner(err error) bool {
	return isEtcdErr(err, errNotSupportedForLearner)
}

// IsCompacted: the requested revision is already compacted, which for a
// Compact call means the work is done.
func IsCompacted(err error) bool {
	return isEtcdErr(err, rpctypes.ErrCompacted)
}

// IsNoSpace: etcd refused a write because the backend quota is exhausted and
// a NOSPACE alarm is active; reads and deletes still work.
func IsNoSpace(err error) bool {
	return isEtcdErr(err, rpctypes.ErrNoSpace)
}

// IsAuthRequired: auth is enabled and the request carried no usable identity,
// so the operator must be configured with credentials.
func IsAuthRequired(err error) bool {
	if IsTokenNotKnown(err) {
		return false
	}
	if isEtcdErr(err, rpctypes.ErrUserEmpty) || isAuthText(err, authRequiredTexts) {
		return true
	}
	code, ok := grpcCode(err)
	return ok && code == codes.Unauthenticated
}

// IsAuthFailed: the identity was rejected (wrong user or password, or a
// client certificate naming no user) or lacks the permission (membership
// changes need the root role).
func IsAuthFailed(err error) bool {
	if isEtcdErr(err, rpctypes.ErrAuthFailed, rpctypes.ErrPermissionDenied, rpctypes.ErrUserNotFound) || isAuthText(err, authFailedTexts) {
		return true
	}
	code, ok := grpcCode(err)
	return ok && code == codes.PermissionDenied
}

// IsIdentityRefused: etcd refused the caller's identity, for either reason
// above. Such a reply says nothing of the member's health.
func IsIdentityRefused(err error) bool { return IsAuthFailed(err) || IsAuthRequired(err) }

// etcd 3.5's maintenance service (Defragment, Snapshot, Status, ...) sends
// the auth store's own errors without mapping them to gRPC codes, so they
// arrive as codes.Unknown carrying the error's text, which rpctypes does
// not know. These are those errors' texts (go.etcd.io/etcd/server/v3/auth
// in 3.5), compared whole, as isProposalDropped compares raft's.
var (
	authRequiredTexts = []string{"auth: user name is empty"}
	tokenNotKnownText = "auth: invalid auth token"
	authFailedTexts   = []string{"auth: authentication failed, invalid user ID or password", "auth: permission denied", "auth: user not found", "auth: authentication failed, password was given for no password user"}
)

// IsTokenNotKnown: the member does not know the client's auth token. etcd
// 3.5-3.7 keep tokens ("simple" tokens, the default) in each member's
// memory, put there as each member applies the exchange of a password for
// it: a member that has not applied it yet, or was restarted since, refuses
// it. clientv3 fetches a new token when a call is refused so, except from
// etcd 3.5's maintenance service, whose unmapped error it does not
// recognise. It says nothing of the credentials: asking again, with a new
// token or once the member caught up, is what helps.
func IsTokenNotKnown(err error) bool {
	return isEtcdErr(err, rpctypes.ErrInvalidAuthToken) || isAuthText(err, []string{tokenNotKnownText})
}

func isAuthText(err error, texts []string) bool {
	var se grpcStatusError
	if err == nil || !errors.As(err, &se) {
		return false
	}
	st := se.GRPCStatus()
	return st.Code() == codes.Unknown && slices.Contains(texts, st.Message())
}

// refusedBeforeProposal are the errors etcd returns before it proposes a
// request to raft: TooManyRequests is checked ahead of the proposal, the
// auth errors before the request is looked at, and RequestTooLarge before it
// is sent. NoSpace is not among them: etcd returns it both from the quota
// check ahead of the proposal and after applying a write that took the
// backend past its quota (the quota applier applies the put, then reports
// NoSpace and raises the alarm), so the write may well have taken effect.
var refusedBeforeProposal = []error{
	rpctypes.ErrTooManyRequests,
	rpctypes.ErrRequestTooLarge,
	rpctypes.ErrPermissionDenied,
	rpctypes.ErrAuthFailed,
	rpctypes.ErrUserEmpty,
	rpctypes.ErrInvalidAuthToken,
	rpctypes.ErrAuthNotEnabled,
}

// IsRefusedBeforeProposal says a failed write certainly did not take
// effect. Everything else (a timeout, an unavailable member, a lost leader,
// a reset connection, a cancelled context, an error not known here) leaves
// the outcome unknown.
func IsRefusedBeforeProposal(err error) bool {
	if err == nil {
		return false
	}
	if isEtcdErr(err, refusedBeforeProposal...) {
		return true
	}
	// InvalidArgument is returned while validating the request, before
	// anything is proposed.
	code, ok := grpcCode(err)
	return ok && code == codes.InvalidArgument
}
