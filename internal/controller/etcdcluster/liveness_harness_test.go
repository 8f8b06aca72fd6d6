package etcdcluster

import (
	"context"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/controller/etcdmember"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// withFinalizers gives every member the member controller's finalizer, so
// that a deletion waits for runFinalizers as it waits for the real one.
func (h *harness) withFinalizers() {
	h.t.Helper()
	for _, m := range h.members() {
		if controllerutil.AddFinalizer(&m, v1alpha1.MemberFinalizer) {
			h.g.Expect(h.c.Update(context.Background(), &m)).To(Succeed())
		}
	}
}

// runFinalizers runs the real member controller on every member being
// deleted: its quorum-gated MemberRemove, then the finalizer's release.
func (h *harness) runFinalizers() {
	h.t.Helper()
	mr := &etcdmember.Reconciler{Client: h.c, Dialer: h.etcd, ClusterDomain: testDomain}
	for _, m := range h.members() {
		if m.DeletionTimestamp.IsZero() {
			continue
		}
		_, err := mr.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNS, Name: m.Name}})
		h.g.Expect(err).NotTo(HaveOccurred())
	}
}

// node creates a Node, Ready or not since the given time.
func (h *harness) node(name string, ready corev1.ConditionStatus, since time.Time) {
	h.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(since)}}
	existing := &corev1.Node{}
	if err := h.c.Get(context.Background(), client.ObjectKey{Name: name}, existing); err == nil {
		existing.Status.Conditions = n.Status.Conditions
		h.g.Expect(h.c.Status().Update(context.Background(), existing)).To(Succeed())
		return
	}
	h.g.Expect(h.c.Create(context.Background(), n)).To(Succeed())
	h.g.Expect(h.c.Status().Update(context.Background(), n)).To(Succeed())
}

// placeOn schedules a member's Pod on a node and records it, as the member
// controller does.
func (h *harness) placeOn(member, node string) {
	h.t.Helper()
	p := h.pod(member)
	p.Spec.NodeName = node
	h.g.Expect(h.c.Update(context.Background(), p)).To(Succeed())
	p.Status.Phase = corev1.PodRunning
	h.g.Expect(h.c.Status().Update(context.Background(), p)).To(Succeed())
	m := h.member(member)
	m.Status.NodeName = node
	h.g.Expect(h.c.Status().Update(context.Background(), m)).To(Succeed())
}

// startLearner plays the new member's Pod and etcd process coming up.
func (h *harness) startLearner(name string) etcd.Member {
	h.t.Helper()
	for _, em := range h.etcd.Members() {
		if len(em.PeerURLs) > 0 && em.PeerURLs[0] == h.member(name).Spec.PeerURL {
			h.readyPod(name)
			h.etcd.StartMember(em.ID, name, h.member(name).Spec.ClientURL)
			m := h.member(name)
			m.Status.PodName = name
			h.g.Expect(h.c.Status().Update(context.Background(), m)).To(Succeed())
			h.latchBoot(name)
			return em
		}
	}
	h.t.Fatalf("etcd does not list %s", name)
	return etcd.Member{}
}

// latchBoot does what the member controller does once a member's Pod is
// first ready: it records the member's first boot.
func (h *harness) latchBoot(name string) {
	h.t.Helper()
	m := h.member(name)
	now := metav1.NewTime(h.now)
	m.Status.FirstReadyTime = &now
	h.g.Expect(h.c.Status().Update(context.Background(), m)).To(Succeed())
}

// replacementOf is the live member created to replace name, if any.
func (h *harness) replacementOf(name string) *v1alpha1.EtcdMember {
	for _, m := range h.members() {
		if m.Spec.Replaces == name && m.DeletionTimestamp.IsZero() {
			return &m
		}
	}
	return nil
}

// healthyVoters counts voters whose endpoint answers with a leader.
func (h *harness) healthyVoters() int {
	n := 0
	for _, m := range h.etcd.Members() {
		if m.IsLearner || len(m.ClientURLs) == 0 {
			continue
		}
		if st, err := h.etcd.Status(context.Background(), m.ClientURLs[0]); err == nil && st.Healthy() {
			n++
		}
	}
	return n
}

func (h *harness) etcdMember(peerURL string) (etcd.Member, bool) {
	for _, em := range h.etcd.Members() {
		for _, u := range em.PeerURLs {
			if u == peerURL {
				return em, true
			}
		}
	}
	return etcd.Member{}, false
}

func (h *harness) hasPod(name string) bool {
	return h.c.Get(context.Background(), clientKey(name), &corev1.Pod{}) == nil
}

// clientKey names a Pod or member in the test namespace, or a Node.
func clientKey(name string) client.ObjectKey {
	if len(name) > 5 && name[:5] == "node-" {
		return client.ObjectKey{Name: name}
	}
	return client.ObjectKey{Namespace: testNS, Name: name}
}

// collectGarbage deletes the Pods of members that are gone, as the garbage
// collector does for owned objects.
func (h *harness) collectGarbage() {
	h.t.Helper()
	var pods corev1.PodList
	h.g.Expect(h.c.List(context.Background(), &pods, client.InNamespace(testNS))).To(Succeed())
	for i := range pods.Items {
		p := &pods.Items[i]
		if !h.exists(p.Labels[v1alpha1.MemberLabel]) {
			h.g.Expect(h.c.Delete(context.Background(), p)).To(Succeed())
		}
	}
}

func ptrQuantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func errUnreachable() error { return etcdfake.ErrUnreachable }
