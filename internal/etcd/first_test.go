package etcd_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// askStub answers MemberListAt, and Status, with what each endpoint's
// function returns; the functions coordinate through channels, never
// through time.
type askStub struct {
	etcd.Client
	at     map[string]func(ctx context.Context) (etcd.MemberList, error)
	status map[string]func(ctx context.Context) (etcd.EndpointStatus, error)
}

func (s askStub) MemberListAt(ctx context.Context, ep string) (etcd.MemberList, error) {
	return s.at[ep](ctx)
}

func (s askStub) Status(ctx context.Context, ep string) (etcd.EndpointStatus, error) {
	return s.status[ep](ctx)
}

func listOf(id uint64) etcd.MemberList {
	return etcd.MemberList{ClusterID: 1, Members: []etcd.Member{{ID: id}}}
}

// An endpoint that never answers costs nothing when another does: the
// answer comes while it is still being asked, and the ask is cancelled.
func TestFirstMemberListDoesNotWaitForASilentEndpoint(t *testing.T) {
	g := NewWithT(t)
	cancelled := make(chan error, 1)
	stub := askStub{at: map[string]func(context.Context) (etcd.MemberList, error){
		"silent": func(ctx context.Context) (etcd.MemberList, error) {
			<-ctx.Done()
			cancelled <- ctx.Err()
			return etcd.MemberList{}, ctx.Err()
		},
		"answers": func(context.Context) (etcd.MemberList, error) { return listOf(2), nil },
	}}
	list, ep, err := etcd.FirstMemberList(context.Background(), stub, []string{"silent", "answers"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ep).To(Equal("answers"))
	g.Expect(list).To(Equal(listOf(2)))
	g.Eventually(cancelled).Should(Receive(MatchError(context.Canceled)), "the silent endpoint's ask is cancelled on return")
}

// A voter's view is preferred to a learner's even when the learner answers
// first; the learner's is taken once no voter can answer.
func TestFirstMemberListPrefersEarlierGroups(t *testing.T) {
	for _, tc := range []struct {
		name     string
		voterErr error
		want     string
	}{{"the voter answers after the learner", nil, "voter"}, {"the voter fails after the learner answered", errors.New("refused"), "learner"}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			learnerDone := make(chan struct{})
			stub := askStub{at: map[string]func(context.Context) (etcd.MemberList, error){
				"learner": func(context.Context) (etcd.MemberList, error) {
					defer close(learnerDone)
					return listOf(2), nil
				},
				"voter": func(context.Context) (etcd.MemberList, error) {
					<-learnerDone
					if tc.voterErr != nil {
						return etcd.MemberList{}, tc.voterErr
					}
					return listOf(1), nil
				},
			}}
			_, ep, err := etcd.FirstMemberList(context.Background(), stub, []string{"voter"}, []string{"learner"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ep).To(Equal(tc.want))
		})
	}
}

func TestFirstMemberListWhenNoneAnswers(t *testing.T) {
	g := NewWithT(t)
	refused := &etcd.CallError{Op: etcd.OpMemberListAt, Endpoint: "a", Err: errors.New("refused")}
	stub := askStub{at: map[string]func(context.Context) (etcd.MemberList, error){
		"a": func(context.Context) (etcd.MemberList, error) { return etcd.MemberList{}, refused },
		"b": func(context.Context) (etcd.MemberList, error) { return etcd.MemberList{}, errors.New("timeout") },
	}}
	_, _, err := etcd.FirstMemberList(context.Background(), stub, []string{"a"}, []string{"b"})
	var ce *etcd.CallError
	g.Expect(errors.As(err, &ce)).To(BeTrue(), "each endpoint's error is kept, classifiable: %v", err)
	g.Expect(ce).To(BeIdenticalTo(refused))
	g.Expect(err.Error()).NotTo(ContainSubstring("\n"), "one line, for a condition's message")
	g.Expect(err.Error()).To(ContainSubstring("timeout"), "every endpoint's error is told")

	_, _, err = etcd.FirstMemberList(context.Background(), stub)
	g.Expect(err).To(HaveOccurred(), "no endpoint at all")
}
