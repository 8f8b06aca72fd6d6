package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SnapshotRetention says which successful snapshots a schedule keeps. The
// newest successful snapshot is always kept, whatever the rules say, so a
// schedule never leaves a cluster without a backup.
//
// +kubebuilder:validation:XValidation:rule="has(self.keepLast) || has(self.maxAge)",message="retention needs keepLast, maxAge or both"
type SnapshotRetention struct {
	// KeepLast keeps the newest N successful snapshots and prunes older ones.
	// +kubebuilder:validation:Minimum=1
	// +optional
	KeepLast *int32 `json:"keepLast,omitempty"`

	// MaxAge prunes successful snapshots completed longer ago than this,
	// such as 168h.
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// EtcdSnapshotScheduleSpec takes snapshots of a cluster on a schedule.
type EtcdSnapshotScheduleSpec struct {
	// ClusterName is the EtcdCluster in the same namespace to snapshot.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="clusterName must be the name of an EtcdCluster: lower-case letters, digits, '-' and '.'"
	ClusterName string `json:"clusterName"`

	// Schedule is a 5-field cron expression (minute hour day-of-month month
	// day-of-week) or a descriptor such as @hourly, in UTC unless it starts
	// with CRON_TZ=<zone>. A schedule that cannot be parsed is reported as
	// Scheduled=False/InvalidSchedule.
	// +kubebuilder:validation:MinLength=1
	Schedule string `json:"schedule"`

	// Destination is where the snapshots are written.
	// +kubebuilder:validation:XValidation:rule="!has(self.s3) || !has(self.s3.endpoint) || self.s3.endpoint.startsWith('https://') || (has(self.s3.insecure) && self.s3.insecure)",message="s3.endpoint must be https:// unless s3.insecure is true: over http the snapshots, every key of the cluster, cross the network in clear"
	Destination SnapshotDestination `json:"destination"`

	// Retention prunes old snapshots: their stored objects first, then their
	// EtcdSnapshots. Without it nothing is pruned.
	// +optional
	Retention *SnapshotRetention `json:"retention,omitempty"`

	// Suspend stops new snapshots; running ones finish, and pruning goes on.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// EtcdSnapshotScheduleStatus reports the schedule's runs.
type EtcdSnapshotScheduleStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// LastScheduleTime is the tick the newest snapshot was created for.
	// After downtime one snapshot stands for every tick missed.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`

	// LastSuccessfulTime is when the newest successful snapshot completed.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`

	// NextScheduleTime is the next tick.
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`

	// LastSnapshotName is the EtcdSnapshot created last.
	// +optional
	LastSnapshotName string `json:"lastSnapshotName,omitempty"`

	// Conditions: Scheduled, whose reasons are listed in
	// api/v1alpha1/etcdsnapshotschedule_conditions.go.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EtcdSnapshotSchedule creates EtcdSnapshots of a cluster on a schedule and
// prunes them by its retention rules.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdsnapsched,categories=etcd-all
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last Success",type=date,JSONPath=`.status.lastSuccessfulTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdSnapshotSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec EtcdSnapshotScheduleSpec `json:"spec"`
	// +optional
	Status EtcdSnapshotScheduleStatus `json:"status,omitempty"`
}

// EtcdSnapshotScheduleList is a list of EtcdSnapshotSchedules.
//
// +kubebuilder:object:root=true
type EtcdSnapshotScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdSnapshotSchedule `json:"items"`
}
