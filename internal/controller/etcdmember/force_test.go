package etcdmember

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
)

// recovering records, as the cluster controller does, that a recovery from
// survivor is under way.
func (f *fixture) recovering(survivor string, restored bool) {
	ctx := context.Background()
	cl := &v1alpha1.EtcdCluster{}
	f.g.Expect(f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "demo"}, cl)).To(Succeed())
	cl.Status.ClusterID = "00000000000000aa"
	cl.Status.Recovery = &v1alpha1.ClusterRecovery{Name: "rec", Source: v1alpha1.RecoveryFromSurvivor, Survivor: survivor}
	if restored {
		now := metav1.Now()
		cl.Status.Recovery.RestoredAt = &now
	}
	f.g.Expect(f.c.Update(ctx, cl)).To(Succeed())
}

// A member a recovery stopped is released without a MemberRemove: no quorum
// is left to commit one, and --force-new-cluster drops it anyway.
func TestFinalizer_ReleasesMembersARecoveryStopsWithoutEtcd(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	f.etcd.SetLeader(0)
	f.recovering("demo-a", false)
	f.deleteAndReconcile("demo-b")
	f.g.Expect(f.gone("demo-b")).To(BeTrue())
	f.g.Expect(f.etcd.Removed).To(BeEmpty())
	f.g.Expect(f.etcd.Dialed).To(BeEmpty(), "etcd is not even asked")
}

// Once the survivor answers alone, members are removed through etcd again:
// a learner added to grow the cluster back must leave etcd's list when it
// goes.
func TestFinalizer_AfterARecoveryMembersLeaveThroughEtcd(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	f.recovering("demo-a", true)
	victim := f.etcd.Members()[2]
	f.deleteAndReconcile("demo-c")
	f.g.Expect(f.etcd.Removed).To(Equal([]uint64{victim.ID}))
}

func TestFinalizer_TheSurvivorItselfIsNeverReleasedUnremoved(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	f.etcd.SetLeader(0)
	f.recovering("demo-a", false)
	f.deleteAndReconcile("demo-a")
	f.g.Expect(f.gone("demo-a")).To(BeFalse(), "without a quorum, the survivor's removal waits like any other")
}

func (f *fixture) reconcile(name string) {
	_, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	f.g.Expect(err).NotTo(HaveOccurred())
}

func (f *fixture) member(name string) *v1alpha1.EtcdMember {
	m := &v1alpha1.EtcdMember{}
	f.g.Expect(f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, m)).To(Succeed())
	return m
}

func (f *fixture) pod(name string) (*corev1.Pod, bool) {
	p := &corev1.Pod{}
	err := f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, p)
	return p, err == nil
}

func (f *fixture) startupConfig(name string) map[string]string {
	cm := &corev1.ConfigMap{}
	f.g.Expect(f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: v1alpha1.StartupConfigName(name)}, cm)).To(Succeed())
	return cm.Data
}

// The survivor's flag reaches its etcd through a Pod created after the
// ConfigMap holds it; the Pod that ran before is re-created on the same
// volume, and clearing the flag restarts nothing.
func TestForceNewCluster_RecreatesThePodOnceAndClearsWithoutARestart(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false, "demo-a")
	m := f.member("demo-a")
	m.Spec.Version = v1alpha1.DefaultEtcdVersion
	f.g.Expect(f.c.Update(ctx, m)).To(Succeed())
	f.reconcile("demo-a")
	before, ok := f.pod("demo-a")
	f.g.Expect(ok).To(BeTrue())
	f.g.Expect(f.startupConfig("demo-a")).NotTo(HaveKey(v1alpha1.StartupForceNewClusterKey))
	f.g.Expect(f.member("demo-a").Status.ForceNewCluster).To(BeFalse())

	m = f.member("demo-a")
	m.Spec.ForceNewCluster = true
	f.g.Expect(f.c.Update(ctx, m)).To(Succeed())
	f.reconcile("demo-a")
	f.g.Expect(f.startupConfig("demo-a")).To(HaveKeyWithValue(v1alpha1.StartupForceNewClusterKey, "true"), "the flag is in place before the Pod goes")
	_, ok = f.pod("demo-a")
	f.g.Expect(ok).To(BeFalse(), "the Pod that started without the flag is deleted")
	f.g.Expect(f.member("demo-a").Status.ForceNewCluster).To(BeTrue())

	f.reconcile("demo-a")
	forced, ok := f.pod("demo-a")
	f.g.Expect(ok).To(BeTrue())
	f.g.Expect(pod.StartedToForce(forced.Annotations)).To(BeTrue())
	f.g.Expect(forced.Spec.Volumes).To(Equal(before.Spec.Volumes), "on its own volume")
	// The fake API server assigns no UIDs; a mark of our own tells a
	// re-created Pod from the same one.
	forced.Labels["test/mark"] = "forced"
	f.g.Expect(f.c.Update(ctx, forced)).To(Succeed())
	f.reconcile("demo-a")
	again, ok := f.pod("demo-a")
	f.g.Expect(ok).To(BeTrue(), "a Pod built to force is not restarted again")
	f.g.Expect(again.Labels).To(HaveKeyWithValue("test/mark", "forced"))

	m = f.member("demo-a")
	m.Spec.ForceNewCluster = false
	f.g.Expect(f.c.Update(ctx, m)).To(Succeed())
	f.reconcile("demo-a")
	f.g.Expect(f.startupConfig("demo-a")).NotTo(HaveKey(v1alpha1.StartupForceNewClusterKey))
	f.g.Expect(f.member("demo-a").Status.ForceNewCluster).To(BeFalse())
	after, ok := f.pod("demo-a")
	f.g.Expect(ok).To(BeTrue(), "clearing the flag restarts nothing")
	f.g.Expect(after.Labels).To(HaveKeyWithValue("test/mark", "forced"))
	f.g.Expect(pod.StartedToForce(after.Annotations)).To(BeFalse(), "so that a later recovery from this member restarts it again")
}
