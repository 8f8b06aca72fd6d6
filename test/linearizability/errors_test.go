package linearizability

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestDefinitelyRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{name: "quota exceeded, as clientv3 returns it", err: rpctypes.ErrNoSpace, want: true},
		{name: "quota exceeded, as a raw gRPC status", err: rpctypes.ErrGRPCNoSpace, want: true},
		{name: "quota exceeded, wrapped", err: fmt.Errorf("put: %w", rpctypes.ErrNoSpace), want: true},
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
			NewWithT(t).Expect(definitelyRefused(tc.err)).To(Equal(tc.want))
		})
	}
}
