package etcdmember

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

const (
	ns     = "ns"
	domain = "cluster.local"
)

type fixture struct {
	g    *WithT
	c    client.Client
	etcd *etcdfake.Fake
	r    *Reconciler
}

func newFixture(t *testing.T, clusterDeleting bool, members ...string) *fixture {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	cluster := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns, UID: "c-uid"}}
	if clusterDeleting {
		now := metav1.Now()
		cluster.DeletionTimestamp = &now
		cluster.Finalizers = []string{"test/hold"}
	}
	objs := []client.Object{cluster}
	f := &fixture{g: NewWithT(t), etcd: etcdfake.New()}
	for _, name := range members {
		m := &v1alpha1.EtcdMember{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: v1alpha1.ClusterLabels("demo"),
				Finalizers: []string{v1alpha1.MemberFinalizer}},
			Spec:   v1alpha1.EtcdMemberSpec{ClusterName: "demo", InitialCluster: "x", ClusterToken: "t"},
			Status: v1alpha1.EtcdMemberStatus{PodName: name},
		}
		objs = append(objs, m)
		f.etcd.AddVoter(name, v1alpha1.PeerURL(name, "demo", ns, domain), v1alpha1.ClientURL(name, "demo", ns, domain))
	}
	f.c = fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.EtcdMember{}).Build()
	f.r = &Reconciler{Client: f.c, Dialer: f.etcd, ClusterDomain: domain}
	return f
}

func (f *fixture) deleteAndReconcile(name string) ctrl.Result {
	ctx := context.Background()
	m := &v1alpha1.EtcdMember{}
	f.g.Expect(f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, m)).To(Succeed())
	f.g.Expect(f.c.Delete(ctx, m)).To(Succeed())
	res, err := f.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	f.g.Expect(err).NotTo(HaveOccurred())
	return res
}

func (f *fixture) gone(name string) bool {
	err := f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &v1alpha1.EtcdMember{})
	return client.IgnoreNotFound(err) == nil && err != nil
}

func TestFinalizer_RemovesFromEtcdThenReleases(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	victim := f.etcd.Members()[2]
	f.deleteAndReconcile("demo-c")
	f.g.Expect(f.etcd.Removed).To(Equal([]uint64{victim.ID}))
	f.g.Expect(f.gone("demo-c")).To(BeTrue())
}

func TestFinalizer_QuorumGateHoldsTheMember(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	f.etcd.SetEndpointError(v1alpha1.ClientURL("demo-b", "demo", ns, domain), etcdfake.ErrUnreachable)
	res := f.deleteAndReconcile("demo-c")
	f.g.Expect(f.etcd.Removed).To(BeEmpty(), "two voters would remain with one healthy: below quorum")
	f.g.Expect(f.gone("demo-c")).To(BeFalse())
	f.g.Expect(res.RequeueAfter).To(BeNumerically(">", time.Duration(0)))
}

func TestFinalizer_SkipsEtcdWhenClusterIsDeleting(t *testing.T) {
	f := newFixture(t, true, "demo-a", "demo-b")
	f.deleteAndReconcile("demo-b")
	f.g.Expect(f.etcd.Removed).To(BeEmpty())
	f.g.Expect(f.etcd.Dialed).To(BeEmpty())
	f.g.Expect(f.gone("demo-b")).To(BeTrue())
}

func TestFinalizer_AlreadyRemovedMemberIsReleased(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b")
	b := f.etcd.Members()[1]
	_, err := f.etcd.MemberRemove(context.Background(), b.ID)
	f.g.Expect(err).NotTo(HaveOccurred())
	f.etcd.Removed = nil
	f.deleteAndReconcile("demo-b")
	f.g.Expect(f.etcd.Removed).To(BeEmpty())
	f.g.Expect(f.gone("demo-b")).To(BeTrue())
}

func TestReadiness(t *testing.T) {
	g := NewWithT(t)
	ready := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	m := &v1alpha1.EtcdMember{Spec: v1alpha1.EtcdMemberSpec{InitialCluster: "x"}}
	_, reason, _ := readiness(m, ready)
	g.Expect(reason).To(Equal(v1alpha1.MemberNotListedReason), "a ready Pod is not enough until etcd lists the member")
	m.Status.MemberID = "abc"
	status, _, _ := readiness(m, ready)
	g.Expect(status).To(Equal(metav1.ConditionTrue))
	_, reason, _ = readiness(&v1alpha1.EtcdMember{}, nil)
	g.Expect(reason).To(Equal(v1alpha1.MemberPendingReason))
}

func TestFinalizer_TakesTheMemberOutOfClientTrafficFirst(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	ctx := context.Background()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-c", Namespace: ns, Labels: map[string]string{
		v1alpha1.ClusterLabel: "demo", v1alpha1.RoleLabel: v1alpha1.RoleLabelVoter,
	}}}
	f.g.Expect(f.c.Create(ctx, p)).To(Succeed())
	// The quorum gate holds the removal, as it may for a fenced member.
	f.etcd.SetEndpointError(v1alpha1.ClientURL("demo-b", "demo", ns, domain), etcdfake.ErrUnreachable)
	f.deleteAndReconcile("demo-c")
	f.g.Expect(f.gone("demo-c")).To(BeFalse())
	f.g.Expect(f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "demo-c"}, p)).To(Succeed())
	f.g.Expect(p.Labels).NotTo(HaveKey(v1alpha1.RoleLabel), "the client Service must not route to a member on its way out")
}

func TestFinalizer_AHealthyMemberWaitsForAQuorumOfTheTarget(t *testing.T) {
	// Two voters of a three-member cluster (the third was removed, broken,
	// and its replacement is still joining): giving up a healthy one now
	// would leave a single voter.
	f := newFixture(t, false, "demo-a", "demo-b")
	f.deleteAndReconcile("demo-a")
	f.g.Expect(f.etcd.Removed).To(BeEmpty())
	f.g.Expect(f.gone("demo-a")).To(BeFalse())
}

func TestFinalizer_ABrokenMemberLeavesWhateverTheTarget(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b")
	a := f.etcd.Members()[0]
	f.etcd.SetEndpointError(v1alpha1.ClientURL("demo-a", "demo", ns, domain), etcdfake.ErrUnreachable)
	f.deleteAndReconcile("demo-a")
	f.g.Expect(f.etcd.Removed).To(Equal([]uint64{a.ID}), "a dead voter adds nothing to the quorum")
	f.g.Expect(f.gone("demo-a")).To(BeTrue())
}

func TestFinalizer_AMemberThatSeesNoLeaderIsNotCountedHealthy(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	b := f.etcd.Members()[1]
	f.etcd.SetStatus(v1alpha1.ClientURL("demo-b", "demo", ns, domain), etcd.EndpointStatus{MemberID: b.ID, ClusterID: etcdfake.DefaultClusterID})
	f.deleteAndReconcile("demo-c")
	f.g.Expect(f.etcd.Removed).To(BeEmpty(), "demo-b answers but follows no leader")
}

func TestFinalizer_ForceDeletesThePodOfAMemberOnALostNode(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	ctx := context.Background()
	lost := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-c"}}
	lost.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
	f.g.Expect(f.c.Create(ctx, lost)).To(Succeed())
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-c", Namespace: ns, Labels: map[string]string{v1alpha1.ClusterLabel: "demo"}},
		Spec: corev1.PodSpec{NodeName: "node-c"}}
	f.g.Expect(f.c.Create(ctx, p)).To(Succeed())
	f.etcd.SetEndpointError(v1alpha1.ClientURL("demo-c", "demo", ns, domain), etcdfake.ErrUnreachable)
	f.deleteAndReconcile("demo-c")
	f.g.Expect(f.gone("demo-c")).To(BeTrue())
	err := f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "demo-c"}, &corev1.Pod{})
	f.g.Expect(err).To(HaveOccurred(), "the Pod does not wait for a kubelet that is not there")
}

func TestFinalizer_LeavesThePodOfAMemberOnAReadyNodeToTheGarbageCollector(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-c"}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	f.g.Expect(f.c.Create(ctx, n)).To(Succeed())
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-c", Namespace: ns, Labels: map[string]string{v1alpha1.ClusterLabel: "demo"}},
		Spec: corev1.PodSpec{NodeName: "node-c"}}
	f.g.Expect(f.c.Create(ctx, p)).To(Succeed())
	f.deleteAndReconcile("demo-c")
	f.g.Expect(f.gone("demo-c")).To(BeTrue())
	f.g.Expect(f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "demo-c"}, &corev1.Pod{})).To(Succeed(), "a graceful stop, by the garbage collector")
}
