//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// TestDrainWithinBudget: kubectl drain evicts the member on the drained
// node through the cluster's PodDisruptionBudget; while that member is away,
// the budget refuses the eviction of a second one; a probe asking every
// member for its health every 200 ms never finds two down at once; and after
// uncordon the member comes back on its node, where its volume is, under its
// member ID and with the data.
func TestDrainWithinBudget(t *testing.T) {
	framework.Serial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	nodes := env.Nodes(t, e2eNodes)
	target := nodes[1].Name
	h := newHealCluster(ctx, t, "drain", nil)

	pods, err := env.MemberPods(ctx, h.ns, h.name)
	h.g.Expect(err).NotTo(HaveOccurred())
	var drained, other string
	for member, p := range pods {
		switch p.Spec.NodeName {
		case target:
			h.g.Expect(drained).To(BeEmpty(), "two members on %s", target)
			drained = member
		default:
			other = member
		}
	}
	h.g.Expect(drained).NotTo(BeEmpty(), "a member on %s", target)
	idBefore := memberID(ctx, h, drained)

	probeCtx, stopProbe := context.WithCancel(ctx)
	probe := startHealthProbe(probeCtx, h.ns, h.name, names(h.members(ctx)))

	t.Logf("kubectl drain %s (member %s)", target, drained)
	drain := env.Drain(ctx, t, target)
	t.Logf("kubectl drain:\n%s%s", drain.Stdout, drain.Stderr)
	h.g.Expect(drain.Err).NotTo(HaveOccurred())
	h.g.Expect(drain.Stdout).To(ContainSubstring("pod/" + drained + " evicted"))

	t.Log("the operator re-creates the member's Pod, which waits for its node: the volume is there")
	h.g.Expect(framework.WaitFor(ctx, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		p, err := env.Clientset.CoreV1().Pods(h.ns).Get(ctx, drained, metav1.GetOptions{})
		if err != nil {
			return false, client404(err)
		}
		return p.DeletionTimestamp == nil && p.Spec.NodeName == "" && unschedulable(p), nil
	})).To(Succeed())

	t.Logf("with %s away, the budget refuses to evict %s", drained, other)
	err = env.Clientset.PolicyV1().Evictions(h.ns).Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: other, Namespace: h.ns},
	})
	h.g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "want 429 from the disruption budget, got %v", err)

	t.Logf("kubectl uncordon %s: the member returns there with its ID and data", target)
	h.g.Expect(env.Kubectl(ctx, "uncordon", target).Err).NotTo(HaveOccurred())
	h.g.Expect(framework.WaitFor(ctx, 3*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		p, err := env.Clientset.CoreV1().Pods(h.ns).Get(ctx, drained, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == target && framework.PodReady(p), client404(err)
	})).To(Succeed())
	cl, err := framework.WaitForClusterReady(ctx, h.c, h.ns, h.name, 3*time.Minute)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(cl.Status.Members).To(HaveLen(3))
	h.g.Expect(memberID(ctx, h, drained)).To(Equal(idBefore), "the same member, from its own volume")
	stopProbe()
	result := probe.wait()
	t.Logf("health probe: %d rounds, at most %d member(s) down at once, down at some point: %v", result.rounds, result.maxDown, result.seenDown)
	h.g.Expect(result.rounds).To(BeNumerically(">=", 5), "the probe ran through the drain")
	h.g.Expect(result.seenDown).To(HaveKey(drained), "the probe saw the drained member go")
	h.g.Expect(result.maxDown).To(BeNumerically("<=", 1), "two members down at once, first at %s: %v", result.maxDownAt.Format(time.RFC3339Nano), result.maxDownSet)
	h.expectSentinelEverywhere(ctx)
}

func memberID(ctx context.Context, h *healHarness, member string) string {
	h.t.Helper()
	m := &v1alpha1.EtcdMember{}
	h.g.Expect(h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: member}, m)).To(Succeed())
	h.g.Expect(m.Status.MemberID).NotTo(BeEmpty())
	return m.Status.MemberID
}

func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// client404 treats a missing Pod as not yet there rather than an error.
func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// probeResult is what a health probe saw.
type probeResult struct {
	rounds     int
	maxDown    int
	maxDownAt  time.Time
	maxDownSet []string
	// seenDown counts, per member, the rounds it was down in.
	seenDown map[string]int
}

type healthProbe struct {
	done   chan struct{}
	result probeResult
}

func (p *healthProbe) wait() probeResult {
	<-p.done
	return p.result
}

// startHealthProbe asks each member, every 200 ms until ctx ends, whether it
// is up: its Pod has an address and etcd there answers its own health check.
// The check is serializable: it asks whether the member serves, so that a
// leader election, during which every member's linearizable /health fails
// for a moment, does not count as members being down.
func startHealthProbe(ctx context.Context, ns, cluster string, members []string) *healthProbe {
	p := &healthProbe{done: make(chan struct{}), result: probeResult{seenDown: map[string]int{}}}
	httpc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: time.Second}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			began := time.Now()
			addrs := map[string]string{}
			if pods, err := env.MemberPods(ctx, ns, cluster); err == nil {
				for m, pod := range pods {
					addrs[m] = pod.Status.PodIP
				}
			} else if ctx.Err() != nil {
				return
			}
			var mu sync.Mutex
			var down []string
			var wg sync.WaitGroup
			for _, m := range members {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if !memberUp(ctx, httpc, addrs[m]) {
						mu.Lock()
						down = append(down, m)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if ctx.Err() != nil {
				return
			}
			sort.Strings(down)
			r := &p.result
			r.rounds++
			for _, m := range down {
				r.seenDown[m]++
			}
			if len(down) > r.maxDown {
				r.maxDown, r.maxDownAt, r.maxDownSet = len(down), began, down
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(began.Add(200 * time.Millisecond))):
			}
		}
	}()
	return p
}

func memberUp(ctx context.Context, c *http.Client, ip string) bool {
	if ip == "" {
		return false
	}
	url := fmt.Sprintf("http://%s:%d/health?serializable=true", ip, v1alpha1.MetricsPort)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"health":"true"`)
}
