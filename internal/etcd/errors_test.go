package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/raft/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

var classifiers = []struct {
	name string
	fn   func(error) bool
}{
	{"Unavailable", etcd.IsUnavailable},
	{"MemberNotFound", etcd.IsMemberNotFound},
	{"LearnerNotReady", etcd.IsLearnerNotReady},
	{"TransfereeNotReady", etcd.IsTransfereeNotReady},
	{"UnhealthyCluster", etcd.IsUnhealthyCluster},
	{"TooManyLearners", etcd.IsTooManyLearners},
	{"PeerURLExists", etcd.IsPeerURLExists},
	{"MemberNotLearner", etcd.IsMemberNotLearner},
	{"NotSupportedForLearner", etcd.IsNotSupportedForLearner},
	{"Compacted", etcd.IsCompacted},
	{"NoSpace", etcd.IsNoSpace},
	{"AuthRequired", etcd.IsAuthRequired},
	{"AuthFailed", etcd.IsAuthFailed},
}

// classify lists every classifier that matches, so tests catch a classifier
// that matches too much as well as one that matches too little.
func classify(err error) []string {
	out := []string{}
	for _, c := range classifiers {
		if c.fn(err) {
			out = append(out, c.name)
		}
	}
	return out
}

func TestClassifiers(t *testing.T) {
	t.Parallel()
	connRefused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	cases := []struct {
		name string
		err  error
		want []string
	}{
		{"nil", nil, []string{}},
		{"plain error", errors.New("boom"), []string{}},
		// Same text as an etcd error but no type: must not match, or we
		// would be classifying by message after all.
		{"look-alike text", errors.New(rpctypes.ErrMemberNotFound.Error()), []string{}},
		{"caller cancelled", context.Canceled, []string{}},
		{"no space is not unavailable", rpctypes.ErrNoSpace, []string{"NoSpace"}},
		{"no space as gRPC status", rpctypes.ErrGRPCNoSpace, []string{"NoSpace"}},
		{"no space in CallError", &etcd.CallError{Op: "Put", Err: rpctypes.ErrGRPCNoSpace}, []string{"NoSpace"}},

		{"member not found", rpctypes.ErrMemberNotFound, []string{"MemberNotFound"}},
		{"member not found as gRPC status", rpctypes.ErrGRPCMemberNotFound, []string{"MemberNotFound"}},
		{"member not found wrapped", fmt.Errorf("failed to x: %w", rpctypes.ErrGRPCMemberNotFound), []string{"MemberNotFound"}},
		{"member not found in CallError", &etcd.CallError{Op: "MemberRemove", Err: rpctypes.ErrMemberNotFound}, []string{"MemberNotFound"}},
		{"learner not ready", rpctypes.ErrMemberLearnerNotReady, []string{"LearnerNotReady"}},
		{"learner not ready as gRPC status", rpctypes.ErrGRPCLearnerNotReady, []string{"LearnerNotReady"}},
		{"unhealthy", rpctypes.ErrUnhealthy, []string{"Unavailable", "UnhealthyCluster"}},
		{"unhealthy as gRPC status", rpctypes.ErrGRPCUnhealthy, []string{"Unavailable", "UnhealthyCluster"}},
		// The server sends this one as a client-side value, so it arrives
		// with codes.Unknown; rpctypes still recognises it.
		{"not enough started, as sent on the wire", status.Error(codes.Unknown, rpctypes.ErrMemberNotEnoughStarted.Error()), []string{"UnhealthyCluster"}},
		// raft's dropped proposal has no code of its own on the wire.
		{"proposal dropped, as sent on the wire", status.Error(codes.Unknown, raft.ErrProposalDropped.Error()), []string{"Unavailable"}},
		{"proposal dropped in CallError", &etcd.CallError{Op: "Put", Err: status.Error(codes.Unknown, raft.ErrProposalDropped.Error())}, []string{"Unavailable"}},
		{"another unknown error is not", status.Error(codes.Unknown, "raft proposal dropped, or not"), []string{}},
		{"proposal-dropped text without a status", errors.New(raft.ErrProposalDropped.Error()), []string{}},
		{"too many learners", rpctypes.ErrTooManyLearners, []string{"TooManyLearners"}},
		{"peer URL exists", rpctypes.ErrPeerURLExist, []string{"PeerURLExists"}},
		{"member ID exists (same peer URLs, same second)", rpctypes.ErrGRPCMemberExist, []string{"PeerURLExists"}},
		{"peer URL exists inside a join", errors.Join(errors.New("x"), rpctypes.ErrGRPCPeerURLExist), []string{"PeerURLExists"}},
		{"member not learner", rpctypes.ErrMemberNotLearner, []string{"MemberNotLearner"}},
		{"not supported for learner", rpctypes.ErrGRPCNotSupportedForLearner, []string{"NotSupportedForLearner"}},
		{"compacted", rpctypes.ErrCompacted, []string{"Compacted"}},

		{"deadline", context.DeadlineExceeded, []string{"Unavailable"}},
		{"deadline in CallError", &etcd.CallError{Op: "Status", Endpoint: "x", Err: context.DeadlineExceeded}, []string{"Unavailable"}},
		{"gRPC deadline", status.Error(codes.DeadlineExceeded, "deadline"), []string{"Unavailable"}},
		{"gRPC unavailable", status.Error(codes.Unavailable, "connection error"), []string{"Unavailable"}},
		{"connection refused", connRefused, []string{"Unavailable"}},
		{"no leader", rpctypes.ErrNoLeader, []string{"Unavailable"}},
		{"no leader as gRPC status", rpctypes.ErrGRPCNoLeader, []string{"Unavailable"}},
		{"not leader", rpctypes.ErrNotLeader, []string{"Unavailable"}},
		{"leader changed", rpctypes.ErrLeaderChanged, []string{"Unavailable"}},
		{"stopped", rpctypes.ErrStopped, []string{"Unavailable"}},
		{"timeout", rpctypes.ErrTimeout, []string{"Unavailable"}},
		{"timeout due to leader fail", rpctypes.ErrTimeoutDueToLeaderFail, []string{"Unavailable"}},
		{"timeout due to connection lost", rpctypes.ErrTimeoutDueToConnectionLost, []string{"Unavailable"}},
		{"timeout waiting for applied index", rpctypes.ErrGRPCTimeoutWaitAppliedIndex, []string{"Unavailable"}},
		{"too many requests, as sent on the wire", status.Error(codes.Unknown, rpctypes.ErrTooManyRequests.Error()), []string{"Unavailable"}},

		{"user empty", rpctypes.ErrUserEmpty, []string{"AuthRequired"}},
		// A token the member does not know (yet): asking again helps.
		{"invalid token", rpctypes.ErrInvalidAuthToken, []string{"Unavailable"}},
		{"3.5 maintenance: token not known", status.Error(codes.Unknown, "auth: invalid auth token"), []string{"Unavailable"}},
		{"unauthenticated", status.Error(codes.Unauthenticated, "who are you"), []string{"AuthRequired"}},
		{"auth failed", rpctypes.ErrAuthFailed, []string{"AuthFailed"}},
		{"permission denied", rpctypes.ErrPermissionDenied, []string{"AuthFailed"}},
		{"permission denied as gRPC status", rpctypes.ErrGRPCPermissionDenied, []string{"AuthFailed"}},
		{"user not found", rpctypes.ErrGRPCUserNotFound, []string{"AuthFailed"}},
		// etcd 3.5's maintenance service sends the auth store's errors
		// unmapped (seen against a real 3.5.35 in test/tlsproc).
		{"3.5 maintenance: no identity", status.Error(codes.Unknown, "auth: user name is empty"), []string{"AuthRequired"}},
		{"3.5 maintenance: unknown certificate user", status.Error(codes.Unknown, "auth: user not found"), []string{"AuthFailed"}},
		{"3.5 maintenance: not root", status.Error(codes.Unknown, "auth: permission denied"), []string{"AuthFailed"}},
		{"3.5 look-alike in another code", status.Error(codes.Internal, "auth: user not found"), []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(classify(tc.err)).To(Equal(tc.want))
		})
	}
}

func TestCallError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		err     *etcd.CallError
		wantMsg string
	}{
		{"balanced", &etcd.CallError{Op: "MemberList", Err: context.DeadlineExceeded}, "failed to call etcd MemberList: context deadline exceeded"},
		{"single endpoint", &etcd.CallError{Op: "Status", Endpoint: "http://a:2379", Err: context.DeadlineExceeded}, "failed to call etcd Status on http://a:2379: context deadline exceeded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			wrapped := fmt.Errorf("failed to reconcile: %w", tc.err)
			g.Expect(tc.err.Error()).To(Equal(tc.wantMsg))
			g.Expect(errors.Is(wrapped, context.DeadlineExceeded)).To(BeTrue())
			var ce *etcd.CallError
			g.Expect(errors.As(wrapped, &ce)).To(BeTrue())
			g.Expect(ce).To(BeIdenticalTo(tc.err))
		})
	}
}

func TestIsRefusedBeforeProposal(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		want bool
	}{
		// etcd also returns it for a write it applied, the one that took the
		// backend past its quota.
		{name: "quota exceeded, as clientv3 returns it", err: rpctypes.ErrNoSpace, want: false},
		{name: "quota exceeded, as a raw gRPC status", err: rpctypes.ErrGRPCNoSpace, want: false},
		{name: "quota exceeded, wrapped", err: fmt.Errorf("put: %w", rpctypes.ErrNoSpace), want: false},
		{name: "too many requests", err: rpctypes.ErrGRPCRequestTooManyRequests, want: true},
		{name: "permission denied", err: rpctypes.ErrPermissionDenied, want: true},
		{name: "an invalid request", err: status.Error(codes.InvalidArgument, "bad"), want: true},
		{name: "duplicate key in a txn", err: rpctypes.ErrDuplicateKey, want: true},
		{name: "the call's deadline", err: context.DeadlineExceeded, want: false},
		{name: "the call's deadline, wrapped", err: fmt.Errorf("put: %w", context.DeadlineExceeded), want: false},
		{name: "cancelled", err: context.Canceled, want: false},
		{name: "etcd's request timeout", err: rpctypes.ErrTimeout, want: false},
		{name: "leader changed", err: rpctypes.ErrLeaderChanged, want: false},
		{name: "no leader", err: rpctypes.ErrGRPCNoLeader, want: false},
		{name: "an unavailable connection", err: status.Error(codes.Unavailable, "connection reset by peer"), want: false},
		{name: "a gRPC deadline", err: status.Error(codes.DeadlineExceeded, "context deadline exceeded"), want: false},
		{name: "something unknown", err: errors.New("boom"), want: false},
		{name: "no error", err: nil, want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(etcd.IsRefusedBeforeProposal(tc.err)).To(Equal(tc.want))
		})
	}
}
