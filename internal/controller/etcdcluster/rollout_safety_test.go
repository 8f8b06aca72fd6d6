package etcdcluster

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
)

// rolled names the members whose template the rollout has changed.
func (h *harness) rolled(names ...string) []string {
	var out []string
	for _, n := range names {
		if h.version(n) != v1alpha1.DefaultEtcdVersion {
			out = append(out, n)
		}
	}
	return out
}

// startRoll forms demo-a..c with demo-c leading, edits the version, and
// lets the rollout restart its first member, demo-a, whose Pod then goes
// down for its restart.
func startRoll(t *testing.T) *harness {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	c, _ := h.etcdMember(peerURL("demo-c"))
	h.etcd.SetLeader(c.ID)
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Version = "3.6.17" })
	h.reconcile()
	h.g.Expect(h.rolled("demo-a", "demo-b", "demo-c")).To(Equal([]string{"demo-a"}))
	h.setPodReady("demo-a", false)
	h.etcd.SetEndpointError(clientURL("demo-a"), errUnreachable())
	return h
}

// A healthy follower whose Status call timed out once, while the member
// restarted before it is still coming up, is not taken for one that is down:
// restarting it would leave one voter of three.
func TestRolloutSafety_ALookThatTimesOutIsNoDownMember(t *testing.T) {
	h := startRoll(t)
	h.etcd.SetEndpointError(clientURL("demo-b"), context.DeadlineExceeded)
	for i := 0; i < 3; i++ {
		h.reconcile()
		h.g.Expect(h.rolled("demo-a", "demo-b", "demo-c")).To(Equal([]string{"demo-a"}), "pass %d", i)
	}
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Message).To(ContainSubstring("waiting for demo-a"))

	// Even once the kubelet has reported it not ready for long: the member
	// restarted before it is not back.
	p := h.pod("demo-b")
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse,
		LastTransitionTime: metav1.NewTime(h.now.Add(-time.Hour))}}
	h.g.Expect(h.c.Status().Update(context.Background(), p)).To(Succeed())
	h.reconcile()
	h.g.Expect(h.rolled("demo-a", "demo-b", "demo-c")).To(Equal([]string{"demo-a"}))

	h.etcd.SetEndpointError(clientURL("demo-b"), nil)
	h.setPodReady("demo-b", true)
	h.etcd.SetEndpointError(clientURL("demo-a"), nil)
	h.setPodReady("demo-a", true)
	h.reconcile()
	h.g.Expect(h.rolled("demo-a", "demo-b", "demo-c")).To(Equal([]string{"demo-a", "demo-b"}), "the next member, once the first is back")
}

// With one member restarting and the leader's look timed out, no leader is
// known: the leader is not restarted, with or without a handoff.
func TestRolloutSafety_NoLeaderKnownMeansWait(t *testing.T) {
	h := startRoll(t)
	h.etcd.SetEndpointError(clientURL("demo-c"), context.DeadlineExceeded)
	for i := 0; i < 3; i++ {
		h.reconcile()
		h.g.Expect(h.rolled("demo-a", "demo-b", "demo-c")).To(Equal([]string{"demo-a"}), "pass %d", i)
	}
	h.g.Expect(h.etcd.MovedLeader).To(BeEmpty())
}

// A cache that has not seen the restart yet shows the member with its old
// template and its old Pod, ready and answering: the operator remembers the
// restart it made, and waits for the member to be back on its new template.
func TestRolloutSafety_ACacheBehindTheRestartDoesNotStartTheNext(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	c, _ := h.etcdMember(peerURL("demo-c"))
	h.etcd.SetLeader(c.ID)
	stale := h.member("demo-a")
	// Its Pod is built from its old template, as the member controller
	// builds every Pod.
	p := h.pod("demo-a")
	p.Annotations = map[string]string{pod.TemplateHashAnnotation: pod.TemplateHash(stale)}
	h.g.Expect(h.c.Update(context.Background(), p)).To(Succeed())
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Version = "3.6.17" })
	h.reconcile()
	h.g.Expect(h.rolled("demo-a", "demo-b", "demo-c")).To(Equal([]string{"demo-a"}))

	// Play the stale cache: the member as it was, its Pod still up.
	now := h.member("demo-a")
	stale.ResourceVersion = now.ResourceVersion
	h.g.Expect(h.c.Update(context.Background(), stale)).To(Succeed())
	stale = h.member("demo-a")
	stale.Status = *h.member("demo-a").Status.DeepCopy()
	stale.Status.RolledAt, stale.Status.RestartApproved = nil, ""
	h.g.Expect(h.c.Status().Update(context.Background(), stale)).To(Succeed())
	h.g.Expect(h.updatingEvents()).To(HaveLen(1))
	h.reconcile()
	// demo-a is not restarted a second time, nor is anybody else: the
	// restart the operator made is the one it waits for.
	h.g.Expect(h.member("demo-a").Status.RestartApproved).To(BeEmpty(), "the approval is not rewritten")
	h.g.Expect(h.version("demo-a")).To(Equal(v1alpha1.DefaultEtcdVersion), "nor the template")
	h.g.Expect(h.rolled("demo-a", "demo-b", "demo-c")).To(BeEmpty())
	h.g.Expect(h.updatingEvents()).To(BeEmpty(), "one MemberUpdating Event per restart")
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Message).To(ContainSubstring("waiting for demo-a"))
}

// A member the rollout restarted to one target that is not back when the
// target changes again goes to the new target at once: it is down by the
// rollout's own doing, and nobody else is touched.
func TestRolloutSafety_ARestartToAnEarlierTargetGoesToTheNewOneAtOnce(t *testing.T) {
	h := startRoll(t)
	h.drainEvents()
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Version = "3.6.18" })
	h.reconcile()
	h.g.Expect(h.version("demo-a")).To(Equal("3.6.18"))
	h.g.Expect(h.rolled("demo-a", "demo-b", "demo-c")).To(Equal([]string{"demo-a"}))
	h.g.Expect(h.updatingEvents()).To(HaveLen(1))
}
