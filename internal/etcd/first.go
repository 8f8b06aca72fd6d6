package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// FirstMemberList asks every endpoint at once for its own view of the
// membership (MemberListAt) and returns the first answer of the most
// preferred group that has one, with the endpoint that gave it. Groups are
// in order of preference (voters before learners, say): all are asked
// together, and an answer from a later group is taken only once every
// endpoint of the earlier ones has failed. Asking in turn would cost an
// endpoint that never answers its whole timeout before the next is asked,
// and the endpoints that never answer are the usual reason to be here.
// The calls still running when it returns are cancelled.
func FirstMemberList(ctx context.Context, c Client, groups ...[]string) (MemberList, string, error) {
	type answer struct {
		group    int
		endpoint string
		list     MemberList
		err      error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pending := make([]int, len(groups))
	got := make([]*answer, len(groups))
	n := 0
	for _, g := range groups {
		n += len(g)
	}
	if n == 0 {
		return MemberList{}, "", &CallError{Op: OpMemberListAt, Err: errors.New("no endpoint given")}
	}
	// Buffered for every call, so none blocks on a reader that returned.
	answers := make(chan answer, n)
	for i, g := range groups {
		pending[i] = len(g)
		for _, ep := range g {
			go func() {
				l, err := c.MemberListAt(ctx, ep)
				answers <- answer{group: i, endpoint: ep, list: l, err: err}
			}()
		}
	}
	var errs []error
	for range n {
		a := <-answers
		pending[a.group]--
		if a.err != nil {
			errs = append(errs, a.err)
		} else if got[a.group] == nil {
			got[a.group] = &a
		}
		if i, ok := preferred(pending, func(i int) bool { return got[i] != nil }); ok {
			return got[i].list, got[i].endpoint, nil
		}
	}
	return MemberList{}, "", fmt.Errorf("no endpoint answered with its member list: %w", oneLine(errs))
}

// oneLine joins errors like errors.Join, on one line: the message ends up
// in a condition.
type oneLine []error

func (e oneLine) Error() string {
	parts := make([]string, len(e))
	for i, err := range e {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}

func (e oneLine) Unwrap() []error { return e }

// preferred is the group whose answer is final: the first group with an
// answer, provided every group before it has nothing more to say.
func preferred(pending []int, answered func(int) bool) (int, bool) {
	for i := range pending {
		if answered(i) {
			return i, true
		}
		if pending[i] > 0 {
			return 0, false
		}
	}
	return 0, false
}
