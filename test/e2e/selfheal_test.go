//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

const (
	sentinelKey   = "sentinel"
	sentinelValue = "written-before-the-fault"
)

// healHarness holds one cluster under fault injection.
type healHarness struct {
	t    *testing.T
	g    *WithT
	c    client.Client
	ns   string
	name string
}

func newHealCluster(ctx context.Context, t *testing.T, prefix string, mutate func(*v1alpha1.EtcdCluster)) *healHarness {
	g := NewWithT(t)
	g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	h := &healHarness{t: t, g: g, c: c, ns: env.CreateNamespace(t, prefix), name: prefix}
	cl := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: h.name, Namespace: h.ns},
		Spec: v1alpha1.EtcdClusterSpec{
			Replicas:       ptr.To[int32](3),
			MemberTemplate: v1alpha1.MemberTemplate{Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("256Mi"))}},
		},
	}
	if mutate != nil {
		mutate(cl)
	}
	g.Expect(c.Create(ctx, cl)).To(Succeed())
	_, err = framework.WaitForClusterReady(ctx, c, h.ns, h.name, 5*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	svc, err := env.ClientServiceEndpoint(ctx, h.ns, h.name)
	g.Expect(err).NotTo(HaveOccurred())
	// Over TLS when the cluster starts with it, with a certificate the
	// operator issues on request.
	cli, err := framework.ClusterClient(ctx, c, h.ns, h.name, svc)
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	_, err = cli.Put(ctx, sentinelKey, sentinelValue)
	g.Expect(err).NotTo(HaveOccurred())
	return h
}

func (h *healHarness) members(ctx context.Context) []v1alpha1.EtcdMember {
	var list v1alpha1.EtcdMemberList
	h.g.Expect(h.c.List(ctx, &list, client.InNamespace(h.ns), client.MatchingLabels{v1alpha1.ClusterLabel: h.name})).To(Succeed())
	return list.Items
}

// pick returns the first member with the given bootstrap flag, and not in
// skip, that etcd counts as a healthy voter (framework.HealthyVoter). Picked
// from the API's list alone, a victim could be a member whose Pod never ran
// (a stuck scale-up's), and the fault meant for a voter would hit nothing.
func (h *healHarness) pick(ctx context.Context, seed bool, skip ...string) v1alpha1.EtcdMember {
	h.t.Helper()
	var m v1alpha1.EtcdMember
	var why error
	err := framework.WaitFor(ctx, time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		var list v1alpha1.EtcdMemberList
		if err := h.c.List(ctx, &list, client.InNamespace(h.ns), client.MatchingLabels{v1alpha1.ClusterLabel: h.name}); err != nil {
			return false, err
		}
		m, why = env.PickHealthyVoter(ctx, list.Items, func(m *v1alpha1.EtcdMember) bool {
			return m.Spec.Bootstrap == seed && !contains(skip, m.Name)
		})
		return why == nil, nil
	})
	h.g.Expect(err).NotTo(HaveOccurred(), "a member with bootstrap=%t, not one of %v, that is a healthy voter: %v", seed, skip, why)
	return m
}

// expectHealthyVoter asserts, just before a fault, that its victim is still
// a healthy voter.
func (h *healHarness) expectHealthyVoter(ctx context.Context, victim v1alpha1.EtcdMember) {
	h.t.Helper()
	h.g.Expect(env.HealthyVoter(ctx, &victim)).To(Succeed(), "the victim %s is a healthy voter before the fault", victim.Name)
}

// recover injects a fault into the victim and asserts the whole recovery:
// the victim is replaced under a new member ID, the cluster is Ready again
// with 3 members, and every member serves the sentinel. While it waits it
// probes the victim directly: any read it answers without the sentinel fails
// the test at once, since that is the wrong-data window the design forbids.
func (h *healHarness) recover(ctx context.Context, victim v1alpha1.EtcdMember, reason string, fault func() error) time.Duration {
	h.t.Helper()
	pod, err := env.Clientset.CoreV1().Pods(h.ns).Get(ctx, victim.Name, metav1.GetOptions{})
	h.g.Expect(err).NotTo(HaveOccurred())
	probeCtx, stopProbe := context.WithCancel(ctx)
	endpoint := fmt.Sprintf("http://%s:2379", pod.Status.PodIP)
	wrong := startProbe(probeCtx, endpoint, func() (*clientv3.Client, error) {
		return framework.ClusterClient(ctx, h.c, h.ns, h.name, endpoint)
	})
	h.expectHealthyVoter(ctx, victim)
	start := time.Now()
	h.g.Expect(fault()).To(Succeed())

	h.g.Expect(framework.WaitFor(ctx, 3*time.Minute, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		err := h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: victim.Name}, &v1alpha1.EtcdMember{})
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	})).To(Succeed(), "member %s should be replaced", victim.Name)
	cl, err := framework.WaitForClusterReady(ctx, h.c, h.ns, h.name, 3*time.Minute)
	h.g.Expect(err).NotTo(HaveOccurred())
	took := time.Since(start)
	stopProbe()
	h.g.Expect(<-wrong).To(BeEmpty(), "the faulty member served a read without the sentinel")

	h.g.Expect(cl.Status.Members).To(HaveLen(3))
	for _, m := range cl.Status.Members {
		h.g.Expect(m.ID).NotTo(Equal(victim.Status.MemberID), "the replacement must have a new member ID")
		h.g.Expect(m.Name).NotTo(Equal(victim.Name))
	}
	h.expectSentinelEverywhere(ctx)
	h.expectEvent(ctx, reason, victim.Name)
	h.t.Logf("%s: replaced %s in %s", reason, victim.Name, took.Round(100*time.Millisecond))
	return took
}

// expectSentinelEverywhere reads the sentinel from every member directly,
// linearizably and from the member's own store, never through the Service.
func (h *healHarness) expectSentinelEverywhere(ctx context.Context) {
	h.t.Helper()
	eps, err := env.MemberEndpoints(ctx, h.ns, h.name)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(eps).To(HaveLen(3))
	for _, ep := range eps {
		cli, err := framework.ClusterClient(ctx, h.c, h.ns, h.name, ep)
		h.g.Expect(err).NotTo(HaveOccurred())
		for _, opts := range [][]clientv3.OpOption{nil, {clientv3.WithSerializable()}} {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := cli.Get(rctx, sentinelKey, opts...)
			cancel()
			h.g.Expect(err).NotTo(HaveOccurred(), "read from %s", ep)
			h.g.Expect(resp.Kvs).To(HaveLen(1), "%s lacks the sentinel", ep)
			h.g.Expect(string(resp.Kvs[0].Value)).To(Equal(sentinelValue))
		}
		cli.Close()
	}
}

func (h *healHarness) expectEvent(ctx context.Context, reason, member string) {
	h.t.Helper()
	h.g.Eventually(func() bool {
		evs, err := env.Clientset.EventsV1().Events(h.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == reason && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, member) {
				return true
			}
		}
		return false
	}, 30*time.Second, 500*time.Millisecond).Should(BeTrue(), "a %s Event naming %s", reason, member)
}

// startProbe reads the sentinel from one endpoint every 100ms until ctx
// ends, and reports the first successful read that lacked it.
func startProbe(ctx context.Context, endpoint string, dial func() (*clientv3.Client, error)) <-chan string {
	out := make(chan string, 1)
	go func() {
		var once sync.Once
		report := func(s string) { once.Do(func() { out <- s }) }
		defer report("")
		cli, err := dial()
		if err != nil {
			return
		}
		defer cli.Close()
		for ctx.Err() == nil {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			resp, err := cli.Get(rctx, sentinelKey, clientv3.WithSerializable())
			cancel()
			if err == nil && (len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != sentinelValue) {
				report(fmt.Sprintf("%s answered at revision %d with %d keys", endpoint, resp.Header.Revision, len(resp.Kvs)))
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return out
}

// TestSelfHealPersistentMembers covers, one after another on the same
// PVC-backed cluster, the seed's data dir wiped and etcd restarted in place in
// the same Pod (the start that, told --initial-cluster-state=new, would quietly
// form a fresh one-member cluster) and its relatives: a wiped joiner, a wiped
// member whose Pod is re-created, corrupt data, and a Pod merely deleted.
// Two members breaking at once needs the operator stopped, so it is a serial
// test of its own, TestTwoMembersBreakAtOnce, and this one runs in parallel.
func TestSelfHealPersistentMembers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	h := newHealCluster(ctx, t, "heal", nil)

	t.Log("the seed's data dir is wiped and etcd restarts in place, in the same Pod")
	seed := h.pick(ctx, true)
	h.recover(ctx, seed, "DataDirLost", func() error {
		return env.LoseDataDir(ctx, h.ns, seed.Name)
	})

	t.Log("a non-seed's data dir is wiped and etcd restarts in place")
	joiner := h.pick(ctx, false)
	h.recover(ctx, joiner, "DataDirLost", func() error {
		return env.LoseDataDir(ctx, h.ns, joiner.Name)
	})

	t.Log("a member's data dir is wiped and its Pod re-created")
	recreated := h.pick(ctx, false)
	h.recover(ctx, recreated, "DataDirLost", func() error {
		return env.LoseDataDirAndPod(ctx, h.ns, recreated.Name)
	})

	t.Log("a member's WAL is corrupted and etcd restarts")
	corrupt := h.pick(ctx, false)
	h.recover(ctx, corrupt, "DataCorrupt", func() error {
		if err := env.CorruptDataDir(ctx, h.ns, corrupt.Name); err != nil {
			return err
		}
		return env.RestartEtcd(ctx, h.ns, corrupt.Name)
	})

	t.Log("a member whose Pod is merely deleted comes back with its member ID")
	kept := h.pick(ctx, false)
	h.g.Expect(env.Clientset.CoreV1().Pods(h.ns).Delete(ctx, kept.Name, metav1.DeleteOptions{})).To(Succeed())
	h.g.Expect(framework.WaitFor(ctx, 3*time.Minute, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		p, err := env.Clientset.CoreV1().Pods(h.ns).Get(ctx, kept.Name, metav1.GetOptions{})
		return err == nil && p.UID != "" && framework.PodReady(p) && p.CreationTimestamp.After(time.Now().Add(-3*time.Minute)) &&
			p.UID != types.UID(kept.Status.PodUID), nil
	})).To(Succeed())
	cl, err := framework.WaitForClusterReady(ctx, h.c, h.ns, h.name, 3*time.Minute)
	h.g.Expect(err).NotTo(HaveOccurred())
	ids := map[string]string{}
	for _, m := range cl.Status.Members {
		ids[m.Name] = m.ID
	}
	h.g.Expect(ids).To(HaveKeyWithValue(kept.Name, kept.Status.MemberID), "same member, same ID, data from its PVC")
	h.expectSentinelEverywhere(ctx)
}

// TestTwoMembersBreakAtOnce: two of three members lose their data while the
// operator is stopped, so that it finds both broken at once when it starts.
// Nothing may be deleted below quorum: the condition says the quorum gate
// holds, and every member stays.
func TestTwoMembersBreakAtOnce(t *testing.T) {
	framework.Serial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := newHealCluster(ctx, t, "heal-two", nil)

	t.Log("two of three members break at once: nothing is deleted below quorum")
	before := h.members(ctx)
	first := h.pick(ctx, false)
	second := h.pick(ctx, false, first.Name)
	// The operator reacts to one failure within a second, so to have it find
	// two broken members at once it is stopped while both break, and started
	// again afterwards: an operator restart in the middle of an outage.
	replicas, err := env.OperatorReplicas(ctx)
	h.g.Expect(err).NotTo(HaveOccurred())
	// Both while the cluster is whole, before anything is stopped.
	h.expectHealthyVoter(ctx, first)
	h.expectHealthyVoter(ctx, second)
	h.g.Expect(env.ScaleOperator(ctx, t, 0)).To(Succeed())
	defer func() { h.g.Expect(env.ScaleOperator(context.Background(), t, replicas)).To(Succeed()) }()
	for _, m := range []v1alpha1.EtcdMember{first, second} {
		h.g.Expect(env.LoseDataDir(ctx, h.ns, m.Name)).To(Succeed())
	}
	h.g.Expect(env.ScaleOperator(ctx, t, replicas)).To(Succeed())
	h.g.Expect(framework.WaitFor(ctx, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		cl := &v1alpha1.EtcdCluster{}
		if err := h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: h.name}, cl); err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.MembersHealthyCondition)
		return cond != nil && cond.Reason == v1alpha1.QuorumGateHoldingReason, nil
	})).To(Succeed(), "the condition must say the quorum gate holds")
	cl := &v1alpha1.EtcdCluster{}
	h.g.Expect(h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: h.name}, cl)).To(Succeed())
	cond := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.MembersHealthyCondition)
	h.g.Expect(cond.Message).To(ContainSubstring("below quorum"))
	// Hold the gate under observation for a while: absence of deletion is
	// what is asserted, so it has to be watched over a span of time.
	h.g.Consistently(func() []string {
		var names []string
		for _, m := range h.members(ctx) {
			if m.DeletionTimestamp.IsZero() {
				names = append(names, m.Name)
			}
		}
		return names
	}, 20*time.Second, time.Second).Should(ConsistOf(names(before)))
}

// TestSelfHealMemoryMembers: a Memory member whose Pod is deleted lost its
// data with the Pod; it is replaced and the data survives on the others.
func TestSelfHealMemoryMembers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := newHealCluster(ctx, t, "heal-mem", func(c *v1alpha1.EtcdCluster) {
		c.Spec.Storage = v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: ptr.To(resource.MustParse("256Mi"))}
	})
	victim := h.pick(ctx, false)
	h.recover(ctx, victim, "PodLost", func() error {
		return env.Clientset.CoreV1().Pods(h.ns).Delete(ctx, victim.Name, metav1.DeleteOptions{})
	})
}

// TestNeverReplacesOOMKilled: a member killed for memory is a sizing
// problem; a replacement would start from a snapshot that needs the same
// memory. It must be left alone past the crash-loop threshold.
func TestNeverReplacesOOMKilled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := newHealCluster(ctx, t, "heal-oom", nil)
	cl := &v1alpha1.EtcdCluster{}
	h.g.Expect(h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: h.name}, cl)).To(Succeed())
	patch := client.MergeFrom(cl.DeepCopy())
	cl.Spec.Replicas = ptr.To[int32](4)
	cl.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("12Mi")}}
	h.g.Expect(h.c.Patch(ctx, cl, patch)).To(Succeed())

	var oom v1alpha1.EtcdMember
	h.g.Expect(framework.WaitFor(ctx, 8*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		for _, m := range h.members(ctx) {
			p, err := env.Clientset.CoreV1().Pods(h.ns).Get(ctx, m.Name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			for _, s := range p.Status.ContainerStatuses {
				if s.LastTerminationState.Terminated != nil && s.LastTerminationState.Terminated.Reason == "OOMKilled" &&
					s.RestartCount >= 5 {
					oom = m
					return true, nil
				}
			}
		}
		return false, nil
	})).To(Succeed(), "the new member should be OOM-killed past the crash-loop threshold")
	h.g.Expect(h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: oom.Name}, &v1alpha1.EtcdMember{})).To(Succeed())
	current := &v1alpha1.EtcdMember{}
	h.g.Expect(h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: oom.Name}, current)).To(Succeed())
	h.g.Expect(current.UID).To(Equal(oom.UID), "the OOM-killed member is the same object")
	h.g.Expect(current.DeletionTimestamp.IsZero()).To(BeTrue(), "and is not being replaced")
	evs, err := env.Clientset.EventsV1().Events(h.ns).List(ctx, metav1.ListOptions{})
	h.g.Expect(err).NotTo(HaveOccurred())
	for _, e := range evs.Items {
		h.g.Expect(e.Action).NotTo(Equal("ReplaceMember"), "no replacement: %s", e.Note)
	}
}

func names(ms []v1alpha1.EtcdMember) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
