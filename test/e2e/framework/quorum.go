package framework

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// A QuorumWatch asks, look after look, whether a quorum of the voters
// follows one leader, each member asked at its Pod's address.
//
// A look that finds no quorum is not yet a loss. A leader election, and the
// handoff the operator makes before a leader leaves, leave the followers
// without a leader until the new leader's first heartbeat: milliseconds, in
// which a look finds most voters following nobody while the cluster never
// stopped committing. A quorum really lost in these tests (two of three
// members down at once) stays lost for as long as a member takes to come
// back: seconds. So a look without a quorum is looked at again at once, and
// a loss is confirmed when looks keep finding none for quorumLossBound; a
// look that finds a quorum before that clears it. Neither such a look nor a
// look the test could not take (blind) counts as a pass: only looks that
// found a quorum do, and a watch with none of them fails.

const (
	quorumLookEvery   = 500 * time.Millisecond
	quorumRelookEvery = 100 * time.Millisecond
	// quorumLossBound is far longer than an election between live members,
	// and far shorter than a member's restart.
	quorumLossBound = time.Second
	// quorumCallTimeout bounds each call of a look.
	quorumCallTimeout = 2 * time.Second
)

// quorumLook is the outcome of one look.
type quorumLook struct {
	at time.Time
	// held: a quorum of the voters followed one leader.
	held bool
	// blind: the test could not look (the API did not list the Pods, or no
	// member that answered told the membership); it says nothing of etcd.
	blind  bool
	detail string
}

// quorumVerdict judges a watch's looks, in order.
type quorumVerdict struct {
	held, cleared, blind int
	// open is the current run of looks without a quorum.
	open []quorumLook
	lost error
}

func (v *quorumVerdict) add(l quorumLook) {
	switch {
	case l.blind:
		v.blind++
	case l.held:
		v.cleared += len(v.open)
		v.open = nil
		v.held++
	default:
		v.open = append(v.open, l)
		first := v.open[0]
		if v.lost == nil && l.at.Sub(first.at) >= quorumLossBound {
			v.lost = fmt.Errorf("no quorum from %s to %s, %d looks in a row: first %s; last %s",
				stamp(first.at), stamp(l.at), len(v.open), first.detail, l.detail)
		}
	}
}

// suspecting reports a run of looks without a quorum still to be decided.
func (v *quorumVerdict) suspecting() bool { return len(v.open) > 0 && v.lost == nil }

func (v *quorumVerdict) result() error {
	if v.lost != nil {
		return v.lost
	}
	if v.held == 0 {
		return fmt.Errorf("no look found a quorum, so the watch checked nothing (%s)", v)
	}
	return nil
}

func (v *quorumVerdict) String() string {
	return fmt.Sprintf("%d looks found a quorum; %d found none and were cleared by a look that did within %s; %d undecided at the end; %d blind",
		v.held, v.cleared, quorumLossBound, len(v.open), v.blind)
}

// QuorumWatch watches a cluster's quorum until Stop.
type QuorumWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	v      quorumVerdict
}

// WatchQuorum starts a QuorumWatch on the cluster in ns.
func (e *Env) WatchQuorum(ctx context.Context, ns, cluster string) *QuorumWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &QuorumWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			l := e.lookAtQuorum(ctx, ns, cluster)
			if ctx.Err() != nil {
				// Cut short by Stop: the calls it did not finish say
				// nothing.
				return
			}
			w.mu.Lock()
			w.v.add(l)
			next := quorumLookEvery
			if w.v.suspecting() {
				next = quorumRelookEvery
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(next):
			}
		}
	}()
	return w
}

// Stop ends the watch. It fails with the first loss confirmed, and if no
// look found a quorum.
func (w *QuorumWatch) Stop() error {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.v.result()
}

// String sums up the looks so far.
func (w *QuorumWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.v.String()
}

// lookAtQuorum asks every Pod of the cluster for its Status, and the leader
// for the membership. The leader's membership decides who votes: members
// apply a membership change one after another, so one that has not applied
// a removal yet still lists the removed voter, and one just promoted may
// still call itself a learner. Counting voters from another member's list
// and followers from every member's Status mixes instants, and finds a loss
// that never was.
func (e *Env) lookAtQuorum(ctx context.Context, ns, cluster string) quorumLook {
	at := time.Now()
	pods, err := e.clusterPods(ctx, ns, cluster)
	if err != nil {
		return quorumLook{at: at, blind: true, detail: err.Error()}
	}
	var eps []string
	for _, p := range pods {
		if p.Status.PodIP != "" {
			eps = append(eps, fmt.Sprintf("http://%s:%d", p.Status.PodIP, v1alpha1.ClientPort))
		}
	}
	return judgeQuorum(ctx, at, eps)
}

// judgeQuorum asks each endpoint for its Status, and the leader they follow
// for the membership.
func judgeQuorum(ctx context.Context, at time.Time, eps []string) quorumLook {
	answers := statusAll(ctx, eps, quorumCallTimeout)
	leader, followers := mostFollowed(answers)
	if leader == 0 {
		return quorumLook{at: at, detail: fmt.Sprintf("%d of %d pods answered, none following a leader", len(answers), len(eps))}
	}
	list, err := leaderMembership(ctx, answers, leader, followers)
	if err != nil {
		return quorumLook{at: at, blind: true, detail: err.Error()}
	}
	agreeing, voters := countVoters(list, followers)
	return quorumLook{at: at, held: agreeing > voters/2,
		detail: fmt.Sprintf("%d of %d voters followed leader %x", agreeing, voters, leader)}
}

// mostFollowed is the leader the most members that answered follow (ties
// to the higher term, then the higher ID, so that a look is repeatable), and
// the IDs of those members.
func mostFollowed(answers map[string]etcd.EndpointStatus) (uint64, map[uint64]bool) {
	followers := map[uint64]map[uint64]bool{}
	term := map[uint64]uint64{}
	for _, st := range answers {
		if st.LeaderID == 0 {
			continue
		}
		if followers[st.LeaderID] == nil {
			followers[st.LeaderID] = map[uint64]bool{}
		}
		followers[st.LeaderID][st.MemberID] = true
		term[st.LeaderID] = max(term[st.LeaderID], st.RaftTerm)
	}
	var best uint64
	for l, f := range followers {
		switch {
		case best == 0, len(f) > len(followers[best]):
			best = l
		case len(f) == len(followers[best]) && (term[l] > term[best] || term[l] == term[best] && l > best):
			best = l
		}
	}
	return best, followers[best]
}

// leaderMembership asks the leader for the membership, or, when it did not
// answer, its followers, the one furthest ahead first.
func leaderMembership(ctx context.Context, answers map[string]etcd.EndpointStatus, leader uint64, followers map[uint64]bool) (etcd.MemberList, error) {
	var order []etcd.EndpointStatus
	for _, st := range answers {
		if st.MemberID == leader || followers[st.MemberID] {
			order = append(order, st)
		}
	}
	sort.Slice(order, func(i, j int) bool {
		if (order[i].MemberID == leader) != (order[j].MemberID == leader) {
			return order[i].MemberID == leader
		}
		return order[i].RaftAppliedIndex > order[j].RaftAppliedIndex
	})
	var eps []string
	for _, st := range order {
		eps = append(eps, st.Endpoint)
	}
	c, err := etcd.NewDialer(etcd.WithCallTimeout(quorumCallTimeout)).Dial(ctx, eps)
	if err != nil {
		return etcd.MemberList{}, err
	}
	defer func() { _ = c.Close() }()
	var last error
	for _, ep := range eps {
		list, err := c.MemberListAt(ctx, ep)
		if err == nil {
			return list, nil
		}
		last = err
	}
	return etcd.MemberList{}, fmt.Errorf("no member following leader %x told the membership: %w", leader, last)
}

// countVoters counts the voters of the membership, and those among them
// that follow the leader.
func countVoters(list etcd.MemberList, followers map[uint64]bool) (agreeing, voters int) {
	for _, m := range list.Members {
		if m.IsLearner {
			continue
		}
		voters++
		if followers[m.ID] {
			agreeing++
		}
	}
	return agreeing, voters
}
