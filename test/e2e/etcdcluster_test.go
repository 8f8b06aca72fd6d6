//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

const keyCount = 1000

// TestEtcdClusterLifecycle is the core acceptance test: bootstrap to Ready,
// 1,000 keys, scaling 3 → 5 → 3 → 1 → 3 with every key on every member after
// each step, and deletion followed by a fresh cluster of the same name. The
// operator restart in the middle of a learner add is its own serial test,
// TestOperatorRestartDuringLearnerAdd, so that this one, which disturbs
// nobody, runs beside the other parallel tests.
func TestEtcdClusterLifecycle(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "core")
	const name = "core"

	cluster := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.EtcdClusterSpec{
			Replicas:       ptr.To[int32](3),
			MemberTemplate: v1alpha1.MemberTemplate{Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("256Mi"))}},
		},
	}
	g.Expect(c.Create(ctx, cluster)).To(Succeed())
	t.Log("3 members: kubectl wait --for=condition=Ready")
	wait := env.Kubectl(ctx, "wait", "-n", ns, "etcdcluster/"+name, "--for=condition=Ready", "--timeout=5m")
	g.Expect(wait.Err).NotTo(HaveOccurred(), "%s%s", wait.Stdout, wait.Stderr)
	first := expectServing(ctx, t, c, ns, name, 3, 0)
	// The short name means the cluster alone, so kubectl scale and describe
	// with it cannot hit the members.
	short := env.Kubectl(ctx, "get", "etcd", "-n", ns, "-o", "name")
	g.Expect(short.Err).NotTo(HaveOccurred())
	g.Expect(strings.Fields(short.Stdout)).To(Equal([]string{"etcdcluster.etcd.quorumctl.io/" + name}))

	t.Log("1,000 keys through the client Service")
	svc, err := env.ClientServiceEndpoint(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	etcdc, err := framework.EtcdClient(svc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(framework.PutKeys(ctx, etcdc, "lifecycle", keyCount)).To(Succeed())
	etcdc.Close()

	for _, replicas := range []int32{5, 3, 1, 3} {
		t.Logf("scale to %d", replicas)
		scale(ctx, t, c, ns, name, replicas)
		got := expectServing(ctx, t, c, ns, name, int(replicas), keyCount)
		g.Expect(got.Status.ClusterID).To(Equal(first.Status.ClusterID), "scaling never changes the cluster")
	}

	t.Log("delete the cluster: every child goes, no volume is left behind")
	g.Expect(c.Delete(ctx, first)).To(Succeed())
	g.Expect(framework.WaitFor(ctx, 3*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		return nothingLeft(ctx, c, ns, name)
	})).To(Succeed())

	t.Log("a same-named cluster starts empty, with new cluster and member IDs")
	again := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1)},
	}
	g.Expect(c.Create(ctx, again)).To(Succeed())
	second, err := framework.WaitForClusterReady(ctx, c, ns, name, 5*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second.Status.ClusterID).NotTo(Equal(first.Status.ClusterID))
	oldIDs := map[string]bool{}
	for _, m := range first.Status.Members {
		oldIDs[m.ID] = true
	}
	for _, m := range second.Status.Members {
		g.Expect(oldIDs).NotTo(HaveKey(m.ID), "member %s reuses an ID of the first cluster", m.Name)
	}
	eps, err := env.MemberEndpoints(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(framework.CheckKeys(ctx, eps[0], "lifecycle", 0)).To(Succeed(), "the new cluster must be empty")
}

// TestOperatorRestartDuringLearnerAdd: a 1-member cluster with keys is
// scaled to 3, and every operator Pod is deleted while etcd lists a learner
// that is not yet promoted. The new operator finds the add half done from
// what it observes, finishes it, and the cluster ends with 3 voters holding
// every key. It is serial because the operator restart reaches every
// cluster of the suite.
func TestOperatorRestartDuringLearnerAdd(t *testing.T) {
	framework.Serial(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "restart-add")
	const name, keys = "restart-add", 100
	g.Expect(c.Create(ctx, &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.EtcdClusterSpec{
			Replicas:       ptr.To[int32](1),
			MemberTemplate: v1alpha1.MemberTemplate{Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("256Mi"))}},
		},
	})).To(Succeed())
	first, err := framework.WaitForClusterReady(ctx, c, ns, name, 5*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	svc, err := env.ClientServiceEndpoint(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	etcdc, err := framework.EtcdClient(svc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(framework.PutKeys(ctx, etcdc, "lifecycle", keys)).To(Succeed())
	etcdc.Close()

	t.Log("scale 1 → 3, restarting the operator while a learner is being added")
	patchReplicas(ctx, t, c, ns, name, 3)
	g.Expect(framework.WaitFor(ctx, 2*time.Minute, 50*time.Millisecond, func(ctx context.Context) (bool, error) {
		return memberBeingAdded(ctx, c, ns, name)
	})).To(Succeed(), "a member should be mid-add")
	del := env.Kubectl(ctx, "delete", "pod", "-n", framework.OperatorNamespace(), "-l", framework.OperatorSelector, "--wait=false")
	g.Expect(del.Err).NotTo(HaveOccurred())
	_, err = framework.WaitForClusterReady(ctx, c, ns, name, 6*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	got := expectServing(ctx, t, c, ns, name, 3, keys)
	g.Expect(got.Status.ClusterID).To(Equal(first.Status.ClusterID), "the restart never changes the cluster")
	// The next serial test must find an operator to work with.
	g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
}

func scale(ctx context.Context, t *testing.T, c client.Client, ns, name string, replicas int32) {
	t.Helper()
	patchReplicas(ctx, t, c, ns, name, replicas)
	if _, err := framework.WaitForClusterReady(ctx, c, ns, name, 6*time.Minute); err != nil {
		t.Fatalf("cluster did not become Ready at %d replicas: %v", replicas, err)
	}
}

func patchReplicas(ctx context.Context, t *testing.T, c client.Client, ns, name string, replicas int32) {
	t.Helper()
	cl := &v1alpha1.EtcdCluster{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cl); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cl.DeepCopy())
	cl.Spec.Replicas = ptr.To(replicas)
	if err := c.Patch(ctx, cl, patch); err != nil {
		t.Fatal(err)
	}
}

// expectServing checks a Ready cluster from etcd's side: n ready Pods, n
// EtcdMembers, every member's own member list naming the same n voters and no
// learner, and every key readable from every member directly.
// expectServing waits for the cluster to be Ready with n members and checks
// every member directly: same membership, no learner, no orphan, and, when
// keys > 0, the first keys lifecycle keys on each member's own store.
func expectServing(ctx context.Context, t *testing.T, c client.Client, ns, name string, n, keys int) *v1alpha1.EtcdCluster {
	t.Helper()
	g := NewWithT(t)
	cl, err := framework.WaitForClusterReady(ctx, c, ns, name, 6*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cl.Status.ReadyMembers).To(Equal(int32(n)))
	g.Expect(cl.Status.ClusterID).NotTo(BeEmpty())

	var members v1alpha1.EtcdMemberList
	g.Expect(c.List(ctx, &members, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ClusterLabel: name})).To(Succeed())
	g.Expect(members.Items).To(HaveLen(n))
	var names []string
	for _, m := range members.Items {
		names = append(names, m.Name)
	}
	sort.Strings(names)

	pods, err := env.MemberPods(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(n))
	for member, p := range pods {
		g.Expect(framework.PodReady(p)).To(BeTrue(), "pod of %s not ready", member)
		g.Expect(p.Labels).To(HaveKeyWithValue(v1alpha1.RoleLabel, v1alpha1.RoleLabelVoter), "%s must be behind the client Service", member)
	}

	eps, err := env.MemberEndpoints(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	var reference *framework.MemberView
	for _, ep := range eps {
		view, err := framework.MemberListAt(ctx, ep)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(view.Learners).To(BeZero(), "%s lists a learner", ep)
		g.Expect(view.Members).To(HaveLen(n), "%s lists %v", ep, view.Members)
		g.Expect(fmt.Sprintf("%016x", view.ClusterID)).To(Equal(cl.Status.ClusterID))
		if reference == nil {
			reference = &view
		} else {
			g.Expect(view.Members).To(Equal(reference.Members), "members disagree about the membership")
		}
		if keys > 0 {
			g.Expect(framework.CheckKeys(ctx, ep, "lifecycle", keys)).To(Succeed(), "keys on %s", ep)
		}
	}
	for _, entry := range reference.Members {
		found := false
		for _, n := range names {
			if len(entry) > len(n) && entry[:len(n)+1] == n+" " {
				found = true
			}
		}
		g.Expect(found).To(BeTrue(), "etcd member %q has no EtcdMember (orphan or duplicate)", entry)
	}
	return cl
}

// memberBeingAdded reports an EtcdMember that etcd lists as a learner: added
// to the membership, not yet promoted.
func memberBeingAdded(ctx context.Context, c client.Client, ns, name string) (bool, error) {
	var members v1alpha1.EtcdMemberList
	if err := c.List(ctx, &members, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ClusterLabel: name}); err != nil {
		return false, err
	}
	for _, m := range members.Items {
		if m.Status.Role == v1alpha1.MemberRoleLearner && m.Status.MemberID != "" {
			return true, nil
		}
	}
	return false, nil
}

func nothingLeft(ctx context.Context, c client.Client, ns, name string) (bool, error) {
	sel := client.MatchingLabels{v1alpha1.ClusterLabel: name}
	var members v1alpha1.EtcdMemberList
	var pods corev1.PodList
	var pvcs corev1.PersistentVolumeClaimList
	var svcs corev1.ServiceList
	var configMaps corev1.ConfigMapList
	var pdbs policyv1.PodDisruptionBudgetList
	for _, list := range []client.ObjectList{&members, &pods, &pvcs, &svcs, &configMaps, &pdbs} {
		if err := c.List(ctx, list, client.InNamespace(ns), sel); err != nil {
			return false, err
		}
	}
	// The volumes went with their claims (reclaim policy Delete).
	var pvs corev1.PersistentVolumeList
	if err := c.List(ctx, &pvs); err != nil {
		return false, err
	}
	volumes := 0
	for _, pv := range pvs.Items {
		if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == ns {
			volumes++
		}
	}
	cl := &v1alpha1.EtcdCluster{}
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cl)
	if client.IgnoreNotFound(err) != nil {
		return false, err
	}
	left := len(members.Items) + len(pods.Items) + len(pvcs.Items) + len(svcs.Items) +
		len(configMaps.Items) + len(pdbs.Items) + volumes
	return err != nil && left == 0, nil
}
