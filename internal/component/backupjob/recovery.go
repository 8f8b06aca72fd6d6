package backupjob

import (
	batchv1 "k8s.io/api/batch/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// RecoveryKeyCheckJobName is the Job that checks a recovery's key.
func RecoveryKeyCheckJobName(recovery string) string { return name(recovery, "key-check") }

// RecoveryKeyCheck is the Job that checks, before a recovery from an
// encrypted snapshot changes anything, that the key its
// source.snapshot.encryption names decrypts the snapshot: the restore
// check's inspect, with the same Secret mounted the same way. It is owned
// by the EtcdRecovery, so it goes with it, and labelled with the cluster,
// so that the operator's cache, which holds only labelled Jobs, sees it.
func RecoveryKeyCheck(er *v1alpha1.EtcdRecovery, snap *v1alpha1.EtcdSnapshot, key, image string, ambient bool) *batchv1.Job {
	dest := snap.Spec.Destination.DeepCopy()
	// The key the snapshot was written with is the writer's (it may be a
	// recipient only); the recovery decrypts with the one it names.
	dest.Encryption = nil
	return inspect(jobParams{
		name: RecoveryKeyCheckJobName(er.Name), namespace: er.Namespace, owner: ownerRef("EtcdRecovery", er.Name, er),
		labels: jobLabels(er.Spec.ClusterName, v1alpha1.JobKindRecoveryKeyCheck, map[string]string{v1alpha1.SnapshotLabel: snap.Name}),
		image:  image, dest: *dest, readOnly: true, deadline: shortDeadline,
	}, er.Spec.ClusterName, er.Spec.Source.Snapshot.Encryption, key, ambient)
}
