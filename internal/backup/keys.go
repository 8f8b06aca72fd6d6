package backup

import (
	"path"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// SnapshotKey is where an EtcdSnapshot is stored, relative to the
// destination's prefix or path: one directory per namespace and cluster, so
// a bucket shared by many clusters stays browsable.
func SnapshotKey(namespace, cluster, snapshot string) string {
	return path.Join(namespace, cluster, snapshot+".db")
}

// KeyOf is where a snapshot is stored, from its name, namespace and
// cluster. Pruning and restoring use it and never status.key: status is
// writable by whoever may write EtcdSnapshot status, and a key taken from
// there could name another cluster's or another tenant's objects.
// Object names, and spec.clusterName by its CEL rule, hold no "/" and are
// never "." or "..", so the key stays under the snapshot's namespace and
// cluster.
func KeyOf(s *v1alpha1.EtcdSnapshot) string {
	return SnapshotKey(s.Namespace, s.Spec.ClusterName, s.Name)
}

// MetadataKey is where a snapshot's metadata object is: beside it.
func MetadataKey(key string) string { return key + ".json" }

// IsMetadataKey reports whether a key names a metadata object.
func IsMetadataKey(key string) bool { return path.Ext(key) == ".json" }

// Location renders a snapshot's place for people: s3://bucket/key or
// pvc://claim/path.
func Location(d v1alpha1.SnapshotDestination, key string) string {
	switch {
	case d.S3 != nil:
		return "s3://" + d.S3.Bucket + "/" + path.Join(d.S3.Prefix, key)
	case d.PersistentVolumeClaim != nil:
		return "pvc://" + d.PersistentVolumeClaim.ClaimName + "/" + path.Join(d.PersistentVolumeClaim.Path, key)
	}
	return ""
}
