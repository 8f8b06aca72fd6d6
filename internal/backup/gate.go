package backup

import (
	"fmt"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcdversion"
)

// RestoreNeeded is the restore gate, the rule --initial-cluster-state=new
// follows: the seed restores only while nothing says the cluster exists
// (its startup ConfigMap still says "new", which it never does again once
// the cluster ID is latched or the seed has been seen ready) and its data
// dir does not exist yet. The second half keeps a seed that booted from its
// restore before the operator noticed from being restored over: a data dir
// under "new" can only come from a restore that completed, because the
// restore moves it into place whole.
func RestoreNeeded(initialClusterState string, dataDirExists bool) bool {
	return initialClusterState == v1alpha1.InitialClusterStateNew && !dataDirExists
}

// VersionRefusal says why a snapshot cannot be restored into a version.
type VersionRefusal struct{ Message string }

func (r *VersionRefusal) Error() string { return r.Message }

// CheckRestoreVersion refuses a snapshot taken with a newer etcd minor than
// the cluster runs: its data may use what the older release cannot read,
// and etcd supports no downgrade by restore. Patch differences, and older
// minors (the cluster upgrades the data as a rolling upgrade would), pass.
func CheckRestoreVersion(snapshotVersion, clusterVersion string) error {
	snap, err := etcdversion.Parse(snapshotVersion)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMetadataInvalid, err)
	}
	cluster, err := etcdversion.Parse(clusterVersion)
	if err != nil {
		return err
	}
	if snap.Major > cluster.Major || snap.Major == cluster.Major && snap.Minor > cluster.Minor {
		return &VersionRefusal{Message: fmt.Sprintf("the snapshot was taken with etcd %s, a newer minor than the cluster's %s; "+
			"set spec.version to %s or later", snap, cluster, snap.MinorString())}
	}
	return nil
}
