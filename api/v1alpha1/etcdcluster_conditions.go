package v1alpha1

// Condition types of an EtcdCluster. Every condition is written on every pass
// and always carries one of the reasons below.
const (
	// AvailableCondition is True when etcd has quorum and the client Service
	// has at least one ready voter behind it.
	AvailableCondition = "Available"
	// ReadyCondition is True when every desired member is a ready voter and no
	// operation is in flight: the cluster is what the spec asks for.
	// kubectl wait --for=condition=Ready, helm --wait and GitOps tools use it.
	ReadyCondition = "Ready"
	// ProgressingCondition is True while the operator works towards a target.
	ProgressingCondition = "Progressing"
	// MembersHealthyCondition is False while some member is broken beyond
	// restarting; its message names the member and why.
	MembersHealthyCondition = "MembersHealthy"
	// VersionsAlignedCondition is False while members run different etcd
	// versions, as they do after spec.version changed and before the old
	// members are replaced.
	VersionsAlignedCondition = "VersionsAligned"
	// MaintenanceCondition is True while the operator has maintenance to do
	// on the cluster: a member is due for defragmentation (and waits for
	// its window or for other work), is being defragmented, or a NOSPACE
	// alarm is being recovered from or cannot be without a person. It is
	// False when nothing is due.
	MaintenanceCondition = "Maintenance"
	// ReconcilingCondition and StalledCondition follow the kstatus
	// convention (sigs.k8s.io/cli-utils), which Flux, Argo CD's health
	// checks and Helm 4's --wait read instead of Ready: Reconciling is True
	// while Ready is False and the target's progress deadline has not
	// passed; Stalled is True once it has (DeadlineExceeded) or when the
	// spec cannot be acted on as it stands (ObjectNotOwned). A stall is a
	// report: the operator keeps working, and Stalled clears by itself when
	// the target is reached.
	ReconcilingCondition = "Reconciling"
	StalledCondition     = "Stalled"
	// QuorumLostCondition is True when the quorum is lost for good: fewer
	// than a quorum of voters answer, and self-heal has judged so many of
	// the others gone (lost or corrupt data, a lost node or Memory Pod,
	// removed from the cluster) that a quorum cannot come back by itself.
	// Only an EtcdRecovery brings such a cluster back. While the members
	// that do not answer have no verdict, the outage may be transient and
	// the condition is False (MembersUnreachable). status.quorumLoss names
	// the members gone and the survivors with their raft index and revision.
	QuorumLostCondition = "QuorumLost"
)

// Reasons shared by several conditions.
const (
	// BootstrappingReason: the seed member is forming the cluster.
	BootstrappingReason = "Bootstrapping"
	// DeadlineExceededReason (Stalled=True, Progressing=False): the target
	// (forming the cluster, a scale, a spec change, a pass of a CA rotation)
	// was not reached before the progress deadline. The message says what
	// it is stuck on. The operator keeps working towards the target and
	// self-heal keeps running; the condition clears when the target is
	// reached, the spec changes, or a CA rotation moves to its next pass.
	DeadlineExceededReason = "DeadlineExceeded"
	// EtcdUnreachableReason: no member answered; the operator changes
	// nothing until one does. It asks again after 5 s, then, while none
	// answers, after about 10, 20 and 30 s (the message says when), so that
	// clusters out of its reach do not hold the workers every cluster
	// shares; a spec edit, or a change to the members or their Pods, brings
	// a look at once.
	EtcdUnreachableReason = "EtcdUnreachable"
	// EtcdReplyTooLargeReason (Stalled=True): a member answered with more
	// than the operator reads of one reply (2 MiB from etcd, 4 MiB of
	// metrics), which no etcd it runs sends: the member image is likely not
	// etcd. The operator changes nothing until a member answers within the
	// bound; fix the image.
	EtcdReplyTooLargeReason = "EtcdReplyTooLarge"
	// ScalingUpReason: members are being added, one learner at a time.
	ScalingUpReason = "ScalingUp"
	// ScalingDownReason: members are being removed, one at a time.
	ScalingDownReason = "ScalingDown"
	// PromotingLearnerReason: a caught-up learner is being made a voter.
	PromotingLearnerReason = "PromotingLearner"
	// MembersNotReadyReason: the member count is right but some are not ready.
	MembersNotReadyReason = "MembersNotReady"
	// WaitingForQuorumReason: a membership change waits until removing a
	// member would leave the remaining voters with quorum.
	WaitingForQuorumReason = "WaitingForQuorum"
	// ObjectNotOwnedReason (Ready=False, Stalled=True): an object the
	// cluster needs (a Service, the PodDisruptionBudget) exists under the
	// same name but belongs to someone else. The operator leaves it alone
	// and goes on with everything else, self-heal included; delete or
	// rename the object to clear it.
	ObjectNotOwnedReason = "ObjectNotOwned"
	// NetworkPolicyNotPermittedReason (Ready=False, Stalled=True): the
	// cluster wants its NetworkPolicy (spec.networkPolicy.enabled) but the
	// operator may not manage NetworkPolicies: its role lacks the
	// permission (then it found so when it started, and watches none), or
	// the API server refused a write. Everything else goes on, self-heal
	// included, and the members are as open as without a policy. Grant
	// the permission and restart the operator, or turn the policy off.
	NetworkPolicyNotPermittedReason = "NetworkPolicyNotPermitted"
	// RollingUpdateReason: a member-template change is reaching the
	// members, one at a time; the message names the member and how many
	// are updated.
	RollingUpdateReason = "RollingUpdate"
	// RolloutPausedReason: spec.rollout.paused holds a rollout between
	// members, or a CA rotation (its restarts, or its switch to the new
	// CA's certificates), or KeepOldCAAnnotation holds a CA rotation's
	// drop of the old CA; the message then names the rotation's pass.
	RolloutPausedReason = "RolloutPaused"
	// RolloutFailedReason (Ready=False, Stalled=True): a member updated by
	// the rollout has not come back healthy (it crash-loops, cannot start
	// its image, or does not catch up), so no other member is touched. The
	// message names it. Fix the template or set it back; a member that
	// never came up on the new template is rolled back first.
	RolloutFailedReason = "RolloutFailed"
	// PreUpgradeSnapshotPendingReason (Progressing=True, Ready=False): a
	// version upgrade waits for the snapshot spec.rollout.
	// snapshotBeforeUpgrade asks for (status.preUpgradeSnapshot names it);
	// no member is restarted until it has succeeded. The message has the
	// snapshot's own word on where it is (waiting for its turn, running).
	// Self-heal and scaling go on meanwhile.
	PreUpgradeSnapshotPendingReason = "PreUpgradeSnapshotPending"
	// PreUpgradeSnapshotFailedReason (Ready=False, Stalled=True): the
	// snapshot before a version upgrade failed, so the upgrade has not
	// started and no member was touched; the message has the snapshot's
	// reason. Fix what it names (the destination, its credentials) in the
	// spec, or set spec.version back: any new generation of the spec takes
	// a new snapshot.
	PreUpgradeSnapshotFailedReason = "PreUpgradeSnapshotFailed"
	// VersionChangeRefusedReason (Ready=False, Stalled=True): the version
	// change breaks etcd's upgrade rules for the versions the members run
	// now (a skipped minor, a 3.5 patch too old for 3.6, a downgrade). The
	// message says what to do instead; nothing is rolled and no member is
	// added on the refused version.
	VersionChangeRefusedReason = "VersionChangeRefused"
	// RecoveringReason (Ready=False, Progressing=True, QuorumLost=True): an
	// EtcdRecovery is rebuilding the cluster (status.recovery); nothing
	// else is done to the membership until the cluster answers again.
	RecoveringReason = "Recovering"
	// ReconcileErrorReason (Ready=False): a step of the pass failed, for
	// instance an API request was refused; the message has the error and
	// the pass is retried. The other steps, self-heal included, still ran.
	ReconcileErrorReason = "ReconcileError"
)

// Reasons of the Available condition.
const (
	// PausedReason: replicas is 0; the last member is dormant and its volume
	// holds the data. Also the reason of Progressing and Ready when paused.
	PausedReason = "Paused"
	// NoDataWrittenReason: the cluster was created with replicas 0 and has
	// never run, so there is no data anywhere.
	NoDataWrittenReason = "NoDataWritten"
	// QuorumAvailableReason: a quorum of voters is healthy and serving.
	QuorumAvailableReason = "QuorumAvailable"
	// QuorumLostReason: fewer than a quorum of voters are healthy.
	QuorumLostReason = "QuorumLost"
	// NoReadyVoterReason: quorum holds but no voter Pod is ready, so the
	// client Service has no endpoint.
	NoReadyVoterReason = "NoReadyVoter"
)

// Reasons of the Ready condition.
const (
	// MembersReadyReason: every desired member is a ready voter.
	MembersReadyReason = "MembersReady"
)

// Reasons of the MembersHealthy condition.
const (
	// AllMembersHealthyReason: no member is broken.
	AllMembersHealthyReason = "AllMembersHealthy"
	// ReplacingMemberReason: a broken member is being replaced by a new
	// member with a new member ID.
	ReplacingMemberReason = "ReplacingMember"
	// QuorumGateHoldingReason: a member is broken but replacing it would
	// leave the remaining voters without quorum, so nothing is deleted.
	// Recovering needs a person (or a restore) to bring voters back.
	QuorumGateHoldingReason = "QuorumGateHolding"
	// MemberFencedReason: a ready member's own view of the cluster
	// disagrees with the quorum's in a way a short lag could explain. It is
	// out of the client Service at once, and replaced only if the
	// disagreement lasts; if a later check agrees, it is let back in.
	MemberFencedReason = "MemberFenced"
	// MemberUnschedulableReason: the scheduler has found no place for a
	// member's Pod for a minute (a node selector or affinity that no node
	// meets where its volume lives, a volume that is never provisioned). A
	// replacement would meet the same refusal, so none is made; fix the
	// spec or the nodes. A rollout that led to it stops (RolloutFailed).
	MemberUnschedulableReason = "MemberUnschedulable"
	// MemberCannotJoinReason: a member that has not joined yet failed its
	// first start (etcd refused its member list, or no peer answered it).
	// It holds no data, so it is not replaced: the kubelet restarts it with
	// the member list the operator keeps current.
	MemberCannotJoinReason = "MemberCannotJoin"
	// MemberPodRefusedReason: the API server refuses to create a member's
	// Pod; the message names the member and has the API server's message
	// (its EtcdMember's Ready condition says the same, PodCreateFailed).
	// The member is not replaced: a replacement's Pod would be refused
	// too. The create is retried, and the condition clears by itself.
	MemberPodRefusedReason = "MemberPodRefused"
)

// Reasons of the VersionsAligned condition.
const (
	// SingleVersionReason: every member reports the same etcd version.
	SingleVersionReason = "SingleVersion"
	// MixedVersionsReason: members report different etcd versions.
	MixedVersionsReason = "MixedVersions"
)

// Reasons of the Progressing condition.
const (
	// ReconciledReason: the latched target is reached; nothing is in flight.
	ReconciledReason = "Reconciled"
	// WithinDeadlineReason (Stalled=False): work is in flight and its
	// progress deadline has not passed.
	WithinDeadlineReason = "WithinDeadline"
)

// Reasons of the QuorumLost condition.
const (
	// QuorumHeldReason (False): a quorum of voters answers with a leader.
	QuorumHeldReason = "QuorumHeld"
	// MembersUnreachableReason (False): fewer than a quorum of voters
	// answer, but enough of the others have no self-heal verdict that they
	// may come back: a transient outage, which the operator waits out.
	MembersUnreachableReason = "MembersUnreachable"
	// MembersGoneReason (True): fewer than a quorum of voters answer, and
	// the members self-heal judged gone leave too few for a quorum to come
	// back. The message names the gone members and why, and the survivors.
	// Recover with an EtcdRecovery (kubectl etcd recover); see
	// docs/disaster-recovery.md.
	MembersGoneReason = "MembersGone"
	// NotFormedReason (False): the cluster has not formed yet, or is
	// paused, so there is no quorum to lose.
	NotFormedReason = "NotFormed"
)

// Reasons of the Maintenance condition.
const (
	// MaintenanceIdleReason (False): no member is due for defragmentation
	// and no alarm is active.
	MaintenanceIdleReason = "Idle"
	// DefragDisabledReason (False): spec.maintenance.defrag.enabled is
	// false and no alarm is active.
	DefragDisabledReason = "DefragDisabled"
	// DefragDueReason (True): a member is due for defragmentation and
	// waits: for the window of spec.maintenance.defrag.schedule, for a
	// rollout, a scale or a replacement to finish, or for every member to
	// be healthy and caught up. The message says which.
	DefragDueReason = "DefragDue"
	// DefragmentingReason (True): a member is being defragmented (or
	// leadership is moving away from it first); the message names it.
	DefragmentingReason = "Defragmenting"
	// InvalidDefragScheduleReason (True): spec.maintenance.defrag.schedule does
	// not parse; no routine defragmentation starts until it is fixed. NOSPACE
	// recovery is not affected.
	InvalidDefragScheduleReason = "InvalidSchedule"
	// NoSpaceRecoveringReason (True, and Ready=False): etcd raised NOSPACE
	// and refuses writes; the operator is compacting at the current
	// revision, defragmenting every member and disarming the alarm.
	NoSpaceRecoveringReason = "NoSpaceRecovering"
	// NoSpaceOverQuotaReason (True; Ready=False, Stalled=True): etcd raised
	// NOSPACE and the live data fills the backend quota even after
	// compaction. The operator deletes nothing; raise
	// spec.options.quotaBackendBytes or grow spec.storage.size, and it
	// disarms the alarm once the members run with the larger quota.
	NoSpaceOverQuotaReason = "NoSpaceOverQuota"
	// NoSpaceRecoveryDisabledReason (True; Ready=False, Stalled=True): etcd
	// raised NOSPACE and spec.maintenance.noSpaceRecovery.enabled is false.
	NoSpaceRecoveryDisabledReason = "NoSpaceRecoveryDisabled"
	// CorruptAlarmReason (True; Ready=False, Stalled=True): etcd raised a
	// CORRUPT alarm; the operator neither compacts nor defragments, and a
	// person must find the member whose data differs.
	CorruptAlarmReason = "CorruptAlarm"
)
