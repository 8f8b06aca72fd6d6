package pod_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
)

// A stale read of the member (before its ID or first-ready time were
// recorded) or of its cluster (before the cluster ID) computes the values of
// an earlier phase; the ConfigMap must not follow it back.
func TestSyncStartupConfig_OnlyMovesForward(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	booted := newMember(func(m *v1alpha1.EtcdMember) {
		m.Spec.Bootstrap = true
		m.Status.MemberID = "8e9e05c52164694d"
		m.Status.FirstReadyTime = &metav1.Time{}
	})
	var w writes
	c := newClient(&w)
	p := newParams(booted)
	p.ClusterFormed = true
	g.Expect(pod.SyncStartupConfig(ctx, c, p)).To(Succeed())
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: testNS, Name: v1alpha1.StartupConfigName(testMember)}
	g.Expect(c.Get(ctx, key, cm)).To(Succeed())
	g.Expect(cm.Data[v1alpha1.StartupInitialClusterStateKey]).To(Equal(v1alpha1.InitialClusterStateExisting))
	self := cm.Data[v1alpha1.StartupInitialClusterKey]
	g.Expect(self).To(Equal(testInitial), "a booted member names only itself")

	// The same seed as a stale cache shows it: no ID, never ready, and a
	// cluster not yet formed; and a stale member list for good measure.
	stale := newMember(func(m *v1alpha1.EtcdMember) {
		m.Spec.Bootstrap = true
		m.Spec.InitialCluster = testInitial + ",other=http://other:2380"
	})
	sp := newParams(stale)
	g.Expect(v1alpha1.InitialClusterState(stale, false)).To(Equal(v1alpha1.InitialClusterStateNew), "what the stale read alone would give")
	before := w.total()
	g.Expect(pod.SyncStartupConfig(ctx, c, sp)).To(Succeed())
	g.Expect(c.Get(ctx, key, cm)).To(Succeed())
	g.Expect(cm.Data[v1alpha1.StartupInitialClusterStateKey]).To(Equal(v1alpha1.InitialClusterStateExisting), "never back to new")
	g.Expect(cm.Data[v1alpha1.StartupInitialClusterKey]).To(Equal(self), "never back to the full list")
	g.Expect(w.total()).To(Equal(before), "nothing to write")
}

// Clearing the flag takes the key out of the ConfigMap, so the survivor's
// next restart is an ordinary one; forward-only values are untouched.
func TestSyncStartupConfig_ForceNewClusterComesAndGoes(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	m := newMember(func(m *v1alpha1.EtcdMember) {
		m.Status.MemberID = "8e9e05c52164694d"
		m.Status.FirstReadyTime = &metav1.Time{}
		m.Spec.ForceNewCluster = true
	})
	var w writes
	c := newClient(&w)
	p := newParams(m)
	p.ClusterFormed = true
	g.Expect(pod.SyncStartupConfig(ctx, c, p)).To(Succeed())
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: testNS, Name: v1alpha1.StartupConfigName(testMember)}
	g.Expect(c.Get(ctx, key, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue(v1alpha1.StartupForceNewClusterKey, "true"))

	m.Spec.ForceNewCluster = false
	g.Expect(pod.SyncStartupConfig(ctx, c, p)).To(Succeed())
	g.Expect(c.Get(ctx, key, cm)).To(Succeed())
	g.Expect(cm.Data).NotTo(HaveKey(v1alpha1.StartupForceNewClusterKey))
	g.Expect(cm.Data).To(HaveKeyWithValue(v1alpha1.StartupInitialClusterStateKey, v1alpha1.InitialClusterStateExisting))
	g.Expect(cm.Data).To(HaveKeyWithValue(v1alpha1.StartupInitialClusterKey, testInitial))
}
