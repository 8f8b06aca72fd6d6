//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// TestSchedulingDefaults checks the member Pods the scheduler actually
// placed: by default a preferred one-member-per-node anti-affinity and a soft
// zone spread; a user's affinity replaces the default instead of being merged
// with it; defaultScheduling: Disabled adds nothing.
func TestSchedulingDefaults(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "sched")

	nodes, err := env.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodes.Items).NotTo(BeEmpty())
	// Satisfiable (on the first node), and unlike anything the operator adds.
	userAffinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn,
				Values: []string{nodes.Items[0].Labels[corev1.LabelHostname]},
			}},
		}}},
	}}
	clusters := map[string]func(*v1alpha1.EtcdCluster){
		"defaults": func(*v1alpha1.EtcdCluster) {},
		"own":      func(cl *v1alpha1.EtcdCluster) { cl.Spec.Affinity = userAffinity.DeepCopy() },
		"none": func(cl *v1alpha1.EtcdCluster) {
			cl.Spec.DefaultScheduling = v1alpha1.DefaultSchedulingDisabled
		},
	}
	for name, customise := range clusters {
		cl := &v1alpha1.EtcdCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1alpha1.EtcdClusterSpec{
				Replicas:       ptr.To[int32](1),
				MemberTemplate: v1alpha1.MemberTemplate{Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("256Mi"))}},
			},
		}
		customise(cl)
		g.Expect(c.Create(ctx, cl)).To(Succeed(), name)
	}
	pod := func(name string) *corev1.Pod {
		t.Helper()
		_, err := framework.WaitForClusterReady(ctx, c, ns, name, 5*time.Minute)
		g.Expect(err).NotTo(HaveOccurred(), name)
		pods, err := env.MemberPods(ctx, ns, name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods).To(HaveLen(1), name)
		for _, p := range pods {
			g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), "%s was scheduled", name)
			return p
		}
		return nil
	}

	t.Log("defaults: preferred anti-affinity on the hostname among the cluster's own members, soft zone spread")
	p := pod("defaults")
	g.Expect(p.Spec.Affinity).NotTo(BeNil())
	g.Expect(p.Spec.Affinity.NodeAffinity).To(BeNil())
	g.Expect(p.Spec.Affinity.PodAntiAffinity).NotTo(BeNil())
	g.Expect(p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty(),
		"required anti-affinity would leave members of a one-node cluster unschedulable")
	preferred := p.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	g.Expect(preferred).To(HaveLen(1))
	g.Expect(preferred[0].PodAffinityTerm.TopologyKey).To(Equal(corev1.LabelHostname))
	g.Expect(preferred[0].PodAffinityTerm.LabelSelector.MatchLabels).To(Equal(map[string]string{v1alpha1.ClusterLabel: "defaults"}))
	g.Expect(p.Spec.TopologySpreadConstraints).To(HaveLen(1))
	g.Expect(p.Spec.TopologySpreadConstraints[0].TopologyKey).To(Equal(corev1.LabelTopologyZone))
	g.Expect(p.Spec.TopologySpreadConstraints[0].WhenUnsatisfiable).To(Equal(corev1.ScheduleAnyway))

	t.Log("a user's affinity replaces the default, unmerged")
	p = pod("own")
	g.Expect(p.Spec.Affinity).To(Equal(userAffinity))

	t.Log("defaultScheduling: Disabled adds nothing")
	p = pod("none")
	g.Expect(p.Spec.Affinity).To(BeNil())
	g.Expect(p.Spec.TopologySpreadConstraints).To(BeEmpty())
}
