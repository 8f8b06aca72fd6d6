//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
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

// rollCluster is one cluster of a rollout test: the self-heal tests'
// harness, whose sentinel a rollout must keep too.
type rollCluster = healHarness

func newRollCluster(ctx context.Context, t *testing.T, prefix string, mutate func(*v1alpha1.EtcdCluster)) *rollCluster {
	return newHealCluster(ctx, t, prefix, mutate)
}

func (r *rollCluster) get(ctx context.Context) *v1alpha1.EtcdCluster {
	cl := &v1alpha1.EtcdCluster{}
	r.g.Expect(r.c.Get(ctx, types.NamespacedName{Namespace: r.ns, Name: r.name}, cl)).To(Succeed())
	return cl
}

// edit changes the spec as a user would, and returns the API server's error.
func (r *rollCluster) edit(ctx context.Context, change func(*v1alpha1.EtcdCluster)) error {
	cl := r.get(ctx)
	patch := client.MergeFrom(cl.DeepCopy())
	change(cl)
	return r.c.Patch(ctx, cl, patch)
}

// rolled waits until every member runs the target template and the cluster
// is Ready.
func (r *rollCluster) rolled(ctx context.Context, timeout time.Duration) *v1alpha1.EtcdCluster {
	cl, err := framework.WaitForClusterReady(ctx, r.c, r.ns, r.name, timeout)
	r.g.Expect(err).NotTo(HaveOccurred())
	r.g.Expect(cl.Status.UpdatedMembers).To(BeEquivalentTo(len(cl.Status.Members)), "every member is on the target template")
	return cl
}

// ids maps member name to etcd member ID, from the status.
func ids(cl *v1alpha1.EtcdCluster) map[string]string {
	out := map[string]string{}
	for _, m := range cl.Status.Members {
		out[m.Name] = m.ID
	}
	return out
}

// rolloutEvents returns the cluster's MemberUpdating and LeaderMoved Events
// about the given version, oldest first.
func (r *rollCluster) rolloutEvents(ctx context.Context, version string) []eventsv1.Event {
	list, err := env.Clientset.EventsV1().Events(r.ns).List(ctx, metav1.ListOptions{})
	r.g.Expect(err).NotTo(HaveOccurred())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind != "EtcdCluster" || e.Regarding.Name != r.name {
			continue
		}
		if (e.Reason == "MemberUpdating" && strings.Contains(e.Note, "etcd "+version)) || e.Reason == "LeaderMoved" {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return eventTime(out[i]).Before(eventTime(out[j])) })
	return out
}

func eventTime(e eventsv1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// expectLeaderLast: the last member updated to version had leadership moved
// away from it first, after every other member was updated.
func (r *rollCluster) expectLeaderLast(ctx context.Context, version string) {
	evs := r.rolloutEvents(ctx, version)
	var updated []string
	lastMove := -1
	for i, e := range evs {
		switch e.Reason {
		case "MemberUpdating":
			updated = append(updated, strings.Fields(e.Note)[2])
		case "LeaderMoved":
			if len(updated) > 0 {
				lastMove = i
			}
		}
	}
	r.g.Expect(updated).To(HaveLen(3), "one MemberUpdating Event per member for %s: %v", version, evs)
	last := updated[len(updated)-1]
	r.g.Expect(lastMove).To(BeNumerically(">=", 0), "leadership moved during the rollout to %s", version)
	r.g.Expect(evs[lastMove].Note).To(ContainSubstring("from "+last), "the member updated last was the leader, moved away first")
	r.g.Expect(evs[len(evs)-1].Reason).To(Equal("MemberUpdating"), "and nothing was updated after it")
}

// startChecker runs the linearizability workload against every member and
// the client Service until the returned stop is called, which checks the
// history.
func (r *rollCluster) startChecker(ctx context.Context) func() linearizability.Report {
	eps, err := env.MemberEndpoints(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	svc, err := env.ClientServiceEndpoint(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	w, err := linearizability.Start(linearizability.Config{Endpoints: append(eps, svc), ClientsPerEndpoint: 2})
	r.g.Expect(err).NotTo(HaveOccurred())
	return func() linearizability.Report {
		h := w.Stop()
		rep, err := h.Check(linearizability.CheckOptions{VisualizationPath: filepath.Join(r.t.TempDir(), "history.html")})
		r.g.Expect(err).NotTo(HaveOccurred())
		r.t.Logf("linearizability: %s", rep)
		return rep
	}
}

// TestUpgradeUnderLoad: 3.5.35 → 3.6.16 → 3.7.3 on volumes while clients
// pinned to each member and to the client Service read and write; the
// history must be linearizable, every member keeps its ID, and the leader
// is updated last each time.
func TestUpgradeUnderLoad(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	r := newRollCluster(ctx, t, "upgrade", func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.5.35" })
	before := ids(r.get(ctx))
	stop := r.startChecker(ctx)
	for _, version := range []string{"3.6.16", "3.7.3"} {
		t.Logf("upgrading to %s", version)
		began := time.Now()
		r.g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) { c.Spec.Version = version })).To(Succeed())
		cl := r.rolled(ctx, 8*time.Minute)
		t.Logf("rolled to %s in %s", version, time.Since(began).Round(100*time.Millisecond))
		r.g.Expect(cl.Status.CurrentVersion).To(Equal(version))
		for _, m := range cl.Status.Members {
			r.g.Expect(m.Version).To(Equal(version), "%s reports the new version", m.Name)
		}
		r.g.Expect(ids(cl)).To(Equal(before), "the same members, with the same IDs, on their volumes")
		r.expectLeaderLast(ctx, version)
	}
	rep := stop()
	r.g.Expect(rep.Err()).NotTo(HaveOccurred(), "the history is linearizable")
	r.g.Expect(rep.Acknowledged).To(BeNumerically(">", 100), "writes went on throughout")
}

// TestMemoryUpgrade: Memory members cannot restart on their data, so each is
// replaced by a new member on the new version that joins first; no key is
// lost.
func TestMemoryUpgrade(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r := newRollCluster(ctx, t, "upgrade-mem", func(c *v1alpha1.EtcdCluster) {
		c.Spec.Version = "3.6.16"
		c.Spec.Storage = v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: ptr.To(resource.MustParse("256Mi"))}
	})
	before := ids(r.get(ctx))
	svc, err := env.ClientServiceEndpoint(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	etcdc, err := framework.EtcdClient(svc)
	r.g.Expect(err).NotTo(HaveOccurred())
	r.g.Expect(framework.PutKeys(ctx, etcdc, "memory-upgrade", 500)).To(Succeed())
	etcdc.Close()

	r.g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.7.3" })).To(Succeed())
	cl := r.rolled(ctx, 10*time.Minute)
	for _, m := range cl.Status.Members {
		r.g.Expect(m.Version).To(Equal("3.7.3"))
		r.g.Expect(before).NotTo(HaveKey(m.Name), "%s is a new member: a Memory member is replaced, not restarted", m.Name)
	}
	eps, err := env.MemberEndpoints(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	r.g.Expect(eps).To(HaveLen(3))
	for _, ep := range eps {
		r.g.Expect(framework.CheckKeys(ctx, ep, "memory-upgrade", 500)).To(Succeed(), "every key on %s", ep)
	}
}

// TestResourcesChangeRolls: a resources change restarts every member with
// the new resources, one at a time: etcd itself, each member asked at its
// Pod's address every 100 ms, never has two members not answering at once,
// and has each of them not answering at some point (the samples saw the
// restarts they are meant to judge).
func TestResourcesChangeRolls(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := newRollCluster(ctx, t, "roll-res", nil)
	before := names(r.members(ctx))

	watch := env.WatchMembersDown(ctx, r.ns, r.name)
	defer func() { _, _ = watch.Stop() }()
	want := resource.MustParse("160Mi")
	r.g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) {
		c.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: want}}
	})).To(Succeed())
	r.rolled(ctx, 8*time.Minute)
	seen, err := watch.Stop()
	r.g.Expect(err).NotTo(HaveOccurred())
	t.Logf("members: %s", seen)
	t.Logf("members down, run by run:\n%s", seen.Timeline())
	pods, err := env.MemberPods(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	for name, p := range pods {
		got := p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]
		r.g.Expect(got.Cmp(want)).To(BeZero(), "%s runs with the new resources", name)
	}
	r.g.Expect(seen.MaxDown).To(BeNumerically("<=", 1), "at no sample were two members down: %s", seen)
	r.g.Expect(seen.SeenDown()).To(ConsistOf(before), "every member was seen down while it restarted: %s", seen)
}

// TestVersionRefusals: a skipped minor is refused at admission with its
// message; a one-minor downgrade gets past admission and is refused by the
// operator, which names what to do, and nothing moves.
func TestVersionRefusals(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := newRollCluster(ctx, t, "refuse", func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.7.3" })
	before := ids(r.get(ctx))

	skip := env.Kubectl(ctx, "patch", "etcd", "-n", r.ns, r.name, "--type=merge", "-p", `{"spec":{"version":"3.5.35"}}`)
	r.g.Expect(skip.Err).To(HaveOccurred())
	r.g.Expect(skip.Stderr).To(ContainSubstring("spec.version may change by one minor release at a time"))

	r.g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.6.16" })).To(Succeed())
	r.g.Expect(framework.WaitFor(ctx, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		cl := r.get(ctx)
		ready := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ReadyCondition)
		return ready != nil && ready.Reason == v1alpha1.VersionChangeRefusedReason, nil
	})).To(Succeed())
	cl := r.get(ctx)
	ready := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ReadyCondition)
	r.g.Expect(ready.Message).To(ContainSubstring("downgrading from 3.7.3 to 3.6.16 takes etcd's downgrade API"))
	r.g.Expect(meta.IsStatusConditionTrue(cl.Status.Conditions, v1alpha1.StalledCondition)).To(BeTrue())
	r.g.Expect(meta.IsStatusConditionTrue(cl.Status.Conditions, v1alpha1.AvailableCondition)).To(BeTrue(), "the cluster keeps serving")
	r.g.Expect(ids(cl)).To(Equal(before))
	for _, m := range cl.Status.Members {
		r.g.Expect(m.Version).To(Equal("3.7.3"), "%s is not touched", m.Name)
	}
	r.g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.7.3" })).To(Succeed())
	r.rolled(ctx, 2*time.Minute)
}

// TestFailingVersionStopsTheRollout: a version whose image cannot start
// stops the rollout after its first member, with a condition and a Warning
// Event naming it, and it stays stopped: look after look, one member is
// updated and the others run on, in the Pods they had, never restarted.
// Setting the version back heals it.
func TestFailingVersionStopsTheRollout(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := newRollCluster(ctx, t, "fail-roll", nil)
	// Each Pod as it was, by UID and etcd restarts: a member the rollout
	// touched has a new Pod.
	type podState struct {
		uid      types.UID
		restarts int32
	}
	stateOf := func(p *corev1.Pod) podState {
		s := podState{uid: p.UID}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "etcd" {
				s.restarts = cs.RestartCount
			}
		}
		return s
	}
	pods, err := env.MemberPods(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	r.g.Expect(pods).To(HaveLen(3))
	before := map[string]podState{}
	for name, p := range pods {
		before[name] = stateOf(p)
	}

	r.g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.6.99" })).To(Succeed())
	var failed metav1.Condition
	r.g.Expect(framework.WaitFor(ctx, 4*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		cl := r.get(ctx)
		ready := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ReadyCondition)
		if ready != nil && ready.Reason == v1alpha1.RolloutFailedReason {
			failed = *ready
			return true, nil
		}
		return false, nil
	})).To(Succeed())
	r.g.Expect(failed.Message).To(ContainSubstring("cannot start etcd 3.6.99"))

	// Stopped is a claim about a span of time, so it is checked look after
	// look over one, each look finding the same single member updated.
	var updated string
	looks := 0
	r.g.Consistently(func(g Gomega) {
		looks++
		cl := &v1alpha1.EtcdCluster{}
		g.Expect(r.c.Get(ctx, types.NamespacedName{Namespace: r.ns, Name: r.name}, cl)).To(Succeed())
		g.Expect(cl.Status.UpdatedMembers).To(BeEquivalentTo(1), "the rollout stopped after its first member")
		ready := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(v1alpha1.RolloutFailedReason))
		g.Expect(meta.IsStatusConditionTrue(cl.Status.Conditions, v1alpha1.AvailableCondition)).To(BeTrue())
		var members v1alpha1.EtcdMemberList
		g.Expect(r.c.List(ctx, &members, client.InNamespace(r.ns), client.MatchingLabels{v1alpha1.ClusterLabel: r.name})).To(Succeed())
		var onNew []string
		for _, m := range members.Items {
			if m.Spec.Version == "3.6.99" {
				onNew = append(onNew, m.Name)
			}
		}
		g.Expect(onNew).To(HaveLen(1), "one member was updated")
		if updated == "" {
			updated = onNew[0]
		}
		g.Expect(onNew[0]).To(Equal(updated), "the same member at every look")
		pods, err := env.MemberPods(ctx, r.ns, r.name)
		g.Expect(err).NotTo(HaveOccurred())
		for name, was := range before {
			if name == updated {
				continue
			}
			p := pods[name]
			g.Expect(p).NotTo(BeNil(), "%s has its Pod", name)
			g.Expect(stateOf(p)).To(Equal(was), "%s runs on in its Pod, never restarted", name)
			g.Expect(framework.PodReady(p)).To(BeTrue(), "%s is ready", name)
		}
	}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(3 * time.Second).Should(Succeed())
	r.g.Expect(looks).To(BeNumerically(">=", 5), "the stopped rollout was looked at several times")
	r.expectEvent(ctx, v1alpha1.RolloutFailedReason, "member "+updated+" cannot start etcd 3.6.99")

	r.g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) { c.Spec.Version = v1alpha1.DefaultEtcdVersion })).To(Succeed())
	healed := r.rolled(ctx, 4*time.Minute)
	for _, m := range healed.Status.Members {
		r.g.Expect(m.Version).To(Equal(v1alpha1.DefaultEtcdVersion))
	}
}
