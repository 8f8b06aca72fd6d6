//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// refusalReported bounds how long a refusal may take to show: the member
// controller reports it in the pass that makes the create, and a snapshot
// within a minute (issue 30's acceptance).
const refusalReported = time.Minute

// A member whose Pod the API server refuses (its PriorityClass does not
// exist) says so with the API server's message on the member and on the
// cluster; once the PriorityClass exists, the Pod is created on the
// controller's retry, the cluster becomes Ready, and the report is gone.
func TestRefusedMemberPodIsReported(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	g := NewWithT(t)
	g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "refused-pod")
	// Cluster-scoped, so named after the test's own namespace.
	priority := "e2e-" + ns
	g.Expect(c.Create(ctx, &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: ns},
		Spec: v1alpha1.EtcdClusterSpec{
			Replicas: ptr.To(int32(1)),
			MemberTemplate: v1alpha1.MemberTemplate{PriorityClassName: priority,
				Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("1Gi"))}},
		},
	})).To(Succeed())

	var member *v1alpha1.EtcdMember
	err = framework.WaitFor(ctx, refusalReported, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		var list v1alpha1.EtcdMemberList
		if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ClusterLabel: "main"}); err != nil {
			return false, err
		}
		for i := range list.Items {
			cond := meta.FindStatusCondition(list.Items[i].Status.Conditions, v1alpha1.MemberReadyCondition)
			if cond != nil && cond.Reason == v1alpha1.MemberPodCreateFailedReason {
				member = &list.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	g.Expect(err).NotTo(HaveOccurred(), "the member reports the refusal")
	cond := meta.FindStatusCondition(member.Status.Conditions, v1alpha1.MemberReadyCondition)
	g.Expect(cond.Message).To(ContainSubstring("no PriorityClass with name " + priority))

	cl, err := framework.WaitForClusterCondition(ctx, c, ns, "main", v1alpha1.MembersHealthyCondition,
		metav1.ConditionFalse, v1alpha1.MemberPodRefusedReason, refusalReported)
	g.Expect(err).NotTo(HaveOccurred(), "the cluster reports it too")
	g.Expect(meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.MembersHealthyCondition).Message).
		To(And(ContainSubstring(member.Name), ContainSubstring("no PriorityClass with name "+priority)))

	events, err := env.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var warned bool
	for _, e := range events.Items {
		warned = warned || e.Reason == v1alpha1.MemberPodCreateFailedReason && e.Type == corev1.EventTypeWarning && e.InvolvedObject.Name == member.Name
	}
	g.Expect(warned).To(BeTrue(), "a Warning Event on the member")

	t.Log("creating the PriorityClass; the refusal clears by itself")
	_, err = env.Clientset.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: priority}, Value: 1000,
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_ = env.Clientset.SchedulingV1().PriorityClasses().Delete(context.Background(), priority, metav1.DeleteOptions{})
	})
	_, err = framework.WaitForClusterReady(ctx, c, ns, "main", 10*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = framework.WaitForClusterCondition(ctx, c, ns, "main", v1alpha1.MembersHealthyCondition,
		metav1.ConditionTrue, v1alpha1.AllMembersHealthyReason, refusalReported)
	g.Expect(err).NotTo(HaveOccurred())
	p, err := env.Clientset.CoreV1().Pods(ns).Get(ctx, member.Name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Spec.PriorityClassName).To(Equal(priority))
}

// A snapshot fails within a minute with the reason the Pod could not run:
// a credentials Secret that does not exist (the agent finds no credentials)
// and a Pod the API server refuses (a quota the Job's Pod would exceed;
// the Job controller would otherwise retry it until the Job's deadline).
func TestRefusedSnapshotPodFailsTheSnapshot(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	b := newBackupEnv(ctx, t, "refused-snap")
	b.cluster(ctx, "main", 1, "", nil)
	b.ready(ctx, "main")

	create := func(name string, dest v1alpha1.SnapshotDestination) *v1alpha1.EtcdSnapshot {
		b.g.Expect(b.c.Create(ctx, &v1alpha1.EtcdSnapshot{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns},
			Spec:       v1alpha1.EtcdSnapshotSpec{ClusterName: "main", Destination: dest},
		})).To(Succeed())
		s, err := framework.WaitForSnapshot(ctx, b.c, b.ns, name, refusalReported)
		b.g.Expect(err).NotTo(HaveOccurred(), "the snapshot ends within a minute")
		b.g.Expect(s.Status.Phase).To(Equal(v1alpha1.SnapshotFailed))
		return s
	}

	dest := framework.S3Destination(b.prefix)
	dest.S3.CredentialsSecretName = "no-such-secret"
	s := create("missing-secret", dest)
	b.g.Expect(succeeded(s).Reason).To(Equal(v1alpha1.CredentialsInvalidReason))

	t.Log("a quota that leaves no room for the snapshot Job's Pod")
	pods, err := env.MemberPods(ctx, b.ns, "main")
	b.g.Expect(err).NotTo(HaveOccurred())
	hard := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(len(pods)), resource.DecimalSI)}
	_, err = env.Clientset.CoreV1().ResourceQuotas(b.ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-room"},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	}, metav1.CreateOptions{})
	b.g.Expect(err).NotTo(HaveOccurred())
	// Admission counts against the quota's status, which the quota
	// controller fills in.
	err = framework.WaitFor(ctx, time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		q, err := env.Clientset.CoreV1().ResourceQuotas(b.ns).Get(ctx, "no-room", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		used, ok := q.Status.Used[corev1.ResourcePods]
		return ok && used.Value() == int64(len(pods)), nil
	})
	b.g.Expect(err).NotTo(HaveOccurred())

	s = create("no-room", framework.S3Destination(b.prefix))
	b.g.Expect(succeeded(s).Reason).To(Equal(v1alpha1.SnapshotPodCreateFailedReason))
	b.g.Expect(succeeded(s).Message).To(ContainSubstring("exceeded quota"))
}
