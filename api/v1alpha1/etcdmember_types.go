package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EtcdMemberSpec is one etcd member. The operator writes it; users do not
// (the chart's ValidatingAdmissionPolicy lets only the operator's
// ServiceAccount write it). The fields that make the member's identity, the
// ones the operator dials and etcd trusts, are fixed once set, whoever writes:
// the operator never changes them after creating the member. peerURL and
// clientURL may be set once on a member created before they were recorded.
// forceNewCluster, dormant, initialCluster, volumeSize (which only grows),
// the template and the TLS trust bundles (a CA rotation rolls them) are the
// operator's to change over the member's life.
//
// +kubebuilder:validation:XValidation:rule="self.clusterName == oldSelf.clusterName",message="spec.clusterName cannot be changed: a member belongs to the cluster that created it"
// +kubebuilder:validation:XValidation:rule="self.clusterToken == oldSelf.clusterToken",message="spec.clusterToken cannot be changed: it is the etcd cluster's token, fixed when the cluster formed"
// +kubebuilder:validation:XValidation:rule="(has(self.bootstrap) && self.bootstrap) == (has(oldSelf.bootstrap) && oldSelf.bootstrap)",message="spec.bootstrap cannot be changed: it records which member formed the cluster"
// +kubebuilder:validation:XValidation:rule=`!has(oldSelf.peerURL) || oldSelf.peerURL == "" || (has(self.peerURL) && (self.peerURL == oldSelf.peerURL || (oldSelf.peerURL.startsWith("http://") && self.peerURL == "https://" + oldSelf.peerURL.substring(7))))`,message="spec.peerURL cannot be changed once set, but from http:// to https:// at the same address while TLS is turned on: it is the member's address in etcd's membership"
// +kubebuilder:validation:XValidation:rule=`!has(oldSelf.clientURL) || oldSelf.clientURL == "" || (has(self.clientURL) && (self.clientURL == oldSelf.clientURL || (oldSelf.clientURL.startsWith("http://") && self.clientURL == "https://" + oldSelf.clientURL.substring(7))))`,message="spec.clientURL cannot be changed once set, but from http:// to https:// at the same address while TLS is turned on: the operator and snapshot Jobs dial the member there"
// +kubebuilder:validation:XValidation:rule=`(has(self.replaces) ? self.replaces : "") == (has(oldSelf.replaces) ? oldSelf.replaces : "")`,message="spec.replaces cannot be changed: it names the member this one was created to replace"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.tls) || (has(self.tls) && (!has(oldSelf.tls.peer) || has(self.tls.peer)) && (!has(oldSelf.tls.client) || (has(self.tls.client) && (has(self.tls.client.clientCertAuth) && self.tls.client.clientCertAuth) == (has(oldSelf.tls.client.clientCertAuth) && oldSelf.tls.client.clientCertAuth))))",message="spec.tls can only gain sides or change its trust bundles: a member never stops serving TLS on a side, and whether it checks client certificates is fixed once it serves client TLS"
// +kubebuilder:validation:XValidation:rule="has(self.restore) == has(oldSelf.restore) && (!has(self.restore) || self.restore == oldSelf.restore)",message="spec.restore cannot be changed: the seed restores the snapshot it was created with"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.volumeSize) || (has(self.volumeSize) && quantity(string(self.volumeSize)).compareTo(quantity(string(oldSelf.volumeSize))) >= 0)",message="spec.volumeSize cannot shrink or be removed: a volume that was asked to grow cannot shrink back"
type EtcdMemberSpec struct {
	// ClusterName is the owning EtcdCluster.
	// +kubebuilder:validation:MinLength=1
	ClusterName string `json:"clusterName"`

	// Bootstrap marks the seed, the one member that formed the cluster. It is
	// a permanent record of identity, not a phase: whether the member may
	// start with --initial-cluster-state=new is derived from status.
	// +optional
	Bootstrap bool `json:"bootstrap,omitempty"`

	// InitialCluster is etcd's --initial-cluster for this member's first
	// start, taken from etcd's own member list when the member was added.
	// Empty while the member is still being added; no Pod exists until then.
	// +optional
	InitialCluster string `json:"initialCluster,omitempty"`

	// ClusterToken is etcd's --initial-cluster-token.
	ClusterToken string `json:"clusterToken"`

	// PeerURL and ClientURL are the member's own URLs, fixed when it is
	// created. The operator finds the member in etcd's member list by its
	// latched ID, and before that by PeerURL; recording them keeps that
	// lookup independent of the operator's current settings, such as the
	// cluster domain, which may differ after a restart.
	// +optional
	PeerURL string `json:"peerURL,omitempty"`
	// +optional
	ClientURL string `json:"clientURL,omitempty"`

	// Replaces names the broken member this one was created to replace,
	// with that member's template. It joins only once the broken member has
	// left etcd.
	// +optional
	Replaces string `json:"replaces,omitempty"`

	// Dormant parks the member of a paused cluster: its Pod is deleted, its
	// volume, member ID and place in etcd's membership are kept.
	// +optional
	Dormant bool `json:"dormant,omitempty"`

	// ForceNewCluster makes the member's next start use etcd's
	// --force-new-cluster: it becomes a one-member cluster on its own data,
	// keeping its cluster and member IDs. The cluster controller sets it on
	// the survivor of a disaster recovery only, and clears it as soon as
	// the member answers alone with a leader, so no later restart forces
	// again. The member controller restarts the member's Pod to apply it.
	// +optional
	ForceNewCluster bool `json:"forceNewCluster,omitempty"`

	// VolumeSize is the size the member's data volume is to grow to ahead
	// of the template's storage.size. The cluster controller sets it, one
	// member at a time, when a rollout grows a volume online; the member
	// controller raises its claim's request to it, and the rollout restarts
	// the member on the grown volume with the new template once the claim's
	// capacity has reached it. Unset for a member whose volume has never
	// been grown that way; it can only grow, as a volume can.
	// +optional
	VolumeSize *resource.Quantity `json:"volumeSize,omitempty"`

	// TLS shapes the member's TLS; the cluster controller rolls it like
	// the template. Unset means plaintext.
	// +optional
	TLS *MemberTLS `json:"tls,omitempty"`

	// Restore is set on the seed of a restored cluster: its Pod restores
	// this snapshot into the data dir before etcd first starts, and only
	// while InitialClusterState is "new".
	// +optional
	Restore *MemberRestore `json:"restore,omitempty"`

	MemberTemplate `json:",inline"`
}

// EtcdMemberStatus is the observed state of one member.
type EtcdMemberStatus struct {
	// Every field has one writer, under the field manager of its concern in
	// internal/component/memberstatus: a new field joins exactly one.

	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// MemberID is etcd's ID for this member in hex, latched from etcd's
	// member list by the cluster controller.
	// +optional
	MemberID string `json:"memberID,omitempty"`

	// Role is the member's role in etcd's membership, from etcd's member list.
	// +optional
	Role MemberRole `json:"role,omitempty"`

	// PodName and PodUID identify the Pod that runs this member.
	// +optional
	PodName string `json:"podName,omitempty"`
	// +optional
	PodUID types.UID `json:"podUID,omitempty"`

	// Version is the etcd version the member reports running.
	// +optional
	Version string `json:"version,omitempty"`

	// RolledAt is when a rollout last changed the member's template. Until
	// the member is healthy again after it, it is restarting on purpose, and
	// self-heal does not take its silence for a failure.
	// +optional
	RolledAt *metav1.Time `json:"rolledAt,omitempty"`

	// RestartApproved is the template hash (the Pod annotation
	// etcd.quorumctl.io/template-hash) of the member spec whose Pod the
	// cluster controller last let the member controller re-create. A Pod
	// built from another spec than the member's is re-created only once its
	// member's spec has this hash: every restart goes through the cluster
	// controller's one-member-at-a-time gate, whatever changed the spec.
	// +optional
	RestartApproved string `json:"restartApproved,omitempty"`

	// NodeName is the node the member's Pod was last scheduled to. It
	// outlives the Pod, so a member whose Pod is gone or cannot be scheduled
	// (its volume is bound to that node) is still known to live there.
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// FirstReadyTime is when the member was first seen ready: the persisted
	// fact that it has booted and holds cluster data. From then on any start
	// on an empty data dir is data loss, and the member is configured so that
	// etcd refuses it instead of joining or bootstrapping anew.
	// +optional
	FirstReadyTime *metav1.Time `json:"firstReadyTime,omitempty"`

	// Fenced is set by the cluster controller to the reason a member was cut
	// off from client traffic because its view of the cluster disagrees with
	// the quorum's. A fenced member is replaced, never trusted again.
	// +optional
	Fenced string `json:"fenced,omitempty"`

	// ForceNewCluster reports that the member's startup ConfigMap holds
	// etcd's --force-new-cluster, so that every start of its etcd forces.
	// The member controller writes it after syncing the ConfigMap; the
	// cluster controller waits for it to clear before the cluster grows
	// back.
	// +optional
	ForceNewCluster bool `json:"forceNewCluster,omitempty"`

	// Maintenance is what the operator is doing to the member now
	// (defragmenting it, growing its volume), recorded before it starts.
	// +optional
	Maintenance *MemberMaintenance `json:"maintenance,omitempty"`

	// LastDefragTime is when the operator last finished defragmenting the
	// member.
	// +optional
	LastDefragTime *metav1.Time `json:"lastDefragTime,omitempty"`
}

// EtcdMember is one etcd member, owning its Pod and data volume.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=etcd-all
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="ID",type=string,JSONPath=`.status.memberID`
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=`.status.role`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdMember struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec EtcdMemberSpec `json:"spec"`
	// +optional
	Status EtcdMemberStatus `json:"status,omitempty"`
}

// EtcdMemberList is a list of EtcdMembers.
//
// +kubebuilder:object:root=true
type EtcdMemberList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdMember `json:"items"`
}

// Pending reports a member whose etcd-side add is not finished: no Pod may
// start until etcd's member list has been copied into spec.initialCluster.
func (m *EtcdMember) Pending() bool { return m.Spec.InitialCluster == "" }

// LostPod reports a Memory member whose recorded Pod is gone or replaced:
// its tmpfs data went with that Pod, so it must be replaced, not restarted.
func (m *EtcdMember) LostPod(current *corev1.Pod) bool {
	if m.Spec.Storage.Medium != StorageMediumMemory || m.Status.PodUID == "" {
		return false
	}
	return current == nil || current.UID != m.Status.PodUID
}

// HasBooted reports the persisted fact that the member has run and joined.
func (m *EtcdMember) HasBooted() bool { return m.Status.FirstReadyTime != nil }

// InitialClusterState derives --initial-cluster-state. "new" is a phase of the
// cluster, not a property of the seed: it is given only while nothing says the
// cluster exists, so a seed whose data dir is later lost fails loudly under
// "existing" instead of quietly forming a fresh one-member cluster.
func InitialClusterState(m *EtcdMember, clusterFormed bool) string {
	if m.Spec.Bootstrap && m.Status.MemberID == "" && !clusterFormed && !m.HasBooted() {
		return InitialClusterStateNew
	}
	return InitialClusterStateExisting
}

// Values of --initial-cluster-state.
const (
	InitialClusterStateNew      = "new"
	InitialClusterStateExisting = "existing"
)

// OwnPeerURL is the member's recorded peer URL, or fallback for a member
// created before URLs were recorded.
func (m *EtcdMember) OwnPeerURL(fallback string) string {
	if m.Spec.PeerURL != "" {
		return m.Spec.PeerURL
	}
	return fallback
}

// OwnClientURL is the member's recorded client URL, or fallback.
func (m *EtcdMember) OwnClientURL(fallback string) string {
	if m.Spec.ClientURL != "" {
		return m.Spec.ClientURL
	}
	return fallback
}

// PeerURLIn is the member's peer URL: the recorded one, or, for a member
// created before URLs were recorded, the one its name gives in clusterDomain.
func (m *EtcdMember) PeerURLIn(clusterDomain string) string {
	return m.OwnPeerURL(PeerURL(m.Name, m.Spec.ClusterName, m.Namespace, clusterDomain))
}

// ClientURLIn is the member's client URL: the recorded one, or the one its
// name gives in clusterDomain.
func (m *EtcdMember) ClientURLIn(clusterDomain string) string {
	return m.OwnClientURL(ClientURL(m.Name, m.Spec.ClusterName, m.Namespace, clusterDomain))
}

// InitialCluster derives --initial-cluster for the member's next start.
// Until the member has booted it is etcd's member list from the add. After
// that it names only the member itself: etcd ignores the flag on a data dir
// it can open, and on an empty one a self-only list under "existing" leaves
// it no peer to fetch the cluster from, so it exits with "discovery failed"
// rather than rejoining under its old ID with none of its raft state.
func InitialCluster(m *EtcdMember, selfPeerURL string) string {
	if m.HasBooted() {
		return m.Name + "=" + selfPeerURL
	}
	return m.Spec.InitialCluster
}
