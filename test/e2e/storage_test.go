//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
	"github.com/quorumctl/etcd-operator/test/localcluster"
)

// TestPauseResume parks a 3-member cluster at replicas 0 and wakes it: the
// same cluster, the same member, every key.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "pause")
	const name = "pause"
	g.Expect(c.Create(ctx, &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3),
			MemberTemplate: v1alpha1.MemberTemplate{Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("256Mi"))}}},
	})).To(Succeed())
	before, err := framework.WaitForClusterReady(ctx, c, ns, name, 5*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	svc, err := env.ClientServiceEndpoint(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	cli, err := framework.EtcdClient(svc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(framework.PutKeys(ctx, cli, "lifecycle", keyCount)).To(Succeed())
	cli.Close()

	t.Log("replicas 0: no etcd Pod, one volume, Paused")
	patchReplicas(ctx, t, c, ns, name, 0)
	paused, err := framework.WaitForClusterReady(ctx, c, ns, name, 5*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	av := meta.FindStatusCondition(paused.Status.Conditions, v1alpha1.AvailableCondition)
	g.Expect(av.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(av.Reason).To(Equal(v1alpha1.PausedReason))
	pods, err := env.MemberPods(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(BeEmpty())
	var pvcs corev1.PersistentVolumeClaimList
	g.Expect(c.List(ctx, &pvcs, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ClusterLabel: name})).To(Succeed())
	g.Expect(pvcs.Items).To(HaveLen(1))
	var members v1alpha1.EtcdMemberList
	g.Expect(c.List(ctx, &members, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ClusterLabel: name})).To(Succeed())
	g.Expect(members.Items).To(HaveLen(1))
	dormant := members.Items[0]
	g.Expect(dormant.Spec.Dormant).To(BeTrue())
	g.Expect(av.Message).To(ContainSubstring(v1alpha1.DataVolumeClaimName(dormant.Name)))

	t.Log("replicas 3: the same cluster ID, the woken member keeps its ID, every key everywhere")
	resumed := time.Now()
	patchReplicas(ctx, t, c, ns, name, 3)
	g.Expect(framework.WaitFor(ctx, 5*time.Minute, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		cl := &v1alpha1.EtcdCluster{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cl); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(cl.Status.Conditions, v1alpha1.AvailableCondition), nil
	})).To(Succeed())
	t.Logf("resume 0 -> 3: Available after %s", time.Since(resumed).Round(100*time.Millisecond))
	after := expectServing(ctx, t, c, ns, name, 3, keyCount)
	t.Logf("resume 0 -> 3: Ready, every key on every member, after %s", time.Since(resumed).Round(100*time.Millisecond))
	g.Expect(after.Status.ClusterID).To(Equal(before.Status.ClusterID))
	woken := ""
	for _, m := range after.Status.Members {
		if m.Name == dormant.Name {
			woken = m.ID
		}
	}
	g.Expect(woken).To(Equal(dormant.Status.MemberID), "the woken member keeps its member ID")
}

// TestMemoryCluster: members on tmpfs bootstrap, serve, and really are on tmpfs.
func TestMemoryCluster(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "memory")
	const name = "mem"
	g.Expect(c.Create(ctx, &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3), MemberTemplate: v1alpha1.MemberTemplate{
			Storage: v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: ptr.To(resource.MustParse("256Mi"))},
		}},
	})).To(Succeed())
	_, err = framework.WaitForClusterReady(ctx, c, ns, name, 5*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	svc, err := env.ClientServiceEndpoint(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	cli, err := framework.EtcdClient(svc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(framework.PutKeys(ctx, cli, "lifecycle", 100)).To(Succeed())
	cli.Close()
	eps, err := env.MemberEndpoints(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	for _, ep := range eps {
		g.Expect(framework.CheckKeys(ctx, ep, "lifecycle", 100)).To(Succeed())
	}
	pods, err := env.MemberPods(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(3))
	var pvcs corev1.PersistentVolumeClaimList
	g.Expect(c.List(ctx, &pvcs, client.InNamespace(ns))).To(Succeed())
	g.Expect(pvcs.Items).To(BeEmpty(), "Memory members have no volume claim")
	for member := range pods {
		code, err := env.RunEphemeral(ctx, ns, member, `grep -q " /var/lib/etcd tmpfs " /proc/mounts`)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(code).To(BeZero(), "%s: the data dir must be on tmpfs", member)
		// etcd logs this, and keeps serving until its next WAL cut, when the
		// tmpfs cannot hold the next preallocated WAL file.
		logs, err := env.Clientset.CoreV1().Pods(ns).GetLogs(member, &corev1.PodLogOptions{Container: "etcd"}).DoRaw(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(logs)).NotTo(ContainSubstring("failed to preallocate space"), "%s: the tmpfs must hold etcd's WAL files", member)
	}
}

// TestEtcdVersions: one cluster per supported minor line reaches Available
// and reports the version it really runs.
func TestEtcdVersions(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "versions")
	for _, v := range env.Versions.Etcd {
		version := strings.TrimPrefix(v, "v")
		name := "v" + strings.ReplaceAll(version, ".", "-")
		g.Expect(c.Create(ctx, &v1alpha1.EtcdCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1),
				MemberTemplate: v1alpha1.MemberTemplate{Version: version}},
		})).To(Succeed())
	}
	for _, v := range env.Versions.Etcd {
		version := strings.TrimPrefix(v, "v")
		name := "v" + strings.ReplaceAll(version, ".", "-")
		g.Expect(framework.WaitFor(ctx, 5*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
			cl := &v1alpha1.EtcdCluster{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cl); err != nil {
				return false, err
			}
			av := meta.IsStatusConditionTrue(cl.Status.Conditions, v1alpha1.AvailableCondition)
			return av && len(cl.Status.Members) == 1 && cl.Status.Members[0].Version == version, nil
		})).To(Succeed(), "etcd %s should be Available and report its version", version)
		var members v1alpha1.EtcdMemberList
		g.Expect(c.List(ctx, &members, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ClusterLabel: name})).To(Succeed())
		g.Expect(members.Items).To(HaveLen(1))
		g.Expect(framework.WaitFor(ctx, time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
			m := &v1alpha1.EtcdMember{}
			err := c.Get(ctx, client.ObjectKeyFromObject(&members.Items[0]), m)
			return err == nil && m.Status.Version == version, err
		})).To(Succeed(), "the member's status.version should say %s", version)
	}
}

// TestPrivateImageRepository: with the operator pointed at a mirror, no member
// Pod names the default registry. The local images are tagged under the
// mirror's name too, so nothing is pulled from anywhere.
func TestPrivateImageRepository(t *testing.T) {
	framework.Serial(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const mirror = "registry.internal.example/mirror/etcd"
	bins, err := env.Layout.EnsureBinaries(ctx, localcluster.NewProgress(nil), env.Versions)
	g.Expect(err).NotTo(HaveOccurred())
	version := "v" + strings.TrimPrefix(env.Versions.EtcdDefault, "v")
	_, err = env.Layout.ImportImage(ctx, localcluster.EtcdImageSpec(mirror+":"+version, bins.Etcd[version]))
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(env.SetOperatorEnv(ctx, t, "ETCD_IMAGE_REPOSITORY", mirror)).To(Succeed())
	defer func() {
		g.Expect(env.SetOperatorEnv(context.Background(), t, "ETCD_IMAGE_REPOSITORY", env.Versions.EtcdImageRepository)).To(Succeed())
	}()

	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "mirror")
	g.Expect(c.Create(ctx, &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "mirror", Namespace: ns},
		Spec:       v1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1)},
	})).To(Succeed())
	_, err = framework.WaitForClusterReady(ctx, c, ns, "mirror", 5*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	pods, err := env.MemberPods(ctx, ns, "mirror")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(1))
	for _, p := range pods {
		for _, ctr := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			g.Expect(ctr.Image).To(HavePrefix(mirror+":"), "container %s of %s", ctr.Name, p.Name)
			g.Expect(ctr.Image).NotTo(ContainSubstring(env.Versions.EtcdImageRepository))
		}
	}
}
