package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EtcdRecoverySpec asks for one recovery of an EtcdCluster that has lost its
// quorum for good. It cannot change once created: a recovery that was
// refused or failed is tried again with a new EtcdRecovery, so that what was
// asked for, what the operator planned and what it did stay together.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the spec of an EtcdRecovery cannot be changed; create a new EtcdRecovery to try again"
type EtcdRecoverySpec struct {
	// ClusterName is the EtcdCluster in the same namespace to recover.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClusterName string `json:"clusterName"`

	// Source is what the cluster is rebuilt from: one surviving member's
	// data, or a snapshot.
	Source RecoverySource `json:"source"`

	// Force overrides the guards that protect data: it lets a named
	// survivor that is behind another survivor be used, a snapshot older
	// than source.snapshot.maxAge be restored, and a survivor be used while
	// some missing members are only unreachable rather than judged gone by
	// self-heal. It never overrides the refusal to recover a cluster whose
	// quorum answers: such a cluster needs no recovery.
	// +optional
	Force bool `json:"force,omitempty"`
}

// RecoverySource names exactly one of survivor or snapshot.
//
// +kubebuilder:validation:XValidation:rule="has(self.survivor) != has(self.snapshot)",message="source must set exactly one of survivor or snapshot"
type RecoverySource struct {
	// Survivor restarts one member that still has its data as a new
	// one-member cluster (etcd's --force-new-cluster) and grows the cluster
	// back from it through learners. The cluster ID is kept; what only the
	// lost members had is gone. Not possible for storage.medium Memory,
	// whose data does not outlive the member's Pod.
	// +optional
	Survivor *SurvivorSource `json:"survivor,omitempty"`

	// Snapshot rebuilds the cluster from an EtcdSnapshot, under a new
	// cluster ID; everything written after the snapshot is gone.
	// +optional
	Snapshot *SnapshotSource `json:"snapshot,omitempty"`
}

// SurvivorSource picks the member to recover from.
type SurvivorSource struct {
	// Member is the EtcdMember to recover from. Empty means the member
	// whose own endpoint reports the highest applied raft index. A named
	// member that is behind another survivor is refused unless spec.force
	// is set.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Member string `json:"member,omitempty"`
}

// SnapshotSource picks the snapshot to recover from.
type SnapshotSource struct {
	// SnapshotName is an EtcdSnapshot of the cluster in the same namespace.
	// Empty means the cluster's latest successful snapshot.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	SnapshotName string `json:"snapshotName,omitempty"`

	// MaxAge refuses a snapshot that completed longer ago than this, such
	// as 1h, unless spec.force is set: an old snapshot silently drops every
	// write since. Unset means no bound.
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`

	// Encryption names the age identity (AGE-SECRET-KEY-1…) that decrypts
	// an encrypted snapshot, as spec.bootstrap.restore.encryption does for
	// a restore; a recipient (age1…) cannot. Before anything is changed a
	// Job reads the key from the Secret (the operator never does) and
	// checks it against the key fingerprint the snapshot's metadata
	// records and against the snapshot's age header: a missing, invalid or
	// wrong key refuses the recovery (RecoveryKeyMissing,
	// RecoveryKeyInvalid, RecoveryKeyWrong) and no member is touched.
	// An encrypted snapshot without it is refused with SnapshotEncrypted.
	// It is ignored for a snapshot that is not encrypted.
	// +optional
	Encryption *SnapshotEncryption `json:"encryption,omitempty"`
}

// RecoveryPhase is where a recovery is in its life.
// +kubebuilder:validation:Enum=Pending;Refused;Running;Succeeded;Failed
type RecoveryPhase string

const (
	// RecoveryPending: the operator is judging whether and how to recover.
	RecoveryPending RecoveryPhase = "Pending"
	// RecoveryRefused: a guard refused the recovery; nothing was changed.
	// The Planned condition says why.
	RecoveryRefused RecoveryPhase = "Refused"
	// RecoveryRunning: the plan is recorded and the cluster is being rebuilt.
	RecoveryRunning RecoveryPhase = "Running"
	// RecoverySucceeded: the cluster has a quorum again, rebuilt from the
	// source; it grows back to spec.replicas as in a scale-up.
	RecoverySucceeded RecoveryPhase = "Succeeded"
	// RecoveryFailed: the recovery started but could not finish; the
	// Recovered condition says what is left and what to do.
	RecoveryFailed RecoveryPhase = "Failed"
)

// Terminal reports a phase that never changes again.
func (p RecoveryPhase) Terminal() bool {
	return p == RecoveryRefused || p == RecoverySucceeded || p == RecoveryFailed
}

// RecoverySourceType names the kind of source a recovery uses.
// +kubebuilder:validation:Enum=Survivor;Snapshot
type RecoverySourceType string

const (
	// RecoveryFromSurvivor: one member's own data.
	RecoveryFromSurvivor RecoverySourceType = "Survivor"
	// RecoveryFromSnapshot: an EtcdSnapshot.
	RecoveryFromSnapshot RecoverySourceType = "Snapshot"
)

// SurvivorReport is one member that still answers on its own endpoint, as
// it reported itself.
type SurvivorReport struct {
	// Name of the EtcdMember.
	Name string `json:"name"`
	// ID is etcd's member ID in hex.
	// +optional
	ID string `json:"id,omitempty"`
	// RaftIndex is the member's committed raft index.
	// +optional
	RaftIndex int64 `json:"raftIndex,omitempty"`
	// RaftAppliedIndex is the last raft entry the member applied.
	// +optional
	RaftAppliedIndex int64 `json:"raftAppliedIndex,omitempty"`
	// Revision is the store revision the member has applied.
	// +optional
	Revision int64 `json:"revision,omitempty"`
}

// GoneMember is a member that does not answer, and why.
type GoneMember struct {
	// Name of the EtcdMember.
	Name string `json:"name"`
	// ID is etcd's member ID in hex.
	// +optional
	ID string `json:"id,omitempty"`
	// Reason is self-heal's verdict (DataDirLost, DataCorrupt, NodeLost,
	// PodLost, RemovedFromCluster), or empty for a member that only does
	// not answer.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Detail is what was observed.
	// +optional
	Detail string `json:"detail,omitempty"`
}

// RecoveryPlan is what the operator will do and what it costs, recorded
// before anything is changed.
type RecoveryPlan struct {
	// Source is Survivor or Snapshot.
	Source RecoverySourceType `json:"source"`

	// Survivor is the EtcdMember the cluster is rebuilt from, and
	// SurvivorID its etcd member ID.
	// +optional
	Survivor string `json:"survivor,omitempty"`
	// +optional
	SurvivorID string `json:"survivorID,omitempty"`

	// Snapshot is the EtcdSnapshot the cluster is rebuilt from.
	// +optional
	Snapshot string `json:"snapshot,omitempty"`

	// Revision is the store revision of the survivor or the snapshot: the
	// cluster's data as it will be.
	// +optional
	Revision int64 `json:"revision,omitempty"`

	// BestKnownRevision is the highest revision any member that still
	// answers reported, and BestKnownMember that member. The lost members
	// may have had more; nobody can ask them.
	// +optional
	BestKnownRevision int64 `json:"bestKnownRevision,omitempty"`
	// +optional
	BestKnownMember string `json:"bestKnownMember,omitempty"`

	// RevisionGap is BestKnownRevision minus Revision: how many revisions
	// (each a write transaction) that a member still has are not in the
	// source and will be lost.
	// +optional
	RevisionGap int64 `json:"revisionGap,omitempty"`

	// Survivors are the members that answered when the plan was made.
	// +optional
	// +listType=atomic
	Survivors []SurvivorReport `json:"survivors,omitempty"`

	// Removed are the EtcdMembers that are deleted and replaced by fresh
	// members: their data is not used.
	// +optional
	// +listType=atomic
	Removed []string `json:"removed,omitempty"`

	// Keeps and Loses say in plain words what the recovery keeps and what
	// it loses.
	// +optional
	Keeps string `json:"keeps,omitempty"`
	// +optional
	Loses string `json:"loses,omitempty"`

	// Forced lists the guards spec.force overrode for this plan.
	// +optional
	// +listType=atomic
	Forced []string `json:"forced,omitempty"`
}

// RecoveryKeyCheckStatus is the last key check Job that could not give a
// verdict. It is kept in the status, not on the Job, because the Job is
// deleted to be replaced and the backoff must outlive it.
type RecoveryKeyCheckStatus struct {
	// Snapshot is the EtcdSnapshot whose key was being checked; a check of
	// another snapshot starts counting again.
	Snapshot string `json:"snapshot"`

	// Attempt is the number of that Job: the checks of Snapshot started so
	// far, each of which ended without a verdict.
	// +kubebuilder:validation:Minimum=1
	Attempt int32 `json:"attempt"`

	// NotRun is why that Job gave no verdict: the Pod's waiting reason, or
	// the Job's failure.
	// +optional
	NotRun string `json:"notRun,omitempty"`

	// RetryAt is when the next check Job is created.
	RetryAt metav1.Time `json:"retryAt"`
}

// EtcdRecoveryStatus is what the operator decided and did.
type EtcdRecoveryStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase is Pending, Refused, Running, Succeeded or Failed.
	// +optional
	Phase RecoveryPhase `json:"phase,omitempty"`

	// Plan is recorded before the operator changes anything.
	// +optional
	Plan *RecoveryPlan `json:"plan,omitempty"`

	// StartedAt is when the plan was recorded and the recovery began.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// CompletedAt is when the recovery succeeded or failed.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`

	// KeyCheck records the last key check Job of an encrypted snapshot
	// that ended without its agent's verdict (Planned reason
	// RecoveryKeyCheckNotRun), and when the next one starts. Absent while
	// no check has failed so.
	// +optional
	KeyCheck *RecoveryKeyCheckStatus `json:"keyCheck,omitempty"`

	// Conditions: Planned and Recovered, whose reasons are listed in
	// api/v1alpha1/etcdrecovery_conditions.go.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EtcdRecovery is one explicit recovery of an EtcdCluster from quorum loss.
// The operator never force-recovers a cluster on its own unless the
// cluster's spec.disasterRecovery asks it to, and then it creates one of
// these itself.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdrec,categories=etcd-all
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.status.plan.source`
// +kubebuilder:printcolumn:name="Survivor",type=string,JSONPath=`.status.plan.survivor`
// +kubebuilder:printcolumn:name="Gap",type=integer,JSONPath=`.status.plan.revisionGap`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdRecovery struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec EtcdRecoverySpec `json:"spec"`
	// +optional
	Status EtcdRecoveryStatus `json:"status,omitempty"`
}

// EtcdRecoveryList is a list of EtcdRecoveries.
//
// +kubebuilder:object:root=true
type EtcdRecoveryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdRecovery `json:"items"`
}

// ClusterRecovery is the recovery an EtcdCluster is going through, as the
// cluster controller runs it. It is written by the cluster controller only;
// the EtcdRecovery's status is written by the recovery controller only, from
// this.
type ClusterRecovery struct {
	// Name and UID of the EtcdRecovery being carried out.
	Name string `json:"name"`
	// +optional
	UID types.UID `json:"uid,omitempty"`

	// Source is Survivor or Snapshot.
	Source RecoverySourceType `json:"source"`

	// Survivor is the member restarted as a one-member cluster, and
	// SurvivorID its etcd member ID, which it keeps.
	// +optional
	Survivor string `json:"survivor,omitempty"`
	// +optional
	SurvivorID string `json:"survivorID,omitempty"`

	// Snapshot is the EtcdSnapshot restored.
	// +optional
	Snapshot string `json:"snapshot,omitempty"`

	// Encryption is the key the snapshot is decrypted with, copied from the
	// EtcdRecovery's source.snapshot.encryption when the recovery is taken
	// up; the restore's check Job and seed mount it as a file.
	// +optional
	Encryption *SnapshotEncryption `json:"encryption,omitempty"`

	// PreviousClusterID is the cluster ID before a recovery from a
	// snapshot, which gives the cluster a new one.
	// +optional
	PreviousClusterID string `json:"previousClusterID,omitempty"`

	// ResetAt is when a recovery from a snapshot, every old member gone,
	// dropped the cluster's ID and token, so that the cluster forms anew
	// from the snapshot through the ordinary bootstrap with a restore.
	// +optional
	ResetAt *metav1.Time `json:"resetAt,omitempty"`

	// StartedAt is when the cluster controller took the recovery up.
	StartedAt metav1.Time `json:"startedAt"`

	// RestoredAt is when the cluster answered again as the recovery's
	// result: the survivor alone with a leader, or the seed restored from
	// the snapshot having formed the new cluster. Growing back to
	// spec.replicas is an ordinary scale-up from then on.
	// +optional
	RestoredAt *metav1.Time `json:"restoredAt,omitempty"`

	// Failed says why the recovery cannot go on; nothing more is done.
	// +optional
	Failed string `json:"failed,omitempty"`
}

// Active reports a recovery that the cluster controller is still carrying
// out: the members it stopped leave without an etcd-side removal, which no
// quorum could commit.
func (r *ClusterRecovery) Active() bool {
	return r != nil && r.RestoredAt == nil && r.Failed == ""
}

// RestoreSpec is what an active recovery from a snapshot restores once the
// cluster is reset, with the restore's defaults: revisions bumped and
// history marked compacted, so that no client that saw the old cluster is
// handed a revision it has seen before. Nil for any other recovery.
func (r *ClusterRecovery) RestoreSpec() *RestoreSpec {
	if !r.Active() || r.Source != RecoveryFromSnapshot || r.ResetAt == nil {
		return nil
	}
	return &RestoreSpec{SnapshotName: r.Snapshot, Encryption: r.Encryption.DeepCopy()}
}
