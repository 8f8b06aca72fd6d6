//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// sampleEvery is how often the restart sampler lists the Pods and asks each
// member's etcd for its Status; statusTimeout bounds one Status call, so a
// member that hangs (a paused one) delays only its own samples. A member
// restarted and not back is asked more often, to see its return at once
// (see startPoller).
const (
	sampleEvery     = 100 * time.Millisecond
	statusTimeout   = time.Second
	catchUpEvery    = 25 * time.Millisecond
	catchUpInFlight = 8
)

// restartWindow is one member restarted and not yet back: from the moment
// its Pod was seen deleted, gone or replaced, to the first Status its new
// Pod answered as a voter that knows a leader.
type restartWindow struct {
	member string
	from   types.UID
	opened time.Time
	closed time.Time
}

func (w restartWindow) String() string {
	end := "still not back"
	if !w.closed.IsZero() {
		end = "back " + w.closed.Format("15:04:05.000")
	}
	return fmt.Sprintf("%s restarted %s, %s", w.member, w.opened.Format("15:04:05.000"), end)
}

type sampledPod struct {
	uid      types.UID
	ip       string
	deleting bool
}

// restartSampler watches a rollout from outside the operator. The rollout's
// invariant is that it never restarts a second member while one it
// restarted is not back; in particular it never restarts a member that
// merely does not answer (a paused one) while another is restarting. So the
// sampler tracks, per member, windows of "restarted and not back", judged
// by etcd itself (each member's Status, by its Pod address, every 100 ms),
// and records every moment at which two windows are open. A member that
// does not answer but whose Pod was not touched (the paused one) opens no
// window: it is down, but not by the rollout's doing, and the operator must
// not make it so.
type restartSampler struct {
	ns, cluster string
	cs          kubernetes.Interface

	mu        sync.Mutex
	current   map[string]sampledPod
	back      map[string]types.UID
	open      map[string]*restartWindow
	windows   []*restartWindow
	answering map[string]bool
	polled    map[string]bool
	overlaps  []string
	lastOver  string
	// worstSilent is the most members not answering at once, for the log:
	// it includes the paused member and any Status that timed out on a
	// loaded node, so it is not the invariant.
	worstSilent int

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startRestartSampler begins with every member Ready and answering with a
// leader, each on the Pod it has now.
func startRestartSampler(ctx context.Context, h *healHarness) *restartSampler {
	h.t.Helper()
	// A client of its own: its 10 lists a second must not eat into the rate
	// limit the parallel tests share.
	cs, err := kubernetes.NewForConfig(env.Config)
	h.g.Expect(err).NotTo(HaveOccurred())
	s := &restartSampler{
		ns: h.ns, cluster: h.name, cs: cs,
		current: map[string]sampledPod{}, back: map[string]types.UID{}, open: map[string]*restartWindow{},
		answering: map[string]bool{}, polled: map[string]bool{},
	}
	pods, err := env.MemberPods(ctx, h.ns, h.name)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(pods).To(HaveLen(3))
	for name, p := range pods {
		h.g.Expect(framework.PodReady(p) && p.DeletionTimestamp == nil && p.Status.PodIP != "").To(BeTrue(), "%s is ready", name)
		ok, err := answersAsVoter(ctx, nil, endpointOf(p.Status.PodIP))
		h.g.Expect(err).NotTo(HaveOccurred(), "%s answers before the rollout", name)
		h.g.Expect(ok).To(BeTrue(), "%s is a voter that knows the leader before the rollout", name)
		s.current[name] = sampledPod{uid: p.UID, ip: p.Status.PodIP}
		s.back[name] = p.UID
		s.answering[name] = true
	}
	sctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	s.mu.Lock()
	for name := range s.current {
		s.startPoller(sctx, name)
	}
	s.mu.Unlock()
	s.wg.Add(1)
	go s.listPods(sctx)
	return s
}

func endpointOf(ip string) string { return fmt.Sprintf("http://%s:%d", ip, v1alpha1.ClientPort) }

// answersAsVoter asks one member for its Status: it answers as a voter that
// knows a leader. cli may be nil, for a one-off client.
func answersAsVoter(ctx context.Context, cli *clientv3.Client, ep string) (bool, error) {
	if cli == nil {
		c, err := framework.EtcdClient(ep)
		if err != nil {
			return false, err
		}
		defer c.Close()
		cli = c
	}
	sctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	st, err := cli.Status(sctx, ep)
	if err != nil {
		return false, err
	}
	return st.Leader != 0 && !st.IsLearner, nil
}

func (s *restartSampler) listPods(ctx context.Context) {
	defer s.wg.Done()
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		list, err := s.cs.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.ClusterLabel + "=" + s.cluster})
		if err != nil {
			// A failed list says nothing about the members; the next tick
			// looks again.
			continue
		}
		at := time.Now()
		seen := map[string]sampledPod{}
		for _, p := range list.Items {
			seen[p.Labels[v1alpha1.MemberLabel]] = sampledPod{uid: p.UID, ip: p.Status.PodIP, deleting: p.DeletionTimestamp != nil}
		}
		s.mu.Lock()
		for name := range s.current {
			if _, ok := seen[name]; !ok {
				s.observePod(ctx, name, nil, at)
			}
		}
		for name, p := range seen {
			s.observePod(ctx, name, &p, at)
		}
		s.mu.Unlock()
	}
}

// observePod opens a window when a member's Pod is seen deleted, gone or
// replaced since the member was last back. A member never seen before (a
// replacement) is down until it answers. Called with s.mu held.
func (s *restartSampler) observePod(ctx context.Context, name string, p *sampledPod, at time.Time) {
	if p == nil {
		delete(s.current, name)
	} else {
		s.current[name] = *p
	}
	if _, open := s.open[name]; !open {
		backOn, known := s.back[name]
		if !known || p == nil || p.deleting || p.uid != backOn {
			w := &restartWindow{member: name, from: backOn, opened: at}
			s.open[name] = w
			s.windows = append(s.windows, w)
			s.checkOverlap(at)
		}
	}
	if !s.polled[name] && p != nil {
		s.startPoller(ctx, name)
	}
}

// checkOverlap records a moment at which two members are restarted and not
// back. Called with s.mu held.
func (s *restartSampler) checkOverlap(at time.Time) {
	if len(s.open) < 2 {
		s.lastOver = ""
		return
	}
	var ws []string
	for _, w := range s.open {
		ws = append(ws, w.String())
	}
	sort.Strings(ws)
	key := strings.Join(ws, "; ")
	if key != s.lastOver {
		s.overlaps = append(s.overlaps, fmt.Sprintf("at %s: %s", at.Format("15:04:05.000"), key))
		s.lastOver = key
	}
}

// startPoller asks one member for its Status every sampleEvery, on the Pod
// it has at the time. While the member is restarted and not back, it asks
// every catchUpEvery instead, each time on a fresh connection and without
// waiting for the asks before (a few at most in flight): a new Pod's address
// exists before its etcd listens, a connection refused then would put gRPC
// into a reconnect backoff of seconds, and one ask hanging on a half-set-up
// network would hide the member's return. Seen late, a return would make a
// correct rollout's next restart look like an overlap. Called with s.mu held.
func (s *restartSampler) startPoller(ctx context.Context, name string) {
	s.polled[name] = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var cli *clientv3.Client
		var dialed string
		defer func() {
			if cli != nil {
				cli.Close()
			}
		}()
		inFlight := make(chan struct{}, catchUpInFlight)
		for ctx.Err() == nil {
			began := time.Now()
			s.mu.Lock()
			p, ok := s.current[name]
			_, restarting := s.open[name]
			s.mu.Unlock()
			every := sampleEvery
			switch {
			case !ok || p.deleting || p.ip == "":
				s.observeStatus(name, p.uid, false, began)
			case restarting:
				every = catchUpEvery
				select {
				case inFlight <- struct{}{}:
					s.wg.Add(1)
					go func() {
						defer s.wg.Done()
						defer func() { <-inFlight }()
						answered, _ := answersAsVoter(ctx, nil, endpointOf(p.ip))
						if ctx.Err() == nil {
							s.observeStatus(name, p.uid, answered, time.Now())
						}
					}()
				default:
				}
			default:
				ep := endpointOf(p.ip)
				if cli == nil || ep != dialed {
					if cli != nil {
						cli.Close()
					}
					cli, _ = framework.EtcdClient(ep)
					dialed = ep
				}
				answered := false
				if cli != nil {
					answered, _ = answersAsVoter(ctx, cli, ep)
				}
				if ctx.Err() != nil {
					return
				}
				s.observeStatus(name, p.uid, answered, time.Now())
				if !answered && cli != nil {
					// A fresh connection next time, not one in backoff.
					cli.Close()
					cli = nil
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(began.Add(every))):
			}
		}
	}()
}

// observeStatus closes a member's window at the first answer from a Pod
// other than the one restarted, if that Pod is still the member's.
func (s *restartSampler) observeStatus(name string, uid types.UID, answered bool, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answering[name] = answered
	silent := 0
	for n := range s.current {
		if !s.answering[n] {
			silent++
		}
	}
	s.worstSilent = max(s.worstSilent, silent)
	w := s.open[name]
	cur, ok := s.current[name]
	if !answered || w == nil || uid == w.from || !ok || cur.uid != uid || cur.deleting {
		return
	}
	w.closed = at
	delete(s.open, name)
	s.back[name] = uid
	s.checkOverlap(at)
}

// restarting names a member restarted and not back, or "".
func (s *restartSampler) restarting() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.open {
		return name
	}
	return ""
}

// stop ends the sampling and returns every window and every moment of
// overlap.
func (s *restartSampler) stop() (windows []restartWindow, overlaps []string, worstSilent int) {
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.windows {
		windows = append(windows, *w)
	}
	return windows, append([]string(nil), s.overlaps...), s.worstSilent
}

// healthyOutdatedFollower is a member other than except whose Pod is ready
// and still on the old resources, and whose etcd answers as a follower that
// knows the leader: the member a rollout must not take for down.
func (h *healHarness) healthyOutdatedFollower(ctx context.Context, except string, want resource.Quantity) string {
	h.t.Helper()
	pods, err := env.MemberPods(ctx, h.ns, h.name)
	h.g.Expect(err).NotTo(HaveOccurred())
	var found []string
	for name, p := range pods {
		got := p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]
		if name == except || p.DeletionTimestamp != nil || !framework.PodReady(p) || got.Cmp(want) == 0 {
			continue
		}
		ep := endpointOf(p.Status.PodIP)
		cli, err := framework.EtcdClient(ep)
		if err != nil {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cli.Status(sctx, ep)
		cancel()
		cli.Close()
		if err == nil && st.Leader != 0 && st.Leader != st.Header.MemberId && !st.IsLearner {
			found = append(found, name)
		}
	}
	h.g.Expect(found).NotTo(BeEmpty(), "a healthy follower not yet rolled, besides %s", except)
	sort.Strings(found)
	return found[0]
}

// expectOnCurrentTemplate: every member's Pod was built from the member's
// spec as it is now.
func (h *healHarness) expectOnCurrentTemplate(ctx context.Context) []v1alpha1.EtcdMember {
	h.t.Helper()
	members := h.members(ctx)
	for i := range members {
		m := &members[i]
		p, err := env.Clientset.CoreV1().Pods(h.ns).Get(ctx, m.Name, metav1.GetOptions{})
		h.g.Expect(err).NotTo(HaveOccurred())
		h.g.Expect(p.Annotations).To(HaveKeyWithValue(pod.TemplateHashAnnotation, pod.TemplateHash(m)),
			"the Pod of %s is built from its member's current template", m.Name)
	}
	return members
}

// TestRolloutUnderASlowMember: a resources change rolls through a
// 3-member cluster; while the first member it restarts is coming back, a
// healthy follower not yet rolled is paused for 3 s, so that it stops
// answering exactly as a member that is down would. The rollout must not
// take it for down: at no moment are two members restarted and not back.
// Under a linearizability workload the history stays linearizable, and the
// cluster ends Ready with every member on the new template.
func TestRolloutUnderASlowMember(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r := newRollCluster(ctx, t, "slow-member", nil)
	sampler := startRestartSampler(ctx, r)
	stopped := false
	defer func() {
		if !stopped {
			sampler.stop()
		}
	}()
	check := r.startChecker(ctx)

	want := resource.MustParse("144Mi")
	r.g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) {
		c.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: want}}
	})).To(Succeed())
	var first string
	r.g.Expect(framework.WaitFor(ctx, 3*time.Minute, 20*time.Millisecond, func(context.Context) (bool, error) {
		first = sampler.restarting()
		return first != "", nil
	})).To(Succeed(), "the rollout restarts a first member")
	slow := r.healthyOutdatedFollower(ctx, first, want)
	t.Logf("%s is restarting; pausing %s, a healthy follower not yet rolled, for 3s", first, slow)
	pause, err := env.PauseMember(ctx, r.ns, slow, 3*time.Second)
	r.g.Expect(err).NotTo(HaveOccurred())
	t.Logf("%s paused from %s to %s", slow, pause.Stopped.Format("15:04:05.000"), pause.Resumed.Format("15:04:05.000"))

	cl := r.rolled(ctx, 8*time.Minute)
	rep := check()
	windows, overlaps, worstSilent := sampler.stop()
	stopped = true
	for _, w := range windows {
		t.Logf("window: %s", w)
	}
	t.Logf("at most %d members did not answer at once, the paused one and timeouts included", worstSilent)

	r.g.Expect(overlaps).To(BeEmpty(), "two members were restarted and not back at once")
	// The fault was injected as the test means it: the first member was
	// restarted before the pause and was not back when it began.
	r.g.Expect(windows).NotTo(BeEmpty())
	r.g.Expect(windows[0].member).To(Equal(first))
	r.g.Expect(windows[0].opened.Before(pause.Stopped)).To(BeTrue(), "%s was restarted before the pause", first)
	r.g.Expect(windows[0].closed.IsZero() || windows[0].closed.After(pause.Stopped)).To(BeTrue(),
		"%s was still not back when %s was paused", first, slow)
	restarted := map[string]bool{}
	for _, w := range windows {
		r.g.Expect(w.closed.IsZero()).To(BeFalse(), "every member restarted came back: %s", w)
		restarted[w.member] = true
	}
	for _, m := range cl.Status.Members {
		r.g.Expect(restarted).To(HaveKey(m.Name), "the sampler saw %s restarted and back", m.Name)
	}

	r.g.Expect(rep.Err()).NotTo(HaveOccurred(), "the history is linearizable")
	r.g.Expect(rep.Acknowledged).To(BeNumerically(">", 0), "writes went through")
	r.g.Expect(cl.Status.Members).To(HaveLen(3))
	for _, m := range r.expectOnCurrentTemplate(ctx) {
		p, err := env.Clientset.CoreV1().Pods(r.ns).Get(ctx, m.Name, metav1.GetOptions{})
		r.g.Expect(err).NotTo(HaveOccurred())
		got := p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]
		r.g.Expect(got.Cmp(want)).To(BeZero(), "%s runs with the new resources", m.Name)
	}
	r.expectSentinelEverywhere(ctx)
}
