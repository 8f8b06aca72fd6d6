package framework

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// A Pod's readiness, read through the API, says what the kubelet last
// reported about its probe, seconds late at worst; how many members are down
// at an instant is a question for etcd. The watch here asks every member
// itself, at its Pod's address, ten times a second.

const (
	// memberSampleEvery is how often the members are sampled. A sample
	// starts on time even while the one before still waits on a member that
	// does not answer.
	memberSampleEvery = 100 * time.Millisecond
	// memberAnswerTimeout bounds each member's Status call. A live member
	// answers it from memory in milliseconds, without a leader or a disk.
	memberAnswerTimeout = time.Second
)

// MemberSample is one look at every member of a cluster.
type MemberSample struct {
	// At is when the members were asked; Done when the last of them had
	// answered or timed out. What the sample shows held at some instant
	// between the two.
	At, Done time.Time
	// Members are the cluster's EtcdMembers that were not being deleted,
	// sorted.
	Members []string
	// Down are the members that did not answer: no Pod with an address, or
	// no Status within memberAnswerTimeout. Sorted.
	Down []string
	// Leaders is the leader each member that answered follows, 0 for none.
	Leaders map[string]uint64
}

// Leader is the leader a majority of the sample's members follow, or 0.
func (s MemberSample) Leader() uint64 {
	counts := map[uint64]int{}
	for _, l := range s.Leaders {
		if l != 0 {
			counts[l]++
		}
	}
	for l, n := range counts {
		if n > len(s.Members)/2 {
			return l
		}
	}
	return 0
}

// MembersDownWatch samples which members of a cluster answer, until Stop.
type MembersDownWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	samples   []MemberSample
	unsampled []error
}

// WatchMembersDown starts asking every member of the cluster in ns for its
// Status at its Pod's address every 100 ms, and counting those that do not
// answer within a second. The members are the cluster's EtcdMembers that
// are not being deleted, so a member whose Pod is gone counts as down.
func (e *Env) WatchMembersDown(ctx context.Context, ns, cluster string) *MembersDownWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &MembersDownWatch{cancel: cancel, done: make(chan struct{})}
	c, err := e.Client()
	if err != nil {
		w.unsampled = append(w.unsampled, err)
		close(w.done)
		return w
	}
	go w.run(ctx, e, c, ns, cluster)
	return w
}

func (w *MembersDownWatch) run(ctx context.Context, e *Env, c client.Client, ns, cluster string) {
	defer close(w.done)
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	tick := time.NewTicker(memberSampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		members, addrs, err := e.memberAddresses(ctx, c, ns, cluster)
		if err != nil {
			if ctx.Err() == nil {
				w.mu.Lock()
				w.unsampled = append(w.unsampled, err)
				w.mu.Unlock()
			}
			continue
		}
		inFlight.Add(1)
		go func() {
			defer inFlight.Done()
			s := sampleMembers(ctx, members, addrs)
			// A sample cut short by Stop would count members that were
			// not asked to the end as down.
			if ctx.Err() != nil {
				return
			}
			w.mu.Lock()
			w.samples = append(w.samples, s)
			w.mu.Unlock()
		}()
	}
}

// memberAddresses lists the cluster's live members and the client URL of
// each one's Pod that has an address.
func (e *Env) memberAddresses(ctx context.Context, c client.Client, ns, cluster string) ([]string, map[string]string, error) {
	var list v1alpha1.EtcdMemberList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ClusterLabel: cluster}); err != nil {
		return nil, nil, fmt.Errorf("failed to list the members of %s/%s: %w", ns, cluster, err)
	}
	pods, err := e.clusterPods(ctx, ns, cluster)
	if err != nil {
		return nil, nil, err
	}
	var members []string
	addrs := map[string]string{}
	for _, m := range list.Items {
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		members = append(members, m.Name)
		if p := podOf(pods, m.Name); p != nil && p.Status.PodIP != "" {
			addrs[m.Name] = fmt.Sprintf("http://%s:%d", p.Status.PodIP, v1alpha1.ClientPort)
		}
	}
	sort.Strings(members)
	return members, addrs, nil
}

// clusterPods lists the Pods of the cluster's members, those being deleted
// included: etcd in a Pod that is shutting down may still answer.
func (e *Env) clusterPods(ctx context.Context, ns, cluster string) ([]corev1.Pod, error) {
	sel := v1alpha1.ClusterLabel + "=" + cluster + "," + v1alpha1.MemberLabel
	pods, err := e.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("failed to list the pods of %s/%s: %w", ns, cluster, err)
	}
	return pods.Items, nil
}

// sampleMembers asks each member with an address for its Status, all at once.
func sampleMembers(ctx context.Context, members []string, addrs map[string]string) MemberSample {
	s := MemberSample{At: time.Now(), Members: members, Leaders: map[string]uint64{}}
	var eps []string
	for _, m := range members {
		if ep, ok := addrs[m]; ok {
			eps = append(eps, ep)
		}
	}
	answers := statusAll(ctx, eps, memberAnswerTimeout)
	for _, m := range members {
		st, ok := answers[addrs[m]]
		if !ok {
			s.Down = append(s.Down, m)
			continue
		}
		s.Leaders[m] = st.LeaderID
	}
	s.Done = time.Now()
	return s
}

// statusAll asks each endpoint, and only it, for its Status at once, each
// call bounded by timeout. Endpoints that did not answer are left out.
func statusAll(ctx context.Context, eps []string, timeout time.Duration) map[string]etcd.EndpointStatus {
	out := map[string]etcd.EndpointStatus{}
	if len(eps) == 0 {
		return out
	}
	c, err := etcd.NewDialer(etcd.WithCallTimeout(timeout)).Dial(ctx, eps)
	if err != nil {
		return out
	}
	defer func() { _ = c.Close() }()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := c.Status(ctx, ep)
			if err != nil {
				return
			}
			mu.Lock()
			out[ep] = st
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// Stop ends the watch and reports what it saw. A watch that never took a
// sample checked nothing, and says so as an error.
func (w *MembersDownWatch) Stop() (MembersDownReport, error) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	r := summarizeMemberSamples(w.samples, len(w.unsampled))
	if len(r.Samples) == 0 {
		return r, fmt.Errorf("the members were never sampled: %w", errors.Join(append([]error{errors.New("no sample")}, w.unsampled...)...))
	}
	return r, nil
}

// MembersDownReport is what a MembersDownWatch saw.
type MembersDownReport struct {
	// Samples are every sample taken, by time.
	Samples []MemberSample
	// Unsampled counts the times the members could not be listed.
	Unsampled int
	// MaxDown is the most members that did not answer at one sample.
	MaxDown int
	// Worst are the samples at which MaxDown members did not answer.
	Worst []MemberSample
}

func summarizeMemberSamples(samples []MemberSample, unsampled int) MembersDownReport {
	r := MembersDownReport{Samples: slices.Clone(samples), Unsampled: unsampled}
	sort.SliceStable(r.Samples, func(i, j int) bool { return r.Samples[i].At.Before(r.Samples[j].At) })
	for _, s := range r.Samples {
		switch {
		case len(s.Down) > r.MaxDown:
			r.MaxDown, r.Worst = len(s.Down), []MemberSample{s}
		case len(s.Down) == r.MaxDown && r.MaxDown > 0:
			r.Worst = append(r.Worst, s)
		}
	}
	return r
}

// SeenDown are the members that did not answer at some sample, sorted.
func (r MembersDownReport) SeenDown() []string {
	seen := map[string]bool{}
	for _, s := range r.Samples {
		for _, m := range s.Down {
			seen[m] = true
		}
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// String sums the report up for a test's log or failure message, with the
// worst samples (the first few) and when they were taken.
func (r MembersDownReport) String() string {
	if len(r.Samples) == 0 {
		return fmt.Sprintf("no sample (%d times the members could not be listed)", r.Unsampled)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d samples from %s to %s (%d times unlisted); at most %d members down at once",
		len(r.Samples), stamp(r.Samples[0].At), stamp(r.Samples[len(r.Samples)-1].At), r.Unsampled, r.MaxDown)
	for i, s := range r.Worst {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more such samples", len(r.Worst)-i)
			break
		}
		fmt.Fprintf(&b, "; at %s %v of %v", stamp(s.At), s.Down, s.Members)
	}
	return b.String()
}

func stamp(t time.Time) string { return t.Format("15:04:05.000") }

// LeaderChange is a change of leader the samples show.
type LeaderChange struct {
	From, To uint64
	// LastFrom is when the last sample at which a majority followed From
	// was taken: the change came after it. FirstTo is when the first sample
	// after it at which a majority followed To was complete: the change
	// came before it. Samples between them, if any, had no majority
	// following one leader.
	LastFrom, FirstTo time.Time
}

// LeaderChanges lists the changes of leader, by time, as samples with a
// majority following one leader show them.
func (r MembersDownReport) LeaderChanges() []LeaderChange {
	var out []LeaderChange
	var cur uint64
	var curAt time.Time
	for _, s := range r.Samples {
		l := s.Leader()
		if l == 0 {
			continue
		}
		if cur != 0 && l != cur {
			out = append(out, LeaderChange{From: cur, To: l, LastFrom: curAt, FirstTo: s.Done})
		}
		cur, curAt = l, s.At
	}
	return out
}

// electionTimeout is etcd's default --election-timeout, which the operator
// does not change. A leader transfer holds proposals back until the new
// leader takes over, or for this long at most before it gives up, while
// the old leader still calls itself the leader.
const electionTimeout = time.Second

// WriteSpan is when one write was in flight: sent at Start, answered at End.
type WriteSpan struct{ Start, End time.Time }

// Overlaps reports whether the two spans share an instant.
func (w WriteSpan) Overlaps(o WriteSpan) bool {
	return !w.Start.After(o.End) && !w.End.Before(o.Start)
}

// FailureWindow is when writes may fail because of the change: from one
// election timeout before the last sample that still showed the old leader
// to the answer of the first write that succeeded having been sent once the
// new leader was seen, after which the cluster is known to take writes
// again. ok is false when no such write succeeded.
func (c LeaderChange) FailureWindow(succeeded []WriteSpan) (WriteSpan, bool) {
	w := WriteSpan{Start: c.LastFrom.Add(-electionTimeout)}
	found := false
	for _, s := range succeeded {
		if s.Start.Before(c.FirstTo) {
			continue
		}
		if !found || s.End.Before(w.End) {
			w.End, found = s.End, true
		}
	}
	return w, found
}

// podOf is the Pod in pods that runs the member, or nil.
func podOf(pods []corev1.Pod, member string) *corev1.Pod {
	for i := range pods {
		if pods[i].Labels[v1alpha1.MemberLabel] == member {
			return &pods[i]
		}
	}
	return nil
}
