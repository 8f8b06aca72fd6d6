package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// A member that never answers fails on its own timeout while the others'
// answers are kept, each in its endpoint's place.
func TestStatusAllBoundsEachCall(t *testing.T) {
	g := NewWithT(t)
	stub := askStub{status: map[string]func(context.Context) (etcd.EndpointStatus, error){
		"silent": func(ctx context.Context) (etcd.EndpointStatus, error) {
			_, hasDeadline := ctx.Deadline()
			if !hasDeadline {
				return etcd.EndpointStatus{}, errors.New("asked without a deadline")
			}
			<-ctx.Done()
			return etcd.EndpointStatus{}, ctx.Err()
		},
		"a": func(context.Context) (etcd.EndpointStatus, error) { return etcd.EndpointStatus{MemberID: 1}, nil },
		"b": func(context.Context) (etcd.EndpointStatus, error) { return etcd.EndpointStatus{MemberID: 2}, nil },
	}}
	got := etcd.StatusAll(context.Background(), stub, []string{"a", "silent", "b"}, time.Millisecond)
	g.Expect(got).To(HaveLen(3))
	g.Expect(got[0]).To(Equal(etcd.StatusAnswer{Status: etcd.EndpointStatus{MemberID: 1}}))
	g.Expect(errors.Is(got[1].Err, context.DeadlineExceeded)).To(BeTrue())
	g.Expect(got[2]).To(Equal(etcd.StatusAnswer{Status: etcd.EndpointStatus{MemberID: 2}}))
}

// Without a timeout of its own each call runs under the caller's context.
func TestStatusAllWithoutATimeoutUsesTheCallersContext(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stub := askStub{status: map[string]func(context.Context) (etcd.EndpointStatus, error){
		"a": func(ctx context.Context) (etcd.EndpointStatus, error) {
			if _, hasDeadline := ctx.Deadline(); hasDeadline {
				return etcd.EndpointStatus{}, errors.New("asked with a deadline of its own")
			}
			return etcd.EndpointStatus{}, ctx.Err()
		},
	}}
	got := etcd.StatusAll(ctx, stub, []string{"a"}, 0)
	g.Expect(errors.Is(got[0].Err, context.Canceled)).To(BeTrue())
	g.Expect(etcd.StatusAll(ctx, stub, nil, 0)).To(BeEmpty())
}
