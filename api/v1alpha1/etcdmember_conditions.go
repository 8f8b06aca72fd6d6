package v1alpha1

// Condition types of an EtcdMember.
const (
	// MemberReadyCondition is True when the member's Pod is ready and etcd
	// lists the member.
	MemberReadyCondition = "Ready"
)

// Reasons of the member Ready condition.
const (
	// MemberReadyReason: the Pod is ready and etcd lists the member.
	MemberReadyReason = "PodReady"
	// MemberPendingReason: the member is still being added to etcd; its Pod
	// is not created until etcd's member list is copied into the spec.
	MemberPendingReason = "Adding"
	// MemberPodNotReadyReason: the Pod exists but is not ready.
	MemberPodNotReadyReason = "PodNotReady"
	// MemberPodMissingReason: the Pod does not exist (yet).
	MemberPodMissingReason = "PodMissing"
	// MemberNotListedReason: the Pod is ready but etcd's member list does not
	// (yet) name this member.
	MemberNotListedReason = "NotListed"
	// MemberRemovingReason: the member is being removed from etcd.
	MemberRemovingReason = "Removing"
	// MemberDormantReason: the member of a paused cluster; no Pod runs.
	MemberDormantReason = "Dormant"
	// MemberPodLostReason: a Memory member's Pod is gone; its data went with
	// it, so the Pod is not re-created and the member is replaced.
	MemberPodLostReason = "PodLost"
	// MemberPodCreateFailedReason: the API server refused to create the
	// member's Pod (a missing PriorityClass, an annotation it rejects, a
	// quota, an admission policy); the message is the API server's. The
	// create is retried with backoff, and the condition clears by itself
	// once the cause is gone.
	MemberPodCreateFailedReason = "PodCreateFailed"
)
