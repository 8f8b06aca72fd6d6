package linearizability

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// refusals are the etcd errors a server returns before it proposes a write to
// raft, so a write that got one was not applied. NoSpace and TooManyRequests
// are checked ahead of the proposal, the auth errors before the request is
// looked at, and RequestTooLarge before it is sent.
var refusals = []error{
	rpctypes.ErrNoSpace,
	rpctypes.ErrTooManyRequests,
	rpctypes.ErrRequestTooLarge,
	rpctypes.ErrPermissionDenied,
	rpctypes.ErrAuthFailed,
	rpctypes.ErrUserEmpty,
	rpctypes.ErrInvalidAuthToken,
	rpctypes.ErrAuthNotEnabled,
}

// definitelyRefused says a failed write certainly did not take effect.
// Everything else (a timeout, an unavailable member, a lost leader, a reset
// connection, a cancelled context, an error this list does not know) leaves
// the outcome unknown: treating such a write as not applied could turn a
// correct history into a false violation, while treating a refused one as
// possibly applied only makes the check a little weaker.
func definitelyRefused(err error) bool {
	if err == nil {
		return false
	}
	var etcdErr rpctypes.EtcdError
	if !errors.As(err, &etcdErr) {
		// A raw gRPC status carries etcd's description; rpctypes maps it
		// back onto the same comparable value clientv3 normally returns.
		if st, ok := status.FromError(err); ok {
			errors.As(rpctypes.Error(st.Err()), &etcdErr)
		}
	}
	for _, r := range refusals {
		if errors.Is(err, r) || (etcdErr != rpctypes.EtcdError{} && error(etcdErr) == r) {
			return true
		}
	}
	// InvalidArgument is returned while validating the request, before
	// anything is proposed.
	code := status.Code(err)
	if etcdErr != (rpctypes.EtcdError{}) {
		code = etcdErr.Code()
	}
	return code == codes.InvalidArgument
}
