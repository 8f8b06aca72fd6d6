package remediation

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func nodeWith(ready corev1.ConditionStatus, since time.Time, cordoned bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{Unschedulable: cordoned}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(since)}}
	return n
}

func TestNode(t *testing.T) {
	t.Parallel()
	since := now.Add(-time.Minute)
	cases := []struct {
		name        string
		node        string
		obj         *corev1.Node
		running     bool
		stuckSince  time.Time
		unavailable bool
		why         string
	}{
		{"never scheduled", "", nil, false, time.Time{}, false, ""},
		{"ready", "n1", nodeWith(corev1.ConditionTrue, since, false), true, time.Time{}, false, ""},
		{"not ready", "n1", nodeWith(corev1.ConditionFalse, since, false), true, time.Time{}, true, "not ready"},
		{"unreachable", "n1", nodeWith(corev1.ConditionUnknown, since, false), false, time.Time{}, true, "unreachable"},
		{"deleted", "n1", nil, false, time.Time{}, true, "no longer exists"},
		{"cordoned, still running its Pod", "n1", nodeWith(corev1.ConditionTrue, since, true), true, time.Time{}, false, ""},
		{"cordoned, Pod stranded", "n1", nodeWith(corev1.ConditionTrue, since, true), false, since, true, "cordoned"},
		{"cordoned, Pod not yet found unschedulable", "n1", nodeWith(corev1.ConditionTrue, since, true), false, time.Time{}, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			st := Node(tc.node, tc.obj, tc.running, tc.stuckSince, time.Time{})
			g.Expect(st.Unavailable).To(Equal(tc.unavailable))
			g.Expect(st.Why).To(ContainSubstring(tc.why))
		})
	}
}

func TestNode_UnreachableCountsFromTheLastLeaseRenewal(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	marked := now.Add(-10 * time.Second)
	heard := now.Add(-50 * time.Second)
	unknown := nodeWith(corev1.ConditionUnknown, marked, false)
	g.Expect(Node("n1", unknown, false, time.Time{}, heard).Since).To(Equal(heard),
		"the node was gone for the grace period before it was marked")
	g.Expect(Node("n1", unknown, false, time.Time{}, time.Time{}).Since).To(Equal(marked),
		"without a lease, the transition is all that is known")
	g.Expect(Node("n1", unknown, false, time.Time{}, now).Since).To(Equal(marked),
		"a renewal after the mark: the kubelet is back, and never earlier than the mark")
	notReady := nodeWith(corev1.ConditionFalse, marked, false)
	g.Expect(Node("n1", notReady, true, time.Time{}, heard).Since).To(Equal(marked),
		"a kubelet that reports NotReady is heard from: its condition says when")
}

func TestAssess_NodeLost(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	terminating := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: now}}}
	down := NodeState{Name: "n1", Unavailable: true, Since: now.Add(-61 * time.Second), Why: "node n1 is unreachable"}
	v, act := Assess(Facts{Pod: terminating, Container: "etcd", Node: down, NodeLostAfter: time.Minute}, now)
	g.Expect(act).To(BeTrue(), "a Pod stuck terminating on a lost node is not someone else's business")
	g.Expect(v.Reason).To(Equal(NodeLost))
	g.Expect(v.Detail).To(ContainSubstring("for 1m1s"))

	down.Since = now.Add(-30 * time.Second)
	_, act = Assess(Facts{Pod: terminating, Container: "etcd", Node: down, NodeLostAfter: time.Minute}, now)
	g.Expect(act).To(BeFalse(), "not before the bound")

	_, act = Assess(Facts{Container: "etcd", Node: NodeState{Name: "n1", Unavailable: true, Why: "gone"}, NodeLostAfter: time.Minute}, now)
	g.Expect(act).To(BeTrue(), "a deleted Node, with no Pod left")
}

func TestAssess_LearnersAndMaintenanceAreNotUnresponsive(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	stuck := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name: "etcd", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-2 * UnresponsiveAfter))}},
	}}}}
	base := Facts{Pod: stuck, Container: "etcd", OthersHealthy: true}
	v, act := Assess(base, now)
	g.Expect(act).To(BeTrue())
	g.Expect(v.Reason).To(Equal(Unresponsive))

	learner := base
	learner.Learner = true
	_, act = Assess(learner, now)
	g.Expect(act).To(BeFalse(), "a learner that answers slowly is catching up")

	busy := base
	busy.InMaintenance = true
	_, act = Assess(busy, now)
	g.Expect(act).To(BeFalse(), "the operator's own maintenance is not a failure")
}

func TestConfirm(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	leader := Diverging{Detail: "it reports itself leader", Aspect: AspectStatus}
	list := Diverging{Detail: "its member list differs", Aspect: AspectMembers}
	both := Observed{Status: true, Members: true}
	statusOnly := Observed{Status: true}

	s, ok := Confirm(nil, leader, statusOnly, now)
	g.Expect(ok).To(BeFalse())
	g.Expect(s.Since).To(Equal(now))

	// A look at the same aspect that agrees clears it: two passing lags
	// ten seconds apart are not one lasting disagreement.
	s, ok = Confirm(s, Diverging{}, statusOnly, now.Add(3*time.Second))
	g.Expect(ok).To(BeFalse())
	g.Expect(s).To(BeNil())
	s, ok = Confirm(s, leader, statusOnly, now.Add(10*time.Second))
	g.Expect(ok).To(BeFalse(), "seen again, but the clock started over")
	s, ok = Confirm(s, leader, statusOnly, now.Add(10*time.Second+DivergenceConfirmAfter))
	g.Expect(ok).To(BeTrue(), "seen throughout the window")
	g.Expect(s).NotTo(BeNil())

	// A pass that did not read the member list says nothing about it.
	s, _ = Confirm(nil, list, both, now)
	s, ok = Confirm(s, Diverging{}, statusOnly, now.Add(DivergenceConfirmAfter/2))
	g.Expect(ok).To(BeFalse())
	g.Expect(s).NotTo(BeNil(), "unread, so not cleared")
	_, ok = Confirm(s, list, both, now.Add(DivergenceConfirmAfter))
	g.Expect(ok).To(BeTrue())

	// Another aspect starts its own clock.
	s, _ = Confirm(nil, list, both, now)
	s, ok = Confirm(s, leader, both, now.Add(DivergenceConfirmAfter))
	g.Expect(ok).To(BeFalse())
	g.Expect(s.Aspect).To(Equal(AspectStatus))

	_, ok = Confirm(nil, Diverging{Detail: "another cluster", Definitive: true, Aspect: AspectStatus}, statusOnly, now)
	g.Expect(ok).To(BeTrue(), "definitive at first sight")
}
