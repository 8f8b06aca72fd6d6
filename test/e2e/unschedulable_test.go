//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// unschedulableRolloutReason is the reason the Stalled and Progressing
// conditions give for a rollout stopped by a member that cannot schedule.
// It is the reason of every failed rollout step today; a reason of its own
// for this case would be changed here alone.
const unschedulableRolloutReason = v1alpha1.RolloutFailedReason

// noNodeLabel is a node label no node of the local cluster has.
const noNodeLabel = "etcd.quorumctl.io/no-such-node"

// expectNoNodeHas: the selector really matches nothing, or the tests below
// would prove nothing about an unschedulable member.
func expectNoNodeHas(ctx context.Context, g *WithT, label string) {
	nodes, err := env.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodes.Items).NotTo(BeEmpty())
	for _, n := range nodes.Items {
		g.Expect(n.Labels).NotTo(HaveKey(label), "node %s", n.Name)
	}
}

// podUIDs maps each member to the UID of its Pod.
func (h *healHarness) podUIDs(ctx context.Context) map[string]types.UID {
	h.t.Helper()
	pods, err := env.MemberPods(ctx, h.ns, h.name)
	h.g.Expect(err).NotTo(HaveOccurred())
	out := map[string]types.UID{}
	for name, p := range pods {
		out[name] = p.UID
	}
	return out
}

func (h *healHarness) setNodeSelector(ctx context.Context, sel map[string]string, replicas *int32) {
	h.t.Helper()
	r := &rollCluster{t: h.t, g: h.g, c: h.c, ns: h.ns, name: h.name}
	h.g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) {
		c.Spec.NodeSelector = sel
		if replicas != nil {
			c.Spec.Replicas = replicas
		}
	})).To(Succeed())
}

// expectSentinelOn reads the sentinel from each endpoint, linearizably.
func (h *healHarness) expectSentinelOn(ctx context.Context, eps []string) {
	h.t.Helper()
	for _, ep := range eps {
		cli, err := framework.EtcdClient(ep)
		h.g.Expect(err).NotTo(HaveOccurred())
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := cli.Get(rctx, sentinelKey)
		cancel()
		cli.Close()
		h.g.Expect(err).NotTo(HaveOccurred(), "read from %s", ep)
		h.g.Expect(resp.Kvs).To(HaveLen(1), "%s has the sentinel", ep)
		h.g.Expect(string(resp.Kvs[0].Value)).To(Equal(sentinelValue))
	}
}

// TestBackOutBadNodeSelectorKeepReplicas: a scale from 3 to 4 together with
// a nodeSelector no node matches leaves the fourth member unschedulable;
// removing the nodeSelector while keeping replicas: 4, as docs/operations.md
// says to back such an edit out, ends Ready with four started voters.
func TestBackOutBadNodeSelectorKeepReplicas(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	h := newHealCluster(ctx, t, "backout-keep", nil)
	expectNoNodeHas(ctx, h.g, noNodeLabel)
	before := h.podUIDs(ctx)
	h.g.Expect(before).To(HaveLen(3))

	h.setNodeSelector(ctx, map[string]string{noNodeLabel: "true"}, ptr.To[int32](4))
	var stuck string
	h.g.Expect(framework.WaitFor(ctx, 3*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		for _, m := range h.members(ctx) {
			if _, old := before[m.Name]; old {
				continue
			}
			p, err := env.Clientset.CoreV1().Pods(h.ns).Get(ctx, m.Name, metav1.GetOptions{})
			if err == nil && p.Spec.NodeName == "" && unschedulable(p) {
				stuck = m.Name
				return true, nil
			}
		}
		return false, nil
	})).To(Succeed(), "the fourth member is added and cannot schedule")
	t.Logf("%s is unschedulable; removing the nodeSelector and keeping replicas: 4", stuck)

	h.setNodeSelector(ctx, nil, nil)
	cl, err := framework.WaitForClusterReady(ctx, h.c, h.ns, h.name, 8*time.Minute)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(*cl.Spec.Replicas).To(BeEquivalentTo(4), "replicas were kept")
	h.g.Expect(cl.Status.Members).To(HaveLen(4))
	for _, m := range cl.Status.Members {
		h.g.Expect(m.Role).To(Equal(v1alpha1.MemberRoleVoter), "%s is a voter", m.Name)
		h.g.Expect(m.Ready).To(BeTrue(), "%s is ready", m.Name)
	}
	for _, m := range h.expectOnCurrentTemplate(ctx) {
		p, err := env.Clientset.CoreV1().Pods(h.ns).Get(ctx, m.Name, metav1.GetOptions{})
		h.g.Expect(err).NotTo(HaveOccurred())
		h.g.Expect(p.Spec.NodeSelector).NotTo(HaveKey(noNodeLabel), "%s runs without the bad nodeSelector", m.Name)
		h.g.Expect(framework.PodReady(p)).To(BeTrue(), "%s is ready", m.Name)
	}

	// etcd's own account, not the status: four members, each started (a
	// member added but never started has no name) and none a learner.
	eps, err := env.MemberEndpoints(ctx, h.ns, h.name)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(eps).To(HaveLen(4))
	cli, err := framework.EtcdClient(eps[0])
	h.g.Expect(err).NotTo(HaveOccurred())
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	list, err := cli.MemberList(lctx)
	lcancel()
	cli.Close()
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(list.Members).To(HaveLen(4), "etcd lists four members")
	for _, m := range list.Members {
		h.g.Expect(m.Name).NotTo(BeEmpty(), "member %x has started", m.ID)
		h.g.Expect(m.IsLearner).To(BeFalse(), "%s is a voter", m.Name)
		h.g.Expect(m.ClientURLs).NotTo(BeEmpty(), "%s serves clients", m.Name)
	}
	// Every member agrees, each asked on its own endpoint.
	first, err := framework.MemberListAt(ctx, eps[0])
	h.g.Expect(err).NotTo(HaveOccurred())
	for _, ep := range eps[1:] {
		view, err := framework.MemberListAt(ctx, ep)
		h.g.Expect(err).NotTo(HaveOccurred())
		h.g.Expect(view).To(Equal(first), "%s and %s see the same membership", ep, eps[0])
	}
	h.expectSentinelOn(ctx, eps)
}

// expectNodeBoundVolumes: every member's data volume can only be used on
// one node, which is what makes a scheduling change unmeetable for it.
func (h *healHarness) expectNodeBoundVolumes(ctx context.Context) {
	h.t.Helper()
	for _, m := range h.members(ctx) {
		pvc, err := env.Clientset.CoreV1().PersistentVolumeClaims(h.ns).Get(ctx, v1alpha1.DataVolumeClaimName(m.Name), metav1.GetOptions{})
		h.g.Expect(err).NotTo(HaveOccurred())
		h.g.Expect(pvc.Spec.VolumeName).NotTo(BeEmpty(), "the claim of %s is bound", m.Name)
		pv, err := env.Clientset.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		h.g.Expect(err).NotTo(HaveOccurred())
		h.g.Expect(pv.Spec.NodeAffinity).NotTo(BeNil(), "the volume of %s is node-bound", m.Name)
		h.g.Expect(pv.Spec.NodeAffinity.Required).NotTo(BeNil(), "the volume of %s is node-bound", m.Name)
	}
}

// affected sorts the cluster's members into those still on the Pod they had
// before (and ready) and the others.
func (h *healHarness) affected(ctx context.Context, before map[string]types.UID) (untouched, touched []string) {
	h.t.Helper()
	pods, err := env.MemberPods(ctx, h.ns, h.name)
	h.g.Expect(err).NotTo(HaveOccurred())
	live := map[string]bool{}
	for _, m := range h.members(ctx) {
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		live[m.Name] = true
		p := pods[m.Name]
		if p != nil && p.UID == before[m.Name] && p.DeletionTimestamp == nil && framework.PodReady(p) {
			untouched = append(untouched, m.Name)
		} else {
			touched = append(touched, m.Name)
		}
	}
	// An original member gone or being deleted was touched too.
	for name := range before {
		if !live[name] {
			touched = append(touched, name)
		}
	}
	return untouched, touched
}

// TestUnschedulableRolloutStopsAndReverts: on members whose volumes are
// bound to their nodes, a nodeSelector no node matches cannot be met by
// any member, restarted in place or replaced. The rollout stops after one
// member with a named reason, the others keep their Pods, and setting the
// nodeSelector back heals the cluster without touching them.
func TestUnschedulableRolloutStopsAndReverts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	h := newHealCluster(ctx, t, "unsched-roll", nil)
	h.expectNodeBoundVolumes(ctx)
	expectNoNodeHas(ctx, h.g, noNodeLabel)
	before := h.podUIDs(ctx)
	h.g.Expect(before).To(HaveLen(3))

	h.setNodeSelector(ctx, map[string]string{noNodeLabel: "true"}, nil)
	var stalled metav1.Condition
	h.g.Expect(framework.WaitFor(ctx, 10*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		cl := &v1alpha1.EtcdCluster{}
		if err := h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: h.name}, cl); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.StalledCondition)
		if c != nil && c.Status == metav1.ConditionTrue && c.Reason == unschedulableRolloutReason && c.ObservedGeneration == cl.Generation {
			stalled = *c
			return true, nil
		}
		return false, nil
	})).To(Succeed(), "the rollout stops with Stalled=True/%s", unschedulableRolloutReason)
	t.Logf("stalled: %s", stalled.Message)

	cl := h.cluster(ctx)
	progressing := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ProgressingCondition)
	h.g.Expect(progressing).NotTo(BeNil())
	h.g.Expect(progressing.Status).To(Equal(metav1.ConditionFalse), "the rollout is not progressing")
	h.g.Expect(progressing.Reason).To(Equal(unschedulableRolloutReason))
	h.g.Expect(meta.IsStatusConditionTrue(cl.Status.Conditions, v1alpha1.AvailableCondition)).To(BeTrue(), "the cluster keeps serving")

	untouched, touched := h.affected(ctx, before)
	h.g.Expect(touched).To(HaveLen(1), "the rollout stopped after one member (untouched: %v)", untouched)
	// A replacement added for a member leaves all the originals on their
	// Pods; a restart in place leaves all but one.
	h.g.Expect(len(untouched)).To(BeNumerically(">=", len(before)-1), "every other member keeps its Pod: %v", untouched)
	stuck := touched[0]
	_, original := before[stuck]
	p, err := env.Clientset.CoreV1().Pods(h.ns).Get(ctx, stuck, metav1.GetOptions{})
	h.g.Expect(err).NotTo(HaveOccurred(), "the member touched, %s, has a Pod", stuck)
	h.g.Expect(p.Spec.NodeName == "" && unschedulable(p)).To(BeTrue(), "the member touched, %s, is stuck for want of a node", stuck)
	// The member named is the one touched, or, if it is a replacement, the
	// original it stands for.
	named := []string{stuck}
	if !original {
		for name := range before {
			named = append(named, name)
		}
	}
	mentioned := false
	for _, n := range named {
		mentioned = mentioned || strings.Contains(stalled.Message, n)
	}
	h.g.Expect(mentioned).To(BeTrue(), "the reason names one of %v: %q", named, stalled.Message)

	// A stopped rollout stays stopped: no other member is touched while
	// it is watched.
	h.g.Consistently(func(g Gomega) {
		u, tt := h.affected(ctx, before)
		g.Expect(u).To(ConsistOf(untouched))
		g.Expect(tt).To(ConsistOf(touched))
	}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())

	t.Log("setting the nodeSelector back")
	h.setNodeSelector(ctx, nil, nil)
	ready, err := framework.WaitForClusterReady(ctx, h.c, h.ns, h.name, 8*time.Minute)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(ready.Status.Members).To(HaveLen(3))
	h.g.Expect(ready.Status.UpdatedMembers).To(BeEquivalentTo(3), "every member is on the current template")
	h.g.Expect(meta.IsStatusConditionTrue(ready.Status.Conditions, v1alpha1.StalledCondition)).To(BeFalse())
	h.expectOnCurrentTemplate(ctx)
	// Setting it back restarts none of the members the rollout had not
	// touched; only a replacement, once finished, may retire the one it
	// stood for.
	after := h.podUIDs(ctx)
	gone := 0
	for _, name := range untouched {
		uid, ok := after[name]
		if !ok {
			gone++
			continue
		}
		h.g.Expect(uid).To(Equal(before[name]), "%s was never restarted", name)
	}
	if original {
		h.g.Expect(gone).To(BeZero(), "no member the rollout had not touched was removed")
	} else {
		h.g.Expect(gone).To(BeNumerically("<=", 1), "at most the member replaced was retired")
	}
	h.expectSentinelEverywhere(ctx)
}
