package etcdmember

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// observation is what a pass saw of the member's Pod and etcd.
type observation struct {
	pod     *corev1.Pod
	version string
	podLost bool
	dormant bool
	// podRefused is the API server's message when it refused to create
	// the member's Pod this pass.
	podRefused string
}

// updateStatus computes the member's Ready condition and Pod fields. The
// member ID and role are the cluster controller's to write, from etcd's
// member list; they are read here, never set.
func updateStatus(m *v1alpha1.EtcdMember, obs observation) {
	if obs.pod != nil {
		if m.Status.PodUID != obs.pod.UID && obs.version == "" {
			// A new Pod may run another version; forget the old one.
			m.Status.Version = ""
		}
		m.Status.PodName = obs.pod.Name
		m.Status.PodUID = obs.pod.UID
		// Kept when the Pod goes: a member whose volume is bound to a node
		// lives there even while it has no Pod.
		if obs.pod.Spec.NodeName != "" {
			m.Status.NodeName = obs.pod.Spec.NodeName
		}
	}
	if obs.version != "" {
		m.Status.Version = obs.version
	}
	status, reason, msg := readiness(m, obs.pod)
	if obs.dormant {
		m.Status.PodName, m.Status.PodUID = "", ""
		status, reason, msg = metav1.ConditionFalse, v1alpha1.MemberDormantReason,
			"the cluster is paused; the member's data stays on its volume"
	}
	if obs.podLost {
		status, reason, msg = metav1.ConditionFalse, v1alpha1.MemberPodLostReason,
			"the Pod and its tmpfs data are gone; the member is replaced, not restarted"
	}
	if obs.podRefused != "" {
		status, reason, msg = metav1.ConditionFalse, v1alpha1.MemberPodCreateFailedReason, refusedMessage(obs.podRefused)
	}
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{
		Type: v1alpha1.MemberReadyCondition, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: m.Generation,
	})
	m.Status.ObservedGeneration = m.Generation
}

func readiness(m *v1alpha1.EtcdMember, p *corev1.Pod) (metav1.ConditionStatus, string, string) {
	switch {
	case !m.DeletionTimestamp.IsZero():
		return metav1.ConditionFalse, v1alpha1.MemberRemovingReason, "the member is being removed from etcd"
	case m.Pending():
		return metav1.ConditionFalse, v1alpha1.MemberPendingReason, "waiting for the member to be added to etcd"
	case p == nil:
		return metav1.ConditionFalse, v1alpha1.MemberPodMissingReason, "the Pod does not exist"
	case !podReady(p):
		return metav1.ConditionFalse, v1alpha1.MemberPodNotReadyReason, "pod phase " + string(p.Status.Phase)
	case m.Status.MemberID == "":
		return metav1.ConditionFalse, v1alpha1.MemberNotListedReason, "etcd does not list the member yet"
	}
	return metav1.ConditionTrue, v1alpha1.MemberReadyReason, "the Pod is ready and etcd lists the member"
}

// refusedMessage is the Ready message of a member whose Pod the API server
// refused to create.
func refusedMessage(apiMessage string) string {
	return "the API server refused to create the Pod (retried with backoff): " + apiMessage
}

// newRefusal says whether a refusal is not yet what the member reports, so
// that its Warning Event is emitted once per cause, not once per retry.
func newRefusal(m *v1alpha1.EtcdMember, apiMessage string) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.MemberReadyCondition)
	return c == nil || c.Reason != v1alpha1.MemberPodCreateFailedReason || c.Message != refusedMessage(apiMessage)
}
