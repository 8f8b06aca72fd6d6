package v1alpha1

import (
	"fmt"
	"net/url"
	"strings"
)

// Labels the operator puts on what it creates.
const (
	// ClusterLabel names the EtcdCluster an object belongs to.
	ClusterLabel = "etcd.quorumctl.io/cluster"
	// MemberLabel names the EtcdMember a Pod or volume belongs to.
	MemberLabel = "etcd.quorumctl.io/member"
	// RoleLabel is set to RoleLabelVoter on the Pods of voting members only;
	// the client Service selects it, so learners never receive client traffic.
	RoleLabel = "etcd.quorumctl.io/role"
	// RoleLabelVoter is the value of RoleLabel on voters.
	RoleLabelVoter = "voter"

	// MemberFinalizer makes member deletion remove the member from etcd first.
	MemberFinalizer = "etcd.quorumctl.io/member-removal"

	// FieldOwner is the field manager of everything the operator writes.
	FieldOwner = "etcd-operator"
)

// Ports every member listens on.
const (
	ClientPort  = 2379
	PeerPort    = 2380
	MetricsPort = 2381
)

// ClusterLabels select every object of one cluster.
func ClusterLabels(cluster string) map[string]string {
	return map[string]string{
		ClusterLabel:                   cluster,
		"app.kubernetes.io/name":       "etcd",
		"app.kubernetes.io/instance":   cluster,
		"app.kubernetes.io/managed-by": "etcd-operator",
	}
}

// MemberLabels are a member's Pod and volume labels, without the role.
func MemberLabels(cluster, member string) map[string]string {
	l := ClusterLabels(cluster)
	l[MemberLabel] = member
	return l
}

// ClusterSelector is the label selector string of a cluster's members, for the
// scale subresource.
func ClusterSelector(cluster string) string { return ClusterLabel + "=" + cluster }

// PeerServiceName is the headless Service that gives each member its DNS name.
func PeerServiceName(cluster string) string { return cluster }

// ClientServiceName is the Service clients use; it selects ready voters only.
func ClientServiceName(cluster string) string { return cluster + "-client" }

// MemberNamePrefix is the GenerateName of a cluster's members.
func MemberNamePrefix(cluster string) string { return cluster + "-" }

// StartupConfigName is the ConfigMap that holds the member's
// --initial-cluster and --initial-cluster-state. The Pod reads them as
// environment variables, which the kubelet resolves again at every container
// start, so a restart in the same Pod gets today's values.
func StartupConfigName(member string) string { return member + "-startup" }

// Keys of the startup ConfigMap: etcd reads ETCD_<FLAG> variables as flags.
const (
	StartupInitialClusterKey      = "ETCD_INITIAL_CLUSTER"
	StartupInitialClusterStateKey = "ETCD_INITIAL_CLUSTER_STATE"
	// StartupForceNewClusterKey is present, as "true", only while the
	// member is a disaster recovery's survivor being restarted as a
	// one-member cluster. The Pod references it as optional, so a member
	// without it starts normally.
	StartupForceNewClusterKey = "ETCD_FORCE_NEW_CLUSTER"
)

// DataVolumeClaimName is a member's PersistentVolumeClaim.
func DataVolumeClaimName(member string) string { return "data-" + member }

// MemberHost is a member's stable DNS name behind the peer Service.
func MemberHost(member, cluster, namespace, clusterDomain string) string {
	return fmt.Sprintf("%s.%s.%s.svc.%s", member, PeerServiceName(cluster), namespace, strings.TrimSuffix(clusterDomain, "."))
}

// PeerURL is a member's peer URL. It is a pure function of the member's name,
// so a member added to etcd before a crash is found again by its URL.
func PeerURL(member, cluster, namespace, clusterDomain string) string {
	return fmt.Sprintf("http://%s:%d", MemberHost(member, cluster, namespace, clusterDomain), PeerPort)
}

// MemberOfPeerURL splits the host of a peer URL as PeerURL renders it:
// member is its first DNS label, the member's name, and domain the rest,
// which begins with the cluster's peer Service. A member etcd lists before
// it has started has no name there, and is known by this. Both are "" for a
// URL without a host.
func MemberOfPeerURL(peerURL string) (member, domain string) {
	u, err := url.Parse(peerURL)
	if err != nil {
		return "", ""
	}
	member, domain, _ = strings.Cut(u.Hostname(), ".")
	return member, domain
}

// ClientURL is a member's own client URL.
func ClientURL(member, cluster, namespace, clusterDomain string) string {
	return fmt.Sprintf("http://%s:%d", MemberHost(member, cluster, namespace, clusterDomain), ClientPort)
}

// ClusterToken derives etcd's --initial-cluster-token from the object's UID,
// so a same-named cluster created later can never be joined by a stale member.
func ClusterToken(c *EtcdCluster) string { return "etcd-" + string(c.UID) }

// RecoveredClusterToken is the token of the cluster a recovery from a
// snapshot forms in place of the old one: a member of the old cluster, were
// one to come back, can never join it.
func RecoveredClusterToken(c *EtcdCluster, recovery *ClusterRecovery) string {
	return ClusterToken(c) + "-" + string(recovery.UID)
}

// NetworkPolicyName is the NetworkPolicy that guards a cluster's members.
func NetworkPolicyName(cluster string) string { return cluster }
