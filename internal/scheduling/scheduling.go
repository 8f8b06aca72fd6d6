// Package scheduling decides whether a node can run a member built from a
// template: the part of the scheduler's judgement that a member on a volume
// bound to one node depends on.
package scheduling

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// Changed reports whether the scheduling rules of two templates differ: only
// then can a member's node stop meeting them.
func Changed(from, to v1alpha1.MemberTemplate) bool {
	return !equality.Semantic.DeepEqual(from.NodeSelector, to.NodeSelector) ||
		!equality.Semantic.DeepEqual(from.Affinity, to.Affinity) ||
		!equality.Semantic.DeepEqual(from.Tolerations, to.Tolerations)
}

// Admits reports whether the node meets the template's node selector, its
// required node affinity, and tolerates the node's taints; if not, why. The
// node lifecycle's own taints (node.kubernetes.io/...: not ready,
// unreachable, cordoned) are left out: they say the node is away for now,
// which self-heal judges over time, not that the rules exclude it.
func Admits(node *corev1.Node, t v1alpha1.MemberTemplate) (bool, string) {
	ok, err := nodeaffinity.NewRequiredNodeAffinity(t.NodeSelector, t.Affinity).Match(node)
	switch {
	case err != nil:
		return false, fmt.Sprintf("the template's node affinity cannot be read: %v", err)
	case !ok:
		return false, fmt.Sprintf("node %s does not match the template's node selector or required node affinity", node.Name)
	}
	taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, t.Tolerations,
		func(t *corev1.Taint) bool {
			return (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) &&
				!strings.HasPrefix(t.Key, "node.kubernetes.io/")
		}, false)
	if untolerated {
		return false, fmt.Sprintf("node %s has the taint %s, which the template does not tolerate", node.Name, taint.ToString())
	}
	return true, ""
}
