//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
	"github.com/quorumctl/etcd-operator/test/linearizability"
)

// nodeLossBound is the node-loss bound the node-loss tests set, so that they
// wait seconds rather than the default minute.
const nodeLossBound = 15

func withNodeLossBound(seconds int32) func(*v1alpha1.EtcdCluster) {
	return func(c *v1alpha1.EtcdCluster) { c.Spec.SelfHeal.NodeLostAfterSeconds = ptr.To(seconds) }
}

// memberOn is the member of h whose Pod is bound to the node.
func (h *healHarness) memberOn(ctx context.Context, node string) (v1alpha1.EtcdMember, bool) {
	for _, m := range h.members(ctx) {
		p, err := env.Clientset.CoreV1().Pods(h.ns).Get(ctx, m.Name, metav1.GetOptions{})
		if err == nil && p.Spec.NodeName == node && m.DeletionTimestamp.IsZero() {
			return m, true
		}
	}
	return v1alpha1.EtcdMember{}, false
}

// spreadOut leaves h whole and with at most one member per node. A member
// replaced while one of three nodes is stopped has to share a node with
// another, and nothing moves it back when the node returns; stopping the
// shared node next takes two of three voters at once, which no three-member
// cluster survives by self-heal. While a node runs two members, the newer is
// deleted, as a user would, and its replacement, placed by the members'
// spreading preference, is awaited.
func (h *healHarness) spreadOut(ctx context.Context) {
	h.t.Helper()
	for attempt := 0; ; attempt++ {
		_, err := framework.WaitForClusterReady(ctx, h.c, h.ns, h.name, 5*time.Minute)
		h.g.Expect(err).NotTo(HaveOccurred(), "%s is whole", h.name)
		byNode := map[string][]v1alpha1.EtcdMember{}
		for _, m := range h.members(ctx) {
			p, err := env.Clientset.CoreV1().Pods(h.ns).Get(ctx, m.Name, metav1.GetOptions{})
			h.g.Expect(err).NotTo(HaveOccurred(), "the pod of %s", m.Name)
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], m)
		}
		var shared []v1alpha1.EtcdMember
		var node string
		for n, ms := range byNode {
			if len(ms) > 1 {
				shared, node = ms, n
			}
		}
		if shared == nil {
			return
		}
		h.g.Expect(attempt).To(BeNumerically("<", 3), "%s still has %v sharing node %s", h.name, names(shared), node)
		newest := shared[0]
		for _, m := range shared[1:] {
			if newest.CreationTimestamp.Before(&m.CreationTimestamp) {
				newest = m
			}
		}
		h.t.Logf("%s: deleting %s, which shares node %s with %v", h.name, newest.Name, node, names(shared))
		h.g.Expect(h.c.Delete(ctx, &newest)).To(Succeed())
		h.g.Expect(framework.WaitFor(ctx, 3*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
			err := h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: newest.Name}, &v1alpha1.EtcdMember{})
			return client.IgnoreNotFound(err) == nil && err != nil, nil
		})).To(Succeed(), "%s/%s leaves", h.name, newest.Name)
	}
}

// expectReplacedAfterNodeLoss waits until the victim has left, and the
// cluster is Ready with three voters, none on the lost node, each serving
// the sentinel.
func (h *healHarness) expectReplacedAfterNodeLoss(ctx context.Context, victim v1alpha1.EtcdMember, lost string) {
	h.t.Helper()
	h.g.Expect(framework.WaitFor(ctx, 5*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		err := h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: victim.Name}, &v1alpha1.EtcdMember{})
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	})).To(Succeed(), "%s/%s on the lost node should be replaced", h.name, victim.Name)
	cl, err := framework.WaitForClusterReady(ctx, h.c, h.ns, h.name, 5*time.Minute)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(cl.Status.Members).To(HaveLen(3))
	for _, m := range cl.Status.Members {
		h.g.Expect(m.Role).To(Equal(v1alpha1.MemberRoleVoter))
		h.g.Expect(m.ID).NotTo(Equal(victim.Status.MemberID))
		p, err := env.Clientset.CoreV1().Pods(h.ns).Get(ctx, m.Name, metav1.GetOptions{})
		h.g.Expect(err).NotTo(HaveOccurred())
		h.g.Expect(p.Spec.NodeName).NotTo(Equal(lost), "%s runs on a surviving node", m.Name)
	}
	h.expectSentinelEverywhere(ctx)
	h.expectEvent(ctx, "NodeLost", victim.Name)
}

// expectNoTraceOf: once the node is back, nothing of the victim is left:
// no EtcdMember, Pod or claim, and etcd does not list it.
func (h *healHarness) expectNoTraceOf(ctx context.Context, victim v1alpha1.EtcdMember) {
	h.t.Helper()
	h.g.Expect(framework.WaitFor(ctx, 3*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		if _, err := env.Clientset.CoreV1().Pods(h.ns).Get(ctx, victim.Name, metav1.GetOptions{}); err == nil {
			return false, nil
		}
		_, err := env.Clientset.CoreV1().PersistentVolumeClaims(h.ns).Get(ctx, v1alpha1.DataVolumeClaimName(victim.Name), metav1.GetOptions{})
		return err != nil, nil
	})).To(Succeed(), "the old Pod and claim of %s go once the node is back", victim.Name)
	eps, err := env.MemberEndpoints(ctx, h.ns, h.name)
	h.g.Expect(err).NotTo(HaveOccurred())
	view, err := framework.MemberListAt(ctx, eps[0])
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(view.Members).To(HaveLen(3))
	for _, m := range view.Members {
		h.g.Expect(m).NotTo(HavePrefix(victim.Name+" "), "etcd does not list %s", victim.Name)
	}
}

// TestNodeLoss stops the node of a PVC cluster's seed, of another PVC
// cluster's non-seed member, and of a Memory cluster's member, all at once:
// each is replaced on a surviving node, every member serves the sentinel
// written before, and when the node comes back its old Pods do not rejoin.
func TestNodeLoss(t *testing.T) {
	framework.Serial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	env.Nodes(t, e2eNodes)
	seedCase := newHealCluster(ctx, t, "nodeloss-seed", withNodeLossBound(nodeLossBound))
	other := newHealCluster(ctx, t, "nodeloss-joiner", withNodeLossBound(nodeLossBound))
	memory := newHealCluster(ctx, t, "nodeloss-mem", func(c *v1alpha1.EtcdCluster) {
		withNodeLossBound(nodeLossBound)(c)
		c.Spec.Storage = v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: ptr.To(resource.MustParse("256Mi"))}
	})
	seed := seedCase.pick(ctx, true)
	pod, err := env.Clientset.CoreV1().Pods(seedCase.ns).Get(ctx, seed.Name, metav1.GetOptions{})
	seedCase.g.Expect(err).NotTo(HaveOccurred())
	lost := pod.Spec.NodeName

	// The other clusters' members on that node: for the joiner case one that
	// is not its cluster's seed is wanted; if its seed is there too, a second
	// round on another node covers it.
	rounds := []struct {
		node     string
		clusters []*healHarness
	}{{node: lost, clusters: []*healHarness{seedCase, memory}}}
	if m, ok := other.memberOn(ctx, lost); ok && !m.Spec.Bootstrap {
		rounds[0].clusters = append(rounds[0].clusters, other)
	} else {
		for _, n := range env.Nodes(t, e2eNodes) {
			if m, ok := other.memberOn(ctx, n.Name); ok && !m.Spec.Bootstrap && n.Name != lost {
				rounds = append(rounds, struct {
					node     string
					clusters []*healHarness
				}{node: n.Name, clusters: []*healHarness{other}})
				break
			}
		}
	}
	all := []*healHarness{seedCase, other, memory}
	for _, round := range rounds {
		// A node stop takes every cluster's members on it, not only the
		// round's victims: each cluster must be whole and hold at most one
		// member there.
		for _, h := range all {
			h.spreadOut(ctx)
		}
		victims := map[*healHarness]v1alpha1.EtcdMember{}
		for _, h := range round.clusters {
			m, ok := h.memberOn(ctx, round.node)
			h.g.Expect(ok).To(BeTrue(), "%s has a member on %s", h.name, round.node)
			h.expectHealthyVoter(ctx, m)
			victims[h] = m
		}
		t.Logf("stopping %s", round.node)
		began := time.Now()
		seedCase.g.Expect(env.StopNode(ctx, t, round.node)).To(Succeed())
		for h, v := range victims {
			h.expectReplacedAfterNodeLoss(ctx, v, round.node)
			t.Logf("%s: %s replaced after the loss of %s, Ready %s after the stop", h.name, v.Name, round.node, time.Since(began).Round(100*time.Millisecond))
		}
		seedCase.g.Expect(env.StartNode(ctx, round.node)).To(Succeed())
		for h, v := range victims {
			h.expectNoTraceOf(ctx, v)
			_, err := framework.WaitForClusterReady(ctx, h.c, h.ns, h.name, 2*time.Minute)
			h.g.Expect(err).NotTo(HaveOccurred())
		}
	}
	// A second round's node held members of every cluster, not only of its
	// victims': each ends whole, serving the sentinel.
	for _, h := range all {
		_, err := framework.WaitForClusterReady(ctx, h.c, h.ns, h.name, 5*time.Minute)
		h.g.Expect(err).NotTo(HaveOccurred(), "%s ends whole", h.name)
		h.expectSentinelEverywhere(ctx)
	}
}

// TestStuckScaleUpThenAFault: a scale-up that cannot schedule its member
// passes its deadline; a voter then loses its data and is replaced without
// any edit; backing the edit out is adopted and the cluster ends Ready.
func TestStuckScaleUpThenAFault(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	h := newHealCluster(ctx, t, "stuck", func(c *v1alpha1.EtcdCluster) { c.Spec.ProgressDeadlineSeconds = ptr.To[int32](20) })
	cl := &v1alpha1.EtcdCluster{}
	h.g.Expect(h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: h.name}, cl)).To(Succeed())
	patch := client.MergeFrom(cl.DeepCopy())
	cl.Spec.Replicas = ptr.To[int32](4)
	cl.Spec.NodeSelector = map[string]string{"etcd.quorumctl.io/no-such-node": "true"}
	h.g.Expect(h.c.Patch(ctx, cl, patch)).To(Succeed())
	h.g.Expect(framework.WaitFor(ctx, 3*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		cl := &v1alpha1.EtcdCluster{}
		if err := h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: h.name}, cl); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(cl.Status.Conditions, v1alpha1.StalledCondition), nil
	})).To(Succeed(), "the stuck scale-up is reported as stalled")

	// Not the fourth member: it is not scheduled, and pick takes only a
	// voter that etcd says is healthy, whose Pod runs.
	victim := h.pick(ctx, false)
	h.recover3(ctx, victim, "DataDirLost", func() error {
		return env.LoseDataDir(ctx, h.ns, victim.Name)
	})

	t.Log("backing the edit out")
	h.g.Expect(h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: h.name}, cl)).To(Succeed())
	patch = client.MergeFrom(cl.DeepCopy())
	cl.Spec.Replicas = ptr.To[int32](3)
	cl.Spec.NodeSelector = nil
	h.g.Expect(h.c.Patch(ctx, cl, patch)).To(Succeed())
	ready, err := framework.WaitForClusterReady(ctx, h.c, h.ns, h.name, 5*time.Minute)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(ready.Status.Members).To(HaveLen(3))
	h.g.Expect(meta.IsStatusConditionTrue(ready.Status.Conditions, v1alpha1.StalledCondition)).To(BeFalse())
	h.expectSentinelEverywhere(ctx)
}

// recover3 is recover for a cluster that has a fourth member that cannot
// start: the victim is replaced, and three voters serve the sentinel while
// the stuck learner stays where it is.
func (h *healHarness) recover3(ctx context.Context, victim v1alpha1.EtcdMember, reason string, fault func() error) {
	h.t.Helper()
	h.expectHealthyVoter(ctx, victim)
	h.g.Expect(fault()).To(Succeed())
	h.g.Expect(framework.WaitFor(ctx, 5*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		err := h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: victim.Name}, &v1alpha1.EtcdMember{})
		if client.IgnoreNotFound(err) != nil || err == nil {
			return false, nil
		}
		cl := &v1alpha1.EtcdCluster{}
		if err := h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: h.name}, cl); err != nil {
			return false, err
		}
		ready := 0
		for _, m := range cl.Status.Members {
			if m.Ready && m.Role == v1alpha1.MemberRoleVoter {
				ready++
			}
		}
		return ready == 3, nil
	})).To(Succeed(), "%s replaced and three voters ready, without a spec edit", victim.Name)
	h.expectEvent(ctx, reason, victim.Name)
}

// TestDegradedEditShedsTheBrokenMember: on a 5-member cluster one member's
// node is stopped and the node-loss bound is long, so the member stays
// broken; replicas: 3 removes it among the two, and the cluster is Ready
// with three healthy voters.
func TestDegradedEditShedsTheBrokenMember(t *testing.T) {
	framework.Serial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	nodes := env.Nodes(t, e2eNodes)
	h := newHealCluster(ctx, t, "degraded", func(c *v1alpha1.EtcdCluster) {
		c.Spec.Replicas = ptr.To[int32](5)
		withNodeLossBound(3600)(c)
	})
	// The node with the fewest members (5 over 3 nodes: one has one).
	count := map[string][]string{}
	for _, m := range h.members(ctx) {
		p, err := env.Clientset.CoreV1().Pods(h.ns).Get(ctx, m.Name, metav1.GetOptions{})
		h.g.Expect(err).NotTo(HaveOccurred())
		count[p.Spec.NodeName] = append(count[p.Spec.NodeName], m.Name)
	}
	target := nodes[0].Name
	for _, n := range nodes {
		if len(count[n.Name]) < len(count[target]) {
			target = n.Name
		}
	}
	broken := count[target]
	h.g.Expect(broken).NotTo(BeEmpty())
	t.Logf("stopping %s, which runs %v", target, broken)
	h.g.Expect(env.StopNode(ctx, t, target)).To(Succeed())
	h.g.Expect(env.WaitForNodeReady(ctx, target, false, 2*time.Minute)).To(Succeed())

	// A resources edit while the member is broken is adopted at once: the
	// target names it, and observedGeneration says so truthfully.
	want := resource.MustParse("72Mi")
	cl := &v1alpha1.EtcdCluster{}
	h.g.Expect(h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: h.name}, cl)).To(Succeed())
	patch := client.MergeFrom(cl.DeepCopy())
	cl.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: want}}
	h.g.Expect(h.c.Patch(ctx, cl, patch)).To(Succeed())
	h.g.Eventually(func(g Gomega) {
		got := &v1alpha1.EtcdCluster{}
		g.Expect(h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: h.name}, got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(got.Status.Observed).NotTo(BeNil())
		g.Expect(got.Status.Observed.Resources).NotTo(BeNil())
		q := got.Status.Observed.Resources.Requests[corev1.ResourceMemory]
		g.Expect(q.Cmp(want)).To(Equal(0), "the target carries the new request")
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

	h.g.Expect(h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: h.name}, cl)).To(Succeed())
	patch = client.MergeFrom(cl.DeepCopy())
	cl.Spec.Replicas = ptr.To[int32](3)
	h.g.Expect(h.c.Patch(ctx, cl, patch)).To(Succeed())
	ready, err := framework.WaitForClusterReady(ctx, h.c, h.ns, h.name, 10*time.Minute)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(ready.Status.ObservedGeneration).To(Equal(ready.Generation))
	var kept []string
	for _, m := range ready.Status.Members {
		kept = append(kept, m.Name)
		h.g.Expect(m.Ready).To(BeTrue())
		h.g.Expect(m.Role).To(Equal(v1alpha1.MemberRoleVoter))
	}
	h.g.Expect(kept).To(HaveLen(3))
	for _, b := range broken {
		h.g.Expect(kept).NotTo(ContainElement(b), "the broken member %s is among those removed", b)
	}
	for _, name := range kept {
		p, err := env.Clientset.CoreV1().Pods(h.ns).Get(ctx, name, metav1.GetOptions{})
		h.g.Expect(err).NotTo(HaveOccurred())
		q := p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]
		h.g.Expect(q.Cmp(want)).To(Equal(0), "%s was rolled to the new request", name)
	}
	h.expectSentinelEverywhere(ctx)
	h.g.Expect(env.StartNode(ctx, target)).To(Succeed())
}

// TestDrainEachNodeUnderAWriter drains every node in turn while a writer
// runs: the cluster stays Available throughout, and its members end spread
// over the nodes again.
func TestDrainEachNodeUnderAWriter(t *testing.T) {
	framework.Serial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	nodes := env.Nodes(t, e2eNodes)
	h := newHealCluster(ctx, t, "drain-all", nil)
	svc, err := env.ClientServiceEndpoint(ctx, h.ns, h.name)
	h.g.Expect(err).NotTo(HaveOccurred())
	w, err := linearizability.Start(linearizability.Config{Endpoints: []string{svc}, ClientsPerEndpoint: 2})
	h.g.Expect(err).NotTo(HaveOccurred())

	var mu sync.Mutex
	var unavailable []string
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watchCtx.Err() == nil {
			cl := &v1alpha1.EtcdCluster{}
			if err := h.c.Get(watchCtx, types.NamespacedName{Namespace: h.ns, Name: h.name}, cl); err == nil {
				if c := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.AvailableCondition); c != nil && c.Status != metav1.ConditionTrue {
					mu.Lock()
					unavailable = append(unavailable, fmt.Sprintf("%s: %s", c.Reason, c.Message))
					mu.Unlock()
				}
			}
			select {
			case <-watchCtx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	for _, n := range nodes {
		t.Logf("draining %s", n.Name)
		r := env.Drain(ctx, t, n.Name)
		h.g.Expect(r.Err).NotTo(HaveOccurred(), "%s%s", r.Stdout, r.Stderr)
		h.g.Expect(env.Kubectl(ctx, "uncordon", n.Name).Err).NotTo(HaveOccurred())
		_, err := framework.WaitForClusterReady(ctx, h.c, h.ns, h.name, 5*time.Minute)
		h.g.Expect(err).NotTo(HaveOccurred())
	}
	stopWatch()
	<-watched
	rep, err := w.Stop().Check(linearizability.CheckOptions{VisualizationPath: t.TempDir() + "/history.html"})
	h.g.Expect(err).NotTo(HaveOccurred())
	t.Logf("writer: %s", rep)
	h.g.Expect(rep.Err()).NotTo(HaveOccurred(), "the history is linearizable")
	mu.Lock()
	h.g.Expect(unavailable).To(BeEmpty(), "the cluster stayed Available throughout")
	mu.Unlock()

	onNode := map[string]int{}
	for _, m := range h.members(ctx) {
		p, err := env.Clientset.CoreV1().Pods(h.ns).Get(ctx, m.Name, metav1.GetOptions{})
		h.g.Expect(err).NotTo(HaveOccurred())
		onNode[p.Spec.NodeName]++
	}
	h.g.Expect(onNode).To(HaveLen(3), "the members end one per node: %v", onNode)
	h.expectSentinelEverywhere(ctx)
}

// TestUserDeleteReplacesAMember: kubectl delete etcdmember on a healthy
// voter replaces it, and a quorum watch never finds the voters following one
// leader below a quorum.
func TestUserDeleteReplacesAMember(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := newHealCluster(ctx, t, "user-delete", nil)
	victim := h.pick(ctx, false)

	quorum := env.WatchQuorum(ctx, h.ns, h.name)
	defer func() { _ = quorum.Stop() }()
	r := env.Kubectl(ctx, "delete", "etcdmember", "-n", h.ns, victim.Name, "--wait=false")
	h.g.Expect(r.Err).NotTo(HaveOccurred(), r.Stderr)
	h.g.Expect(framework.WaitFor(ctx, 3*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		err := h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: victim.Name}, &v1alpha1.EtcdMember{})
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	})).To(Succeed())
	cl, err := framework.WaitForClusterReady(ctx, h.c, h.ns, h.name, 5*time.Minute)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(quorum.Stop()).To(Succeed(), "quorum held throughout")
	t.Logf("quorum watch: %s", quorum)
	h.g.Expect(cl.Status.Members).To(HaveLen(3))
	for _, m := range cl.Status.Members {
		h.g.Expect(m.Name).NotTo(Equal(victim.Name))
	}
	h.expectSentinelEverywhere(ctx)
}

// TestShortDeadlineStallsThenReady: a 3-member cluster created with a
// progress deadline it cannot meet reports Stalled, and still ends Ready.
func TestShortDeadlineStallsThenReady(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g := NewWithT(t)
	g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "short-deadline")
	cl := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "short", Namespace: ns},
		Spec: v1alpha1.EtcdClusterSpec{
			Replicas:                ptr.To[int32](3),
			ProgressDeadlineSeconds: ptr.To[int32](5),
			MemberTemplate:          v1alpha1.MemberTemplate{Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("256Mi"))}},
		},
	}
	g.Expect(c.Create(ctx, cl)).To(Succeed())
	stalled := false
	g.Expect(framework.WaitFor(ctx, 5*time.Minute, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		got := &v1alpha1.EtcdCluster{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "short"}, got); err != nil {
			return false, err
		}
		if meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.StalledCondition) {
			stalled = true
		}
		return stalled && meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ReadyCondition), nil
	})).To(Succeed(), "stalled at some point, then Ready")
	ready, err := framework.WaitForClusterReady(ctx, c, ns, "short", time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ready.Status.Members).To(HaveLen(3))
	g.Expect(meta.IsStatusConditionTrue(ready.Status.Conditions, v1alpha1.StalledCondition)).To(BeFalse(), "and the stall clears by itself")
}
