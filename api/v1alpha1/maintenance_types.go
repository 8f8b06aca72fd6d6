package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of the defragmentation rule; they must match the default markers
// below and internal/maintenance's, which a test checks.
const (
	DefaultDefragFreePercent  = 25
	DefaultDefragQuotaPercent = 80
)

// DefaultDefragMinReclaim is the least a defragmentation must give back.
var DefaultDefragMinReclaim = resource.MustParse("64Mi")

// MaintenanceSpec controls the maintenance the operator does by itself.
type MaintenanceSpec struct {
	// Defrag defragments members whose database file has much free space
	// in it, or is near its quota: one member at a time, followers first,
	// the leader last after leadership has moved away, each once the one
	// before has caught up, and only while every member is healthy.
	// +kubebuilder:default={}
	// +optional
	Defrag DefragSpec `json:"defrag,omitempty"`

	// NoSpaceRecovery brings a cluster that raised etcd's NOSPACE alarm
	// (its database reached the backend quota, and it refuses writes) back
	// to writable: it compacts at the current revision, defragments every
	// member and disarms the alarm. It never deletes a key: when the live
	// data alone fills the quota, the Maintenance condition says so and
	// names the remedies.
	// +kubebuilder:default={}
	// +optional
	NoSpaceRecovery NoSpaceRecoverySpec `json:"noSpaceRecovery,omitempty"`
}

// DefragSpec is the rule and the times of automatic defragmentation. A
// member is due when FreePercent of its database file is free and that is at
// least MinReclaim, or when the file reaches QuotaPercent of the backend
// quota and defragmenting gives back at least MinReclaim or a tenth of the
// quota, whichever is less.
//
// +kubebuilder:validation:XValidation:rule="!has(self.window) || has(self.schedule)",message="maintenance.defrag.window needs maintenance.defrag.schedule: the window is counted from each tick of the schedule"
type DefragSpec struct {
	// Enabled switches automatic defragmentation on (the default) or off.
	// NOSPACE recovery defragments regardless.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// FreePercent is the share of the database file that must be free.
	// +kubebuilder:default=25
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 100",message="maintenance.defrag.freePercent must be between 1 and 100: it is the share of the database file that must be free"
	// +optional
	FreePercent *int32 `json:"freePercent,omitempty"`

	// MinReclaim is the least a defragmentation must give back to be worth
	// blocking the member for.
	// +kubebuilder:default="64Mi"
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="maintenance.defrag.minReclaim cannot be negative"
	// +optional
	MinReclaim *resource.Quantity `json:"minReclaim,omitempty"`

	// QuotaPercent is how full, relative to the backend quota, a database
	// file may get before it is due whatever its free share.
	// +kubebuilder:default=80
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 100",message="maintenance.defrag.quotaPercent must be between 1 and 100: it is how full the database file may get relative to the backend quota"
	// +optional
	QuotaPercent *int32 `json:"quotaPercent,omitempty"`

	// Schedule, a cron expression in UTC (5 fields, or a descriptor such as
	// @daily; CRON_TZ=<zone> first for another zone), limits when a
	// defragmentation may start: within Window after each tick. Unset, a
	// member is defragmented as soon as it is due. A member's
	// defragmentation that has started runs to its end.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^((CRON_)?TZ=[^ ]+ +)?(@(annually|yearly|monthly|weekly|daily|midnight|hourly)|@every +[^ ]+|[^ @]+( +[^ ]+){4})$')",message="maintenance.defrag.schedule must be a cron expression of 5 fields (minute hour day-of-month month day-of-week, such as '0 2 * * *') or a descriptor such as @daily or '@every 6h', optionally after CRON_TZ=<zone>"
	// +optional
	Schedule string `json:"schedule,omitempty"`

	// Window is how long after each tick of Schedule a defragmentation may
	// start; 1h when unset.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="maintenance.defrag.window must be at least 1m"
	// +optional
	Window *metav1.Duration `json:"window,omitempty"`
}

// On reports whether automatic defragmentation is enabled.
func (d DefragSpec) On() bool { return d.Enabled == nil || *d.Enabled }

// FreePercentOrDefault is FreePercent with its default applied.
func (d DefragSpec) FreePercentOrDefault() int32 {
	if d.FreePercent == nil {
		return DefaultDefragFreePercent
	}
	return *d.FreePercent
}

// QuotaPercentOrDefault is QuotaPercent with its default applied.
func (d DefragSpec) QuotaPercentOrDefault() int32 {
	if d.QuotaPercent == nil {
		return DefaultDefragQuotaPercent
	}
	return *d.QuotaPercent
}

// MinReclaimBytes is MinReclaim with its default applied.
func (d DefragSpec) MinReclaimBytes() int64 {
	if d.MinReclaim == nil {
		return DefaultDefragMinReclaim.Value()
	}
	return d.MinReclaim.Value()
}

// WindowLength is Window, or 0 when unset.
func (d DefragSpec) WindowLength() time.Duration {
	if d.Window == nil {
		return 0
	}
	return d.Window.Duration
}

// NoSpaceRecoverySpec switches NOSPACE recovery.
type NoSpaceRecoverySpec struct {
	// Enabled switches NOSPACE recovery on (the default) or off. Off, the
	// Maintenance condition still reports the alarm and what to do.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// On reports whether NOSPACE recovery is enabled.
func (n NoSpaceRecoverySpec) On() bool { return n.Enabled == nil || *n.Enabled }

// MaintenanceStatus records the maintenance the operator did.
type MaintenanceStatus struct {
	// LastDefragTime is when the operator last finished defragmenting a
	// member of the cluster.
	// +optional
	LastDefragTime *metav1.Time `json:"lastDefragTime,omitempty"`

	// LastNoSpaceRecoveryTime is when the operator last disarmed a NOSPACE
	// alarm, having made room.
	// +optional
	LastNoSpaceRecoveryTime *metav1.Time `json:"lastNoSpaceRecoveryTime,omitempty"`
}

// MemberMaintenanceKind is what the operator is doing to a member.
// +kubebuilder:validation:Enum=Defragment;ExpandVolume
type MemberMaintenanceKind string

const (
	// MemberMaintenanceDefragment: the member is being defragmented, which
	// blocks it; self-heal does not take its silence for a failure.
	MemberMaintenanceDefragment MemberMaintenanceKind = "Defragment"
	// MemberMaintenanceExpandVolume: the member's volume has been asked to
	// grow, online; the member keeps running.
	MemberMaintenanceExpandVolume MemberMaintenanceKind = "ExpandVolume"
)

// MemberMaintenance is work the operator has started on a member, recorded
// before it starts so that it outlives an operator restart.
type MemberMaintenance struct {
	Kind  MemberMaintenanceKind `json:"kind"`
	Since metav1.Time           `json:"since"`
}
