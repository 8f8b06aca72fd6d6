package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The shape of an RFC 3339 time is checked by a CEL pattern, so that a wrong
// one is refused with a message that says what is expected; the second
// rule's timestamp() then refuses what the shape lets through but no
// calendar has (such as February 31).

// RestoreFromSchedule picks the snapshot to restore by time: the newest
// successful EtcdSnapshot of a schedule that completed before a moment.
// The choice is made once, when the cluster is created, and recorded in
// status.restoreChoice; later snapshots never change it (see
// docs/design/0026-restore-as-of.md).
type RestoreFromSchedule struct {
	// Name of the EtcdSnapshotSchedule whose snapshots are considered: the
	// EtcdSnapshots in the same namespace labelled
	// etcd.quorumctl.io/schedule=<name>. The schedule itself need not
	// still exist.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="fromSchedule.name must be the name of an EtcdSnapshotSchedule: lower-case letters, digits, '-' and '.'"
	Name string `json:"name"`

	// Before is an RFC 3339 time, such as 2026-12-07T01:00:00Z: the
	// snapshot chosen is the newest successful one whose completion is
	// strictly before it, so that it holds no write made at or after it.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]([.][0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$')",message="fromSchedule.before must be an RFC 3339 time, such as 2026-12-07T01:00:00Z"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]([.][0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$') || timestamp(self) > timestamp('0001-01-01T00:00:00Z')",message="fromSchedule.before must be a time that exists in the calendar"
	Before string `json:"before"`
}

// RestoreChoice is the snapshot spec.bootstrap.restore.fromSchedule chose.
// It is latched: written once, before the snapshot is checked, and read
// back on every later pass, so a snapshot the schedule takes later never
// changes what a restore in progress uses.
type RestoreChoice struct {
	// Schedule and Before are the spec's, as the choice was made for them.
	Schedule string `json:"schedule"`
	Before   string `json:"before"`
	// SnapshotName is the EtcdSnapshot chosen.
	SnapshotName string `json:"snapshotName"`
	// SnapshotCompletedAt is the chosen snapshot's completion, the time
	// compared with Before.
	SnapshotCompletedAt metav1.Time `json:"snapshotCompletedAt"`
	// ChosenAt is when the choice was made.
	ChosenAt metav1.Time `json:"chosenAt"`
}
