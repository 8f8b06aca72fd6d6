package framework

import (
	"context"
	"crypto/tls"
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
	"github.com/quorumctl/etcd-operator/internal/component/pod"
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
	// no Status within memberAnswerTimeout. Sorted. In a MembersDownReport,
	// only those counted as down (see Slow).
	Down []string
	// Slow, in a MembersDownReport, are the members that did not answer in
	// time while their process was there: every look of the spell timed
	// out, and the same Pod, its etcd container not restarted, answered
	// right before and right after it. Sorted.
	Slow []string
	// Late are the members in Down whose look timed out, rather than
	// finding no Pod address or a refused connection.
	Late map[string]bool
	// Pods is, for each member with a Pod address, which process the look
	// went to: its Pod's UID and its etcd container's restart count.
	Pods map[string]string
	// Leaders is the leader each member that answered follows, 0 for none.
	Leaders map[string]uint64
	// Why says, for each member in Down, what the look got instead of an
	// answer: no Pod address, or the call's error (a refused connection is
	// a process that is not there; a timeout may be one that is slow).
	Why map[string]string
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
	// tls asks the members over https with it, when set.
	tls *tls.Config
	// either, when set, asks each member over http and, once it returns a
	// configuration, over https too: a member that answers on either
	// scheme is up (a cluster turning TLS on).
	either func() *tls.Config

	mu        sync.Mutex
	samples   []MemberSample
	unsampled []error
}

// WatchMembersDown starts asking every member of the cluster in ns for its
// Status at its Pod's address every 100 ms, and counting those that do not
// answer within a second. The members are the cluster's EtcdMembers that
// are not being deleted, so a member whose Pod is gone counts as down.
func (e *Env) WatchMembersDown(ctx context.Context, ns, cluster string) *MembersDownWatch {
	return e.WatchMembersDownTLS(ctx, ns, cluster, nil)
}

// WatchMembersDownTLS is WatchMembersDown for a cluster whose client port
// serves TLS, asked over https with cfg.
func (e *Env) WatchMembersDownTLS(ctx context.Context, ns, cluster string, cfg *tls.Config) *MembersDownWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &MembersDownWatch{cancel: cancel, done: make(chan struct{}), tls: cfg}
	c, err := e.Client()
	if err != nil {
		w.unsampled = append(w.unsampled, err)
		close(w.done)
		return w
	}
	go w.run(ctx, e, c, ns, cluster)
	return w
}

// WatchMembersDownEitherScheme is WatchMembersDown for a cluster turning
// TLS on: a member is up when it answers over http, or over https with the
// configuration cfg returns (nil until the client certificate exists).
func (e *Env) WatchMembersDownEitherScheme(ctx context.Context, ns, cluster string, cfg func() *tls.Config) *MembersDownWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &MembersDownWatch{cancel: cancel, done: make(chan struct{}), either: cfg}
	c, err := e.Client()
	if err != nil {
		w.unsampled = append(w.unsampled, err)
		close(w.done)
		return w
	}
	go w.run(ctx, e, c, ns, cluster)
	return w
}

// eitherScheme merges a sample over http with one over https: down is
// what answered on neither.
func eitherScheme(plain, secure MemberSample) MemberSample {
	out := plain
	out.Down = nil
	for _, m := range plain.Down {
		if _, up := secure.Leaders[m]; up {
			out.Leaders[m] = secure.Leaders[m]
			delete(out.Why, m)
			delete(out.Late, m)
			continue
		}
		out.Down = append(out.Down, m)
	}
	out.Done = secure.Done
	return out
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
		members, addrs, procs, err := e.memberAddresses(ctx, c, ns, cluster)
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
			if w.tls != nil {
				addrs = httpsAddresses(addrs)
			}
			s := sampleMembers(ctx, members, addrs, w.tls)
			if w.either != nil && len(s.Down) > 0 {
				if cfg := w.either(); cfg != nil {
					s = eitherScheme(s, sampleMembers(ctx, s.Down, httpsAddresses(addrs), cfg))
				}
			}
			s.Pods = procs
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

// memberAddresses lists the cluster's live members, and the client URL and
// process (see processOf) of each one's Pod that has an address.
func (e *Env) memberAddresses(ctx context.Context, c client.Client, ns, cluster string) ([]string, map[string]string, map[string]string, error) {
	var list v1alpha1.EtcdMemberList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ClusterLabel: cluster}); err != nil {
		return nil, nil, nil, fmt.Errorf("failed to list the members of %s/%s: %w", ns, cluster, err)
	}
	pods, err := e.clusterPods(ctx, ns, cluster)
	if err != nil {
		return nil, nil, nil, err
	}
	var members []string
	addrs := map[string]string{}
	procs := map[string]string{}
	for _, m := range list.Items {
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		members = append(members, m.Name)
		if p := podOf(pods, m.Name); p != nil && p.Status.PodIP != "" {
			addrs[m.Name] = fmt.Sprintf("http://%s:%d", p.Status.PodIP, v1alpha1.ClientPort)
			procs[m.Name] = processOf(p)
		}
	}
	sort.Strings(members)
	return members, addrs, procs, nil
}

// processOf names the etcd process a Pod runs, as far as the API tells: a
// restart of the container in place keeps the Pod's UID and adds one to its
// restart count.
func processOf(p *corev1.Pod) string {
	restarts := int32(0)
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == pod.ContainerName {
			restarts = cs.RestartCount
		}
	}
	return fmt.Sprintf("%s/%d", p.UID, restarts)
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

func httpsAddresses(addrs map[string]string) map[string]string {
	out := map[string]string{}
	for m, a := range addrs {
		out[m] = HTTPS([]string{a})[0]
	}
	return out
}

// sampleMembers asks each member with an address for its Status, all at
// once, over TLS with cfg when it is set.
func sampleMembers(ctx context.Context, members []string, addrs map[string]string, cfg *tls.Config) MemberSample {
	s := MemberSample{At: time.Now(), Members: members, Leaders: map[string]uint64{}, Why: map[string]string{}, Late: map[string]bool{}}
	var eps []string
	for _, m := range members {
		if ep, ok := addrs[m]; ok {
			eps = append(eps, ep)
		}
	}
	answers, errs := statusEach(ctx, eps, memberAnswerTimeout, cfg)
	for _, m := range members {
		st, ok := answers[addrs[m]]
		if !ok {
			s.Down = append(s.Down, m)
			switch err, asked := errs[addrs[m]]; {
			case addrs[m] == "":
				s.Why[m] = "no Pod address"
			case asked:
				s.Why[m] = err.Error()
				s.Late[m] = errors.Is(err, context.DeadlineExceeded)
			}
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
	out, _ := statusEach(ctx, eps, timeout, nil)
	return out
}

// statusEach is statusAll with the error of each endpoint that did not
// answer.
func statusEach(ctx context.Context, eps []string, timeout time.Duration, cfg *tls.Config) (map[string]etcd.EndpointStatus, map[string]error) {
	out := map[string]etcd.EndpointStatus{}
	errs := map[string]error{}
	if len(eps) == 0 {
		return out, errs
	}
	var opts []etcd.DialOption
	if cfg != nil {
		opts = append(opts, etcd.WithClientTLS(cfg))
	}
	c, err := etcd.NewDialer(etcd.WithCallTimeout(timeout)).Dial(ctx, eps, opts...)
	if err != nil {
		for _, ep := range eps {
			errs[ep] = err
		}
		return out, errs
	}
	defer func() { _ = c.Close() }()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := c.Status(ctx, ep)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[ep] = err
				return
			}
			out[ep] = st
		}()
	}
	wg.Wait()
	return out, errs
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
	// MaxDown is the most members counted down at one sample.
	MaxDown int
	// Worst are the samples at which MaxDown members did not answer.
	Worst []MemberSample
}

func summarizeMemberSamples(samples []MemberSample, unsampled int) MembersDownReport {
	r := MembersDownReport{Samples: slices.Clone(samples), Unsampled: unsampled}
	sort.SliceStable(r.Samples, func(i, j int) bool { return r.Samples[i].At.Before(r.Samples[j].At) })
	excuseSlowSpells(r.Samples)
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

// excuseSlowSpells moves, sample by sample, the members of a slow spell
// from Down to Slow.
//
// One look that times out does not make a member down: on a loaded machine
// a member that keeps leading or following can take longer than
// memberAnswerTimeout to answer (etcd's Status reads the backend, which a
// commit holds through its fsync), and the CI machine once saw a leader,
// which its followers went on following, miss two looks while another
// member restarted. A member the rollout restarts is gone instead: its Pod
// has no address, or its port refuses, or a new Pod (or a restarted
// container) answers after. So a spell of samples at which a member did not
// answer counts as down unless every look of it timed out and the same
// process answered at the samples on both sides of it; a spell at either
// end of the watch has no such side and counts.
func excuseSlowSpells(samples []MemberSample) {
	members := map[string]bool{}
	for _, s := range samples {
		for _, m := range s.Down {
			members[m] = true
		}
	}
	excused := map[int]map[string]bool{}
	for m := range members {
		for from := 0; from < len(samples); from++ {
			if !slices.Contains(samples[from].Down, m) {
				continue
			}
			to := from
			for to+1 < len(samples) && slices.Contains(samples[to+1].Down, m) {
				to++
			}
			if slowSpell(samples, m, from, to) {
				for j := from; j <= to; j++ {
					if excused[j] == nil {
						excused[j] = map[string]bool{}
					}
					excused[j][m] = true
				}
			}
			from = to
		}
	}
	for j, ms := range excused {
		s := &samples[j]
		var down []string
		for _, m := range s.Down {
			if ms[m] {
				s.Slow = append(s.Slow, m)
			} else {
				down = append(down, m)
			}
		}
		s.Down = down
	}
}

// slowSpell: at samples from to to, m did not answer in time, and the same
// process answered right before and right after.
func slowSpell(samples []MemberSample, m string, from, to int) bool {
	if from == 0 || to == len(samples)-1 {
		return false
	}
	before, after := samples[from-1], samples[to+1]
	_, answeredBefore := before.Leaders[m]
	_, answeredAfter := after.Leaders[m]
	proc := before.Pods[m]
	if !answeredBefore || !answeredAfter || proc == "" || after.Pods[m] != proc {
		return false
	}
	for j := from; j <= to; j++ {
		if !samples[j].Late[m] || samples[j].Pods[m] != proc {
			return false
		}
	}
	return true
}

// SeenDown are the members counted down at some sample, sorted.
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
	slow := 0
	for _, s := range r.Samples {
		slow += len(s.Slow)
	}
	fmt.Fprintf(&b, "%d samples from %s to %s (%d times unlisted); %d looks slow, not down; at most %d members down at once",
		len(r.Samples), stamp(r.Samples[0].At), stamp(r.Samples[len(r.Samples)-1].At), r.Unsampled, slow, r.MaxDown)
	for i, s := range r.Worst {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more such samples", len(r.Worst)-i)
			break
		}
		fmt.Fprintf(&b, "; at %s %v of %v", stamp(s.At), s.Down, s.Members)
		for _, m := range s.Down {
			fmt.Fprintf(&b, " (%s: %s)", m, s.Why[m])
		}
		for _, m := range s.Members {
			if l, ok := s.Leaders[m]; ok {
				fmt.Fprintf(&b, " (%s follows %x)", m, l)
			}
		}
	}
	return b.String()
}

func stamp(t time.Time) string { return t.Format("15:04:05.000") }

// podOf is the Pod in pods that runs the member, or nil.
func podOf(pods []corev1.Pod, member string) *corev1.Pod {
	for i := range pods {
		if pods[i].Labels[v1alpha1.MemberLabel] == member {
			return &pods[i]
		}
	}
	return nil
}

// Timeline sums up, member by member, the spells of samples at which it did
// not answer: from the first such sample to the last, how many samples, what
// the looks got instead of an answer, and whether the spell was only slow
// (see excuseSlowSpells). It is for a test's log.
func (r MembersDownReport) Timeline() string {
	type run struct {
		first, last time.Time
		n           int
		slow        bool
		why         map[string]int
	}
	runs := map[string][]*run{}
	open := map[string]*run{}
	var names []string
	for _, s := range r.Samples {
		down := map[string]bool{}
		for _, m := range slices.Concat(s.Down, s.Slow) {
			down[m] = true
			cur := open[m]
			if cur == nil {
				cur = &run{first: s.At, slow: slices.Contains(s.Slow, m), why: map[string]int{}}
				open[m] = cur
				if runs[m] == nil {
					names = append(names, m)
				}
				runs[m] = append(runs[m], cur)
			}
			cur.last, cur.n = s.At, cur.n+1
			cur.why[shortWhy(s.Why[m])]++
		}
		for m := range open {
			if !down[m] {
				delete(open, m)
			}
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, m := range names {
		fmt.Fprintf(&b, "%s:", m)
		for _, rn := range runs[m] {
			fmt.Fprintf(&b, " [%s-%s %d samples", stamp(rn.first), stamp(rn.last), rn.n)
			for w, n := range rn.why {
				fmt.Fprintf(&b, "; %d %s", n, w)
			}
			if rn.slow {
				b.WriteString("; slow, not down")
			}
			b.WriteString("]")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// shortWhy keeps the part of a call's error that tells kinds apart.
func shortWhy(why string) string {
	for _, k := range []string{"no Pod address", "connection refused", "deadline exceeded", "no route to host", "connection reset"} {
		if strings.Contains(why, k) {
			return k
		}
	}
	if len(why) > 80 {
		return why[:80]
	}
	return why
}
