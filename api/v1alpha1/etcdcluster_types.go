package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultEtcdVersion is the etcd release a cluster runs when spec.version is
// empty; it must match ETCD_DEFAULT_VERSION in versions.env and the default
// marker on MemberTemplate.Version.
const DefaultEtcdVersion = "3.6.16"

// EtcdClusterSpec is the desired state of an etcd cluster.
//
// +kubebuilder:validation:XValidation:rule="!has(self.version) || !has(oldSelf.version) || (self.version.split('.')[0] == oldSelf.version.split('.')[0] && int(self.version.split('.')[1]) - int(oldSelf.version.split('.')[1]) <= 1 && int(oldSelf.version.split('.')[1]) - int(self.version.split('.')[1]) <= 1)",message="spec.version may change by one minor release at a time (3.5 to 3.6, then 3.6 to 3.7): etcd supports neither upgrades nor downgrades that skip a minor"
// +kubebuilder:validation:XValidation:rule="!(has(self.storage) && has(self.storage.medium) && self.storage.medium == 'Memory' && has(self.replicas) && self.replicas == 0)",message="a Memory cluster cannot be paused (replicas: 0): its data lives only in the members' memory and would be lost"
// +kubebuilder:validation:XValidation:rule="!(has(self.storage) && has(self.storage.medium) && self.storage.medium == 'Memory' && has(self.disasterRecovery) && has(self.disasterRecovery.automatic) && self.disasterRecovery.automatic == 'FromSurvivor')",message="disasterRecovery.automatic FromSurvivor is not possible for a Memory cluster: a survivor's data does not outlive the restart recovery needs; use FromSnapshot"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.tls) || has(self.tls)",message="spec.tls cannot be removed: turning TLS off is refused (it would take authentication away from peers and clients; restore a snapshot into a new plaintext cluster instead). Turning TLS on is allowed"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.tls) || !has(self.tls) || ((has(self.tls.client) && has(self.tls.client.mutual) ? self.tls.client.mutual : true) == (has(oldSelf.tls.client) && has(oldSelf.tls.client.mutual) ? oldSelf.tls.client.mutual : true) && (has(self.tls.operatorManaged) ? has(oldSelf.tls.operatorManaged) && self.tls.operatorManaged == oldSelf.tls.operatorManaged : !has(oldSelf.tls.operatorManaged)))",message="spec.tls.client.mutual and spec.tls.operatorManaged cannot be changed on an existing cluster once TLS is set; of spec.tls only the certificate sources (OperatorManaged, Secret, CertManager) may change"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.auth) || !has(oldSelf.auth.enabled) || !oldSelf.auth.enabled || (has(self.auth) && has(self.auth.enabled) && self.auth.enabled)",message="spec.auth.enabled cannot be turned off once it is on: the operator does not turn etcd's authentication off"
// +kubebuilder:validation:XValidation:rule="has(self.bootstrap) == has(oldSelf.bootstrap)",message="spec.bootstrap cannot be added or removed after creation"
type EtcdClusterSpec struct {
	// Replicas is the number of etcd members. Use an odd number: 3 tolerates
	// one failure, 5 tolerates two. 0 pauses the cluster: members are
	// removed down to one, whose Pod is then deleted while its volume and
	// identity are kept; raising replicas wakes it with all its data.
	// +kubebuilder:default=3
	// At most 9: every write waits for a majority of the voters, so each
	// member beyond that slows writes and elections for little more fault
	// tolerance.
	// +kubebuilder:validation:XValidation:rule="self >= 0",message="replicas cannot be negative"
	// +kubebuilder:validation:XValidation:rule="self <= 9",message="replicas must be at most 9: every etcd write waits for a majority of the members, so beyond that raft's commits and elections slow down for little more fault tolerance (etcd recommends 3, 5 or 7)"
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// ProgressDeadlineSeconds is how long the operator works towards a target
	// (bootstrap, a scale, a spec change, or a pass of a CA rotation) before
	// it reports the target as stalled. Like a Deployment's, it is a report, not a stop: the operator
	// keeps working towards the target, and self-heal keeps running.
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	// +optional
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// SelfHeal tunes when broken members are replaced.
	// +kubebuilder:default={}
	// +optional
	SelfHeal SelfHealSpec `json:"selfHeal,omitempty"`

	// Rollout controls how a change of the member template (version,
	// resources, options, scheduling, metadata, image repository, storage)
	// reaches running members: one member at a time, followers first and
	// the leader last.
	// +optional
	Rollout RolloutSpec `json:"rollout,omitempty"`

	// DisasterRecovery lets the operator recover from a lost quorum by
	// itself. Off by default: a recovery is otherwise always a person's
	// explicit EtcdRecovery (or kubectl etcd recover).
	// +optional
	DisasterRecovery DisasterRecoverySpec `json:"disasterRecovery,omitempty"`

	// Bootstrap says how the cluster starts: empty, or restored from a
	// snapshot. It is set at creation and never changes.
	// +optional
	Bootstrap *BootstrapSpec `json:"bootstrap,omitempty"`

	// Maintenance is the care the operator gives the cluster by itself:
	// defragmentation, and recovery from a NOSPACE alarm.
	// +kubebuilder:default={}
	// +optional
	Maintenance MaintenanceSpec `json:"maintenance,omitempty"`

	// TLS turns on TLS between members and on the client port; tls: {}
	// means operator-managed certificates with mutual client TLS. Added to
	// a running cluster it is turned on in two passes of restarts, one
	// member at a time (status.tls.transition); once set it cannot be
	// changed or removed.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// Auth turns on etcd's authentication (users, roles and root's
	// password), also on a running cluster. It cannot be turned off.
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`

	// NetworkPolicy is the NetworkPolicy the operator keeps for the
	// cluster, on by default: the client port admits the operator, the
	// cluster's snapshot Jobs, its members and the allowed clients; the peer
	// port the members only. See docs/security.md.
	// +kubebuilder:default={}
	// +optional
	NetworkPolicy NetworkPolicySpec `json:"networkPolicy,omitempty"`

	MemberTemplate `json:",inline"`
}

// AutomaticRecovery names the recovery the operator starts by itself.
// +kubebuilder:validation:Enum=FromSurvivor;FromSnapshot
type AutomaticRecovery string

const (
	// AutomaticFromSurvivor recovers from the member that has applied the
	// most, keeping the cluster ID.
	AutomaticFromSurvivor AutomaticRecovery = "FromSurvivor"
	// AutomaticFromSnapshot recovers from the latest successful snapshot.
	AutomaticFromSnapshot AutomaticRecovery = "FromSnapshot"
)

// DefaultRecoveryAfterSeconds is DisasterRecoverySpec.AfterSeconds when unset.
const DefaultRecoveryAfterSeconds = 300

// DisasterRecoverySpec is the policy for a quorum lost for good: fewer than
// a quorum of voters answer, and self-heal has judged enough of the others
// gone (lost or corrupt data, a lost node) that the quorum cannot come back.
type DisasterRecoverySpec struct {
	// Automatic, when set, makes the operator create an EtcdRecovery itself
	// once the quorum has been lost for AfterSeconds. It is guarded like a
	// person's (never while a quorum answers, never from a member behind
	// another, never forced), but a recovery loses the writes that only the
	// lost members had, which a person might have brought back by repairing
	// a node instead: see docs/disaster-recovery.md.
	// +optional
	Automatic AutomaticRecovery `json:"automatic,omitempty"`

	// AfterSeconds is how long the quorum must have been lost for good
	// before an automatic recovery starts.
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=30
	// +optional
	AfterSeconds *int32 `json:"afterSeconds,omitempty"`
}

// After is AfterSeconds with its default applied.
func (d DisasterRecoverySpec) After() time.Duration {
	if d.AfterSeconds == nil {
		return DefaultRecoveryAfterSeconds * time.Second
	}
	return time.Duration(*d.AfterSeconds) * time.Second
}

// RolloutSpec controls rollouts of member-template changes.
type RolloutSpec struct {
	// Paused holds a rollout between members: the member being updated
	// finishes, and no other is touched until this is false again. It holds
	// a CA rotation's restarts and its switch to the new CA's certificates
	// too. Self-heal and scaling go on.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// SnapshotBeforeUpgrade takes a snapshot of the cluster before every
	// version upgrade: when spec.version moves a member to a newer etcd, the
	// operator first creates an EtcdSnapshot to this destination (owned by
	// the cluster, named <cluster>-preupgrade-<version>-<generation>), waits
	// for it to succeed, and only then restarts the first member. A failed
	// snapshot stops the upgrade (PreUpgradeSnapshotFailed) and changes
	// nothing; any edit of the spec (a fixed destination, say) tries again.
	// Other rollouts (resources, options, a CA rotation) and a rollback to
	// the version the members ran take no snapshot.
	// +optional
	SnapshotBeforeUpgrade *PreUpgradeSnapshotSpec `json:"snapshotBeforeUpgrade,omitempty"`
}

// PreUpgradeSnapshotSpec says where the snapshot before a version upgrade
// goes.
type PreUpgradeSnapshotSpec struct {
	// Destination is where the snapshot is written: the same destination an
	// EtcdSnapshot names, with the same rules (credentials in a Secret of
	// the namespace; http:// only with s3.insecure).
	// +kubebuilder:validation:XValidation:rule="!has(self.s3) || !has(self.s3.endpoint) || self.s3.endpoint.startsWith('https://') || (has(self.s3.insecure) && self.s3.insecure)",message="s3.endpoint must be https:// unless s3.insecure is true: over http the snapshot, every key of the cluster, crosses the network in clear"
	Destination SnapshotDestination `json:"destination"`
}

// DefaultNodeLostAfterSeconds is SelfHealSpec.NodeLostAfterSeconds when unset.
const DefaultNodeLostAfterSeconds = 60

// SelfHealSpec tunes self-heal. Self-heal itself cannot be switched off: a
// member judged beyond restarting is always replaced once the quorum allows.
type SelfHealSpec struct {
	// NodeLostAfterSeconds is how long a member's node may be NotReady or
	// unreachable (or cordoned while the member's Pod cannot run) before the
	// member is replaced by a new one on another node. For a node that
	// stopped reporting, it counts from its kubelet's last Lease renewal
	// (so the node controller's grace period is not added to it); otherwise
	// from the node condition's last change. Too short, and a node that reboots
	// quickly costs its member a full resync; too long, and the cluster runs
	// a member short.
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=0
	// +optional
	NodeLostAfterSeconds *int32 `json:"nodeLostAfterSeconds,omitempty"`
}

// NodeLostAfter is NodeLostAfterSeconds with its default applied.
func (s SelfHealSpec) NodeLostAfter() time.Duration {
	if s.NodeLostAfterSeconds == nil {
		return DefaultNodeLostAfterSeconds * time.Second
	}
	return time.Duration(*s.NodeLostAfterSeconds) * time.Second
}

// ObservedClusterSpec is the target the operator is working towards: the
// spec as last adopted. Each pass adopts the spec as it stands, so an edit
// takes effect even while members are broken; what is half-done when it
// changes (a member being added) is finished or undone first.
type ObservedClusterSpec struct {
	Replicas int32 `json:"replicas"`

	MemberTemplate `json:",inline"`
}

// MemberRole is a member's place in etcd's membership.
// +kubebuilder:validation:Enum=Voter;Learner
type MemberRole string

const (
	// MemberRoleVoter votes in raft and serves clients.
	MemberRoleVoter MemberRole = "Voter"
	// MemberRoleLearner replicates the log but neither votes nor serves clients.
	MemberRoleLearner MemberRole = "Learner"
)

// MemberSummary is one member as the cluster sees it.
type MemberSummary struct {
	// Name of the EtcdMember and of its Pod.
	Name string `json:"name"`
	// ID is etcd's member ID in hex, once known.
	// +optional
	ID string `json:"id,omitempty"`
	// Role in etcd's membership, once known.
	// +optional
	Role MemberRole `json:"role,omitempty"`
	// Ready is true when the member's Pod is ready and etcd lists the member.
	Ready bool `json:"ready"`
	// Version is the etcd version the member runs.
	// +optional
	Version string `json:"version,omitempty"`
	// Updated is true when the member runs the current target template.
	// +optional
	Updated bool `json:"updated,omitempty"`
}

// EtcdClusterStatus is the observed state of an etcd cluster.
type EtcdClusterStatus struct {
	// ObservedGeneration is the generation whose spec the operator has
	// adopted as its target (status.observed).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions, each written on every pass: Available (a quorum of voters
	// is healthy and the client Service has a ready voter), Ready (every
	// desired member is a ready voter and nothing is in flight), Progressing
	// (working towards the adopted target), MembersHealthy (no member is
	// broken beyond restarting), VersionsAligned (every member runs the same
	// etcd), Maintenance (defragmentation or NOSPACE recovery is due, under
	// way, or stuck), and the kstatus pair Reconciling and Stalled. The reasons of
	// each are listed in api/v1alpha1/etcdcluster_conditions.go.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Observed is the target the operator is working towards: the spec as
	// last adopted.
	// +optional
	Observed *ObservedClusterSpec `json:"observed,omitempty"`

	// ProgressDeadline is when the current target is reported as stalled if
	// it has not been reached.
	// +optional
	ProgressDeadline *metav1.Time `json:"progressDeadline,omitempty"`

	// ClusterID is etcd's cluster ID in hex, latched once the seed has formed
	// the cluster. Once set, no member is ever started with
	// --initial-cluster-state=new again.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`

	// ClusterToken is etcd's --initial-cluster-token, unique to this object.
	// +optional
	ClusterToken string `json:"clusterToken,omitempty"`

	// Selector selects the member Pods, for the scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`

	// ReadyMembers counts members whose Pod is ready and whom etcd lists.
	// +optional
	ReadyMembers int32 `json:"readyMembers,omitempty"`

	// UpdatedMembers counts members that run the current target template;
	// a rollout is done when it equals the number of members.
	// +optional
	UpdatedMembers int32 `json:"updatedMembers,omitempty"`

	// CurrentVersion is the etcd version every member runs, or the lowest
	// one while a rollout has them on different versions.
	// +optional
	CurrentVersion string `json:"currentVersion,omitempty"`

	// MinorSince records when every member came to run the current minor
	// release: the release and the leader's raft index at that moment. etcd
	// 3.7 cannot replay log entries written before its cluster ran 3.6, so
	// an upgrade to the next minor waits until every member has taken a raft
	// snapshot since then.
	// +optional
	MinorSince *MinorMark `json:"minorSince,omitempty"`

	// PreUpgradeSnapshot is the snapshot spec.rollout.snapshotBeforeUpgrade
	// asked for before the current version upgrade, and where it is. It is
	// kept after the upgrade, and replaced by the next upgrade's.
	// +optional
	PreUpgradeSnapshot *PreUpgradeSnapshotStatus `json:"preUpgradeSnapshot,omitempty"`

	// BrokenMembers counts members self-heal has judged beyond restarting:
	// lost or corrupt data, a diverged view, a lost Memory Pod, a crash loop.
	// +optional
	BrokenMembers int32 `json:"brokenMembers,omitempty"`

	// Members summarises each member.
	// +optional
	// +listType=map
	// +listMapKey=name
	Members []MemberSummary `json:"members,omitempty"`

	// QuorumLoss is set while fewer than a quorum of voters answer: which
	// members are gone and why, and what each member that still answers
	// reported on its own endpoint. The QuorumLost condition says whether
	// the quorum can come back by itself.
	// +optional
	QuorumLoss *QuorumLoss `json:"quorumLoss,omitempty"`

	// Recovery is the disaster recovery the cluster is going through, or
	// went through last until its EtcdRecovery is finished.
	// +optional
	Recovery *ClusterRecovery `json:"recovery,omitempty"`

	// TLS is where the cluster's certificates and trust stand.
	// +optional
	TLS *TLSStatus `json:"tls,omitempty"`

	// Auth is where etcd's authentication stands, once spec.auth asked
	// for it.
	// +optional
	Auth *AuthStatus `json:"auth,omitempty"`

	// RestoredFrom is the snapshot the cluster was created from, once its
	// source has been checked.
	// +optional
	RestoredFrom *RestoredFrom `json:"restoredFrom,omitempty"`

	// RestoreChoice is the snapshot spec.bootstrap.restore.fromSchedule
	// chose, latched when it was chosen.
	// +optional
	RestoreChoice *RestoreChoice `json:"restoreChoice,omitempty"`

	// Maintenance records the defragmentations and NOSPACE recoveries the
	// operator did; the Maintenance condition says what it is doing now.
	// +optional
	Maintenance *MaintenanceStatus `json:"maintenance,omitempty"`
}

// QuorumLoss describes a cluster whose voters do not make a quorum.
type QuorumLoss struct {
	// Voters is the number of voters in the membership the members that
	// answer know of; a quorum is more than half of them.
	Voters int32 `json:"voters"`

	// LostAt is when the quorum was first seen lost for good (the
	// QuorumLost condition True): too few voters are left, even counting
	// those that only do not answer, for a quorum to come back. Unset while
	// the outage may still be transient.
	// +optional
	LostAt *metav1.Time `json:"lostAt,omitempty"`

	// Gone are the voters that do not answer: with self-heal's verdict when
	// it has one, and without when a member only does not answer.
	// +optional
	// +listType=atomic
	Gone []GoneMember `json:"gone,omitempty"`

	// Survivors are the members that answer on their own endpoint, with
	// the raft index and revision each reported this pass.
	// +optional
	// +listType=atomic
	Survivors []SurvivorReport `json:"survivors,omitempty"`
}

// MinorMark is a point in a cluster's raft log.
type MinorMark struct {
	// Minor is an etcd minor release, such as 3.6.
	Minor string `json:"minor"`
	// RaftIndex is the leader's raft index when every member ran it.
	RaftIndex int64 `json:"raftIndex"`
}

// EtcdCluster is an etcd cluster run by the operator.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.readyMembers,selectorpath=.status.selector
// +kubebuilder:resource:shortName=etcd;etcds,categories=etcd-all
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyMembers`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.updatedMembers`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec EtcdClusterSpec `json:"spec,omitempty"`
	// +optional
	Status EtcdClusterStatus `json:"status,omitempty"`
}

// EtcdClusterList is a list of EtcdClusters.
//
// +kubebuilder:object:root=true
type EtcdClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdCluster `json:"items"`
}

// DesiredReplicas is spec.replicas with its default applied.
func (c *EtcdCluster) DesiredReplicas() int32 {
	if c.Spec.Replicas == nil {
		return 3
	}
	return *c.Spec.Replicas
}

// ClusterFormed reports whether the seed has formed the cluster: from then on
// an empty data dir means lost data, never a pending bootstrap.
func (c *EtcdCluster) ClusterFormed() bool { return c.Status.ClusterID != "" }

// Restore is spec.bootstrap.restore, or nil.
func (c *EtcdCluster) Restore() *RestoreSpec {
	if c.Spec.Bootstrap == nil {
		return nil
	}
	return c.Spec.Bootstrap.Restore
}

// PreUpgradeSnapshotStatus names the snapshot taken before an upgrade.
type PreUpgradeSnapshotStatus struct {
	// Version is the etcd version of the upgrade the snapshot precedes.
	Version string `json:"version"`
	// Name is the EtcdSnapshot's, in the cluster's namespace.
	Name string `json:"name"`
	// Generation is the cluster's metadata.generation the snapshot was
	// asked for in. A failed snapshot is tried again, under a new name,
	// once the generation moves past it.
	Generation int64 `json:"generation"`
	// Phase is the snapshot's phase as the operator last saw it.
	// +optional
	Phase SnapshotPhase `json:"phase,omitempty"`
}
