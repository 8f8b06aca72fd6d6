package remediation

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// NodeState is whether the node a member lives on can run it.
type NodeState struct {
	// Name of the node; "" when the member has never been scheduled.
	Name string
	// Unavailable: the node is gone, not Ready, or cordoned while the
	// member's Pod cannot run elsewhere.
	Unavailable bool
	// Since is when it became unavailable: for a node that stopped
	// reporting, when it was last heard from; otherwise when the cluster
	// recorded the change.
	Since time.Time
	// Why says how, for the Event and condition.
	Why string
}

// Node judges the node a member was last scheduled to. node is nil when no
// Node of that name exists. podRunning says whether the member's Pod is
// running on the node right now: a cordoned node still runs what it has, and
// only a Pod that has to be placed again (after a drain, say) is stranded
// by it, because its volume is bound there. unschedulableSince is when the
// member's Pod was last found unschedulable, if it is. lastHeard is when the
// node's kubelet last renewed its Lease, or zero when that is not known.
//
// A node that stops reporting is marked Unknown only after the node
// controller's grace period (40 s by default), and the condition's
// transition records that moment, not the silence before it. Counting the
// bound from the last renewal instead makes selfHeal.nodeLostAfterSeconds
// mean what it says, how long the node has been gone, whatever grace period
// the cluster runs with. The renewal is used only when it precedes the
// transition: a later one means the kubelet is back and the condition is
// about to change.
func Node(name string, node *corev1.Node, podRunning bool, unschedulableSince, lastHeard time.Time) NodeState {
	st := NodeState{Name: name}
	switch {
	case name == "":
		return st
	case node == nil:
		// A deleted Node is an explicit statement that the machine is gone.
		st.Unavailable, st.Why = true, fmt.Sprintf("node %s no longer exists", name)
		return st
	}
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady || c.Status == corev1.ConditionTrue {
			continue
		}
		st.Unavailable, st.Since = true, c.LastTransitionTime.Time
		if c.Status == corev1.ConditionUnknown {
			if !lastHeard.IsZero() && lastHeard.Before(st.Since) {
				st.Since = lastHeard
			}
			st.Why = fmt.Sprintf("node %s is unreachable (its kubelet stopped reporting)", name)
		} else {
			st.Why = fmt.Sprintf("node %s is not ready: %s", name, c.Message)
		}
		return st
	}
	if node.Spec.Unschedulable && !podRunning && !unschedulableSince.IsZero() {
		st.Unavailable, st.Since = true, unschedulableSince
		st.Why = fmt.Sprintf("node %s is cordoned and the member's Pod, bound there by its volume, cannot be scheduled", name)
	}
	return st
}

// UnschedulableSince is when the Pod's scheduler condition last turned to
// Unschedulable, or zero when it is scheduled or not known to be stuck.
func UnschedulableSince(p *corev1.Pod) time.Time {
	if p == nil || p.Spec.NodeName != "" {
		return time.Time{}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
