package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// StorageMedium selects where a member keeps its data dir.
// +kubebuilder:validation:Enum="";Memory
type StorageMedium string

const (
	// StorageMediumDefault keeps data on a PersistentVolumeClaim.
	StorageMediumDefault StorageMedium = ""
	// StorageMediumMemory keeps data on tmpfs: fast, and lost with the Pod.
	StorageMediumMemory StorageMedium = "Memory"
)

// DefaultStorageSize is the data volume size when storage.size is not set.
var DefaultStorageSize = resource.MustParse("1Gi")

// MinimumStorageSize is the smallest volume or tmpfs a member can run on.
// etcd preallocates its 64 MB WAL segments whole, and keeps the next one
// allocated ahead of need, so 128 MB of any data dir is WAL before the first
// key is written; below this size the database is left a few megabytes and
// etcd fails with "no space left on device". The CEL rule on Size repeats
// the literal, and a test keeps the two equal.
var MinimumStorageSize = resource.MustParse("256Mi")

// StorageSpec describes each member's data volume. The size may grow and the
// class may change: each is rolled out, one member at a time, by growing the
// volume online where its StorageClass allows expansion, and otherwise by
// replacing the member with one on a new volume, which joins before the old
// one leaves. The size cannot shrink and the medium cannot change: a smaller
// volume might not hold the data, and a Memory member has no volume to move.
//
// +kubebuilder:validation:XValidation:rule=`(has(self.medium) ? self.medium : "") == (has(oldSelf.medium) ? oldSelf.medium : "")`,message="storage.medium cannot be changed after creation"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.size) || (has(self.size) && quantity(string(self.size)).compareTo(quantity(string(oldSelf.size))) >= 0)",message="storage.size cannot shrink"
// +kubebuilder:validation:XValidation:rule="!has(self.medium) || self.medium != 'Memory' || has(self.size)",message="storage.size is required when storage.medium is Memory"
type StorageSpec struct {
	// Size of each member's volume, or the tmpfs size limit for Memory.
	// Defaults to 1Gi for volumes; required for Memory. At least 256Mi:
	// etcd's write-ahead log alone takes 128 MB of it.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('256Mi')) >= 0",message="storage.size must be at least 256Mi: etcd preallocates two 64 MB write-ahead log files in the data dir and needs room for its database beside them"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// Medium is "" for a PersistentVolumeClaim per member, or Memory for tmpfs.
	// +optional
	Medium StorageMedium `json:"medium,omitempty"`

	// StorageClassName follows PersistentVolumeClaim semantics: unset means
	// the default class, "" means no dynamic provisioning. A change moves
	// the members to the new class one at a time, by replacement.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
}

// EffectiveSize is the size a member's volume gets.
func (s StorageSpec) EffectiveSize() resource.Quantity {
	if s.Size != nil {
		return *s.Size
	}
	return DefaultStorageSize
}

// ReservedPrefix is the prefix of the labels and annotations the operator
// sets and reads itself; AdditionalMetadata may not use it (the CEL rules
// below repeat the literal).
const ReservedPrefix = "etcd.quorumctl.io/"

// AdditionalMetadata is merged onto the objects the operator creates. Keys
// under etcd.quorumctl.io/ are the operator's: it selects members and Jobs
// by those labels and acts on those annotations of member Pods (a copied
// etcd.quorumctl.io/force-new-cluster would start a member as a new
// one-member cluster), so they are refused here rather than overwritten.
type AdditionalMetadata struct {
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('etcd.quorumctl.io/'))",message="additionalMetadata.labels must not use the prefix etcd.quorumctl.io/: the operator selects members and Jobs by its own labels under it"
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('etcd.quorumctl.io/'))",message="additionalMetadata.annotations must not use the prefix etcd.quorumctl.io/: the operator acts on its own annotations of member Pods, such as etcd.quorumctl.io/force-new-cluster"
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// AutoCompactionMode is etcd's --auto-compaction-mode.
// +kubebuilder:validation:Enum=periodic;revision
type AutoCompactionMode string

// EtcdOptions are etcd flags with safe defaults. A change rolls through the
// members.
type EtcdOptions struct {
	// QuotaBackendBytes is --quota-backend-bytes.
	// +kubebuilder:validation:Minimum=0
	// +optional
	QuotaBackendBytes *int64 `json:"quotaBackendBytes,omitempty"`

	// AutoCompactionMode is --auto-compaction-mode.
	// +optional
	AutoCompactionMode AutoCompactionMode `json:"autoCompactionMode,omitempty"`

	// AutoCompactionRetention is --auto-compaction-retention, such as 1h or 1000.
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$|^[0-9]+$`
	// +optional
	AutoCompactionRetention string `json:"autoCompactionRetention,omitempty"`

	// SnapshotCount is --snapshot-count (raft log entries between snapshots).
	// +kubebuilder:validation:Minimum=1
	// +optional
	SnapshotCount *int64 `json:"snapshotCount,omitempty"`
}

// MemberTemplate is everything that shapes one member. The cluster's spec
// carries it, status.observed holds the adopted one, and each EtcdMember has
// its own copy; a rollout brings each member's copy to the target, one
// member at a time, and re-creates the member's Pod from it.
type MemberTemplate struct {
	// Version is the etcd release to run, such as 3.6.16. A change rolls
	// through the members one at a time: patch releases in any order, and
	// one minor release at a time upwards (3.5 members must be on 3.5.32 or
	// later before 3.6).
	// +kubebuilder:default="3.6.16"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]+[.][0-9]+[.][0-9]+$')",message="version must be an etcd release in MAJOR.MINOR.PATCH form, such as 3.6.16"
	// +optional
	Version string `json:"version,omitempty"`

	// Storage of each member.
	// +kubebuilder:default={}
	// +optional
	Storage StorageSpec `json:"storage,omitempty"`

	// Resources of the etcd container. Defaults to requests of 100m CPU and 128Mi memory.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// Affinity of member Pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// TopologySpreadConstraints of member Pods.
	// +optional
	// +listType=atomic
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// NodeSelector of member Pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations of member Pods.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// PriorityClassName of member Pods.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// ImageRepository is where this cluster's etcd images come from, without
	// a tag or digest: the image is <imageRepository>:v<version>. A registry
	// port (registry.example:5000/etcd) is fine. Empty means the operator's
	// --etcd-image-repository.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="!self.contains('@') && !self.matches(':[^/]*$')",message="imageRepository must be a repository without a tag or digest, such as gcr.io/etcd-development/etcd: the operator appends :v<version> itself"
	// +optional
	ImageRepository string `json:"imageRepository,omitempty"`

	// ImagePullSecrets of member Pods.
	// +optional
	// +listType=atomic
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// AdditionalMetadata is merged onto member Pods, volumes and Services.
	// +optional
	AdditionalMetadata *AdditionalMetadata `json:"additionalMetadata,omitempty"`

	// Options are etcd flags.
	// +optional
	Options *EtcdOptions `json:"options,omitempty"`

	// DefaultScheduling adds, unless Disabled, a preferred anti-affinity that
	// spreads members over nodes (when affinity is not set) and a soft
	// topology spread over zones (when topologySpreadConstraints is empty).
	// +kubebuilder:default=Enabled
	// +optional
	DefaultScheduling DefaultScheduling `json:"defaultScheduling,omitempty"`
}

// DefaultScheduling switches the operator's scheduling defaults.
// +kubebuilder:validation:Enum=Enabled;Disabled
type DefaultScheduling string

const (
	// DefaultSchedulingEnabled applies the defaults where the user set nothing.
	DefaultSchedulingEnabled DefaultScheduling = "Enabled"
	// DefaultSchedulingDisabled never adds anything to the member Pods.
	DefaultSchedulingDisabled DefaultScheduling = "Disabled"
)
