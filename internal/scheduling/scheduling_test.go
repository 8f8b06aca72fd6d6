package scheduling

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

func TestAdmits(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a", "disk": "ssd"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "dedicated", Value: "etcd", Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule},
			{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule},
		}},
	}
	tolerateDedicated := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "etcd", Effect: corev1.TaintEffectNoSchedule}}
	affinity := func(op corev1.NodeSelectorOperator, values ...string) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: op, Values: values}}}}}}}
	}
	cases := []struct {
		name string
		t    v1alpha1.MemberTemplate
		want bool
		why  string
	}{
		{"matching selector, tolerated taint", v1alpha1.MemberTemplate{NodeSelector: map[string]string{"disk": "ssd"}, Tolerations: tolerateDedicated}, true, ""},
		{"a label the node lacks", v1alpha1.MemberTemplate{NodeSelector: map[string]string{"disk": "hdd"}, Tolerations: tolerateDedicated}, false, "node selector"},
		{"required affinity met", v1alpha1.MemberTemplate{Affinity: affinity(corev1.NodeSelectorOpIn, "a", "b"), Tolerations: tolerateDedicated}, true, ""},
		{"required affinity not met", v1alpha1.MemberTemplate{Affinity: affinity(corev1.NodeSelectorOpNotIn, "a"), Tolerations: tolerateDedicated}, false, "required node affinity"},
		{"an untolerated taint", v1alpha1.MemberTemplate{}, false, "dedicated=etcd:NoSchedule"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ok, why := Admits(node, tc.t)
			g.Expect(ok).To(Equal(tc.want))
			g.Expect(why).To(ContainSubstring(tc.why))
		})
	}
}

func TestChanged(t *testing.T) {
	g := NewWithT(t)
	base := v1alpha1.MemberTemplate{Version: "3.6.16", NodeSelector: map[string]string{"a": "b"}}
	other := base
	other.Version = "3.6.17"
	g.Expect(Changed(base, other)).To(BeFalse(), "a version change is no scheduling change")
	other.NodeSelector = nil
	g.Expect(Changed(base, other)).To(BeTrue())
}
