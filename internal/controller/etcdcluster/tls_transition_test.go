package etcdcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
	tt "github.com/quorumctl/etcd-operator/internal/tlstransition"
)

// buildPod replaces the member's Pod by one built from its spec, as the
// member controller does, ready and labelled a voter: the Pod's flags say
// which pass its etcd runs.
func (h *harness) buildPod(name string, ready bool) {
	h.t.Helper()
	m := h.member(name)
	if err := h.c.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS}}); client.IgnoreNotFound(err) != nil {
		h.t.Fatal(err)
	}
	p := pod.Build(pod.Params{Member: m, ClusterFormed: true, ClusterDomain: testDomain})
	p.ResourceVersion = ""
	p.Labels[v1alpha1.RoleLabel] = v1alpha1.RoleLabelVoter
	h.g.Expect(h.c.Create(context.Background(), p)).To(Succeed())
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status = corev1.PodStatus{
		PodIP:      "10.0.0.1",
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", Ready: ready,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(h.now)}}}},
	}
	h.g.Expect(h.c.Status().Update(context.Background(), p)).To(Succeed())
}

// dialledOverHTTPS has the fake etcd answer its members' https URLs, which
// the operator dials once it has switched clients: a member serving both
// schemes answers either on its one port.
func (h *harness) dialledOverHTTPS() {
	h.t.Helper()
	if !etcdaccess.ClientsSwitched(h.cluster()) {
		return
	}
	for _, em := range h.etcd.Members() {
		h.etcd.StartMember(em.ID, em.Name, withScheme(em.ClientURLs[0], "https"))
	}
}

func (h *harness) transition() *v1alpha1.TLSTransitionStatus {
	h.t.Helper()
	return transitionOf(h.cluster())
}

func (h *harness) peerURLInEtcd(name string) string {
	h.t.Helper()
	for _, em := range h.etcd.Members() {
		if em.Name == name {
			return em.PeerURLs[0]
		}
	}
	h.t.Fatalf("%s not in etcd", name)
	return ""
}

// plainToTLS forms a plaintext cluster of three members whose Pods are
// built from their specs, then turns spec.tls on.
func plainToTLS(t *testing.T) (*harness, []string) {
	h := newHarness(t)
	names := []string{"demo-a", "demo-b", "demo-c"}
	h.formed(3, names...)
	for _, n := range names {
		h.buildPod(n, true)
	}
	for range 2 {
		h.reconcile()
	}
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	h.drainEvents()
	h.editSpec(func(s *v1alpha1.EtcdClusterSpec) { s.TLS = &v1alpha1.TLSSpec{} })
	return h, names
}

// walk runs passes, playing each restart the rollout approves as the member
// controller and the kubelet would (the Pod goes down, then comes back
// built from the member's spec), until stop says so. It fails if a member
// restarts while another is down, and returns the restarts in order.
func (h *harness) walk(names []string, stop func() bool) []string {
	h.t.Helper()
	var restarted []string
	for i := 0; i < 80 && !stop(); i++ {
		h.reconcile()
		h.dialledOverHTTPS()
		for _, n := range names {
			m := h.member(n)
			if m.Status.RolledAt == nil || !pod.Outdated(m, h.pod(n)) {
				continue
			}
			restarted = append(restarted, n)
			h.setPodReady(n, false)
			h.reconcile()
			for _, o := range names {
				if o != n {
					h.g.Expect(h.member(o).Status.RolledAt).To(BeNil(), "nothing else restarts while %s is down", n)
					h.g.Expect(h.pod(o).Status.Conditions[0].Status).To(Equal(corev1.ConditionTrue), "%s serves while %s is down", o, n)
				}
			}
			h.buildPod(n, true)
		}
		h.now = h.now.Add(time.Second)
	}
	h.g.Expect(stop()).To(BeTrue(), "the transition moved on")
	return restarted
}

// Turning TLS on for a running cluster: every member restarts onto both
// schemes, one at a time; the operator moves to https; the second pass
// waits for the user's word; every member restarts onto TLS alone, its
// peer URL moved to https; the end state is what a cluster created with
// TLS runs.
func TestTLSTransition_TwoPassesThroughTheRollout(t *testing.T) {
	h, names := plainToTLS(t)
	h.reconcile()
	h.g.Expect(h.transition()).NotTo(BeNil())
	h.g.Expect(h.transition().Phase).To(Equal(string(tt.PhaseAddingTLS)))
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.TLSTransitioningReason))
	h.g.Expect(ready.Message).To(ContainSubstring("pass 1 of 2"))

	first := h.walk(names, func() bool { t := h.transition(); return t != nil && t.ClientsHTTPS })
	h.g.Expect(first).To(ConsistOf(names), "each member restarted once onto both schemes")
	for _, n := range names {
		m := h.member(n)
		h.g.Expect(tt.SpecPass(m)).To(Equal(tt.Both))
		h.g.Expect(h.leaf(n, "peer")).NotTo(BeNil(), "%s has its certificates", n)
		h.g.Expect(h.peerURLInEtcd(n)).To(HavePrefix("http://"), "peers still plaintext")
	}
	h.g.Expect(h.transition().Phase).To(Equal(string(tt.PhaseClientsMaySwitch)))
	h.g.Expect(strings.Join(h.drainEvents(), "\n")).To(ContainSubstring("TLSClientsMaySwitch"))
	h.g.Expect(etcdaccess.ShapeOf(h.cluster(), ptrs(h.members())).HTTPS).To(BeTrue(), "the operator dials https from now")

	// The second pass waits for the user.
	for range 5 {
		h.reconcile()
		h.dialledOverHTTPS()
		h.now = h.now.Add(time.Minute)
	}
	h.g.Expect(h.transition().Wait).To(Equal(string(tt.ReasonPlaintextInUse)))
	for _, n := range names {
		h.g.Expect(tt.SpecPass(h.member(n))).To(Equal(tt.Both), "plaintext stays until released")
	}
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Message).To(ContainSubstring(v1alpha1.ReleasePlaintextAnnotation))
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).NotTo(Equal(metav1.ConditionTrue), "waiting for the user is not stuck")

	h.annotate(v1alpha1.ReleasePlaintextAnnotation, "now")
	second := h.walk(names, func() bool { return h.transition() == nil })
	h.g.Expect(second).To(ConsistOf(names), "each member restarted once onto TLS alone")
	for _, n := range names {
		m := h.member(n)
		h.g.Expect(tt.SpecPass(m)).To(Equal(tt.TLS))
		h.g.Expect(h.peerURLInEtcd(n)).To(Equal(withScheme(peerURL(n), "https")), "etcd knows %s by its https peer URL", n)
		h.g.Expect(pod.Outdated(m, h.pod(n))).To(BeFalse())
		h.g.Expect(pod.Args(pod.Params{Member: m, ClusterDomain: testDomain})).NotTo(ContainElement(ContainSubstring("http://0.0.0.0:2379")), "plaintext refused")
	}
	h.g.Expect(strings.Join(h.drainEvents(), "\n")).To(ContainSubstring("TLSTransitionCompleted"))
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue), h.condition(v1alpha1.ReadyCondition).Message)
}

// spec.rollout.paused holds the transition between members.
func TestTLSTransition_PauseHoldsTheNextMember(t *testing.T) {
	h, names := plainToTLS(t)
	h.pauseRollout(true)
	for range 5 {
		h.reconcile()
		h.now = h.now.Add(time.Second)
	}
	for _, n := range names {
		h.g.Expect(tt.SpecPass(h.member(n))).To(Equal(tt.Plain), "%s not touched while paused", n)
	}
	h.g.Expect(h.transition().Wait).To(Equal(string(tt.ReasonPaused)))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.TLSTransitioningReason))
}

// A member whose Pod came back on https before etcd knew its https URL (an
// operator restarted between the two) is moved at once by the cluster
// controller.
func TestTLSTransition_MovesAPeerURLLeftBehind(t *testing.T) {
	h, names := plainToTLS(t)
	h.walk(names, func() bool { t := h.transition(); return t != nil && t.ClientsHTTPS })
	h.dialledOverHTTPS()
	h.annotate(v1alpha1.ReleasePlaintextAnnotation, "now")
	var moved string
	for i := 0; i < 10 && moved == ""; i++ {
		h.reconcile()
		for _, n := range names {
			if tt.SpecPass(h.member(n)) == tt.TLS {
				moved = n
			}
		}
	}
	h.g.Expect(moved).NotTo(BeEmpty())
	h.buildPod(moved, true)
	h.g.Expect(h.peerURLInEtcd(moved)).To(HavePrefix("http://"))
	h.reconcile()
	h.g.Expect(h.peerURLInEtcd(moved)).To(HavePrefix("https://"))
	h.g.Expect(strings.Join(h.drainEvents(), "\n")).To(ContainSubstring("TLSPeerURLUpdated"))
}

func ptrs(ms []v1alpha1.EtcdMember) []*v1alpha1.EtcdMember {
	out := make([]*v1alpha1.EtcdMember, len(ms))
	for i := range ms {
		out[i] = &ms[i]
	}
	return out
}

// A step etcd refuses is the pass's error like any phase's: it is reported,
// taken again on the next pass, and the phases after it still run (here the
// Services, one of which went missing).
func TestTLSTransition_AFailedStepStopsNothingElse(t *testing.T) {
	h, names := plainToTLS(t)
	h.walk(names, func() bool { t := h.transition(); return t != nil && t.ClientsHTTPS })
	h.dialledOverHTTPS()
	h.annotate(v1alpha1.ReleasePlaintextAnnotation, "now")
	var moved string
	for i := 0; i < 10 && moved == ""; i++ {
		h.reconcile()
		for _, n := range names {
			if tt.SpecPass(h.member(n)) == tt.TLS {
				moved = n
			}
		}
	}
	h.g.Expect(moved).NotTo(BeEmpty())
	h.buildPod(moved, true)
	h.etcd.FailNext(etcd.OpMemberUpdate, etcdfake.ErrUnreachable)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ClientServiceName(testName), Namespace: testNS}}
	h.g.Expect(h.c.Delete(context.Background(), svc)).To(Succeed())

	h.reconcile()
	h.g.Expect(h.peerURLInEtcd(moved)).To(HavePrefix("http://"), "etcd refused the move")
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Message).To(ContainSubstring("failed to move the peer URL of member " + moved))
	h.g.Expect(h.c.Get(context.Background(), client.ObjectKeyFromObject(svc), svc)).To(Succeed(), "the Services phase ran after the failed step")

	h.reconcile()
	h.g.Expect(h.peerURLInEtcd(moved)).To(HavePrefix("https://"), "taken again on the next pass")
}
