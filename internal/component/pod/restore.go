package pod

import (
	"path"

	corev1 "k8s.io/api/core/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup/agent"
	"github.com/quorumctl/etcd-operator/internal/component/backupjob"
)

// Init containers of a restored cluster's seed.
const (
	// RestoreFetchContainer downloads the snapshot, in the operator image.
	RestoreFetchContainer = "restore-fetch"
	// RestoreApplyContainer runs etcdutl snapshot restore, in the etcd image.
	RestoreApplyContainer = "restore-apply"

	restoreToolsVolume = "restore-tools"
	restoreToolsDir    = "/restore-tools"
	// restoreWorkDir is on the data volume, beside the data dir, so the
	// restored data dir is moved into place by a rename.
	restoreWorkDir = DataMountPath + "/restore"
)

// restores reports whether the Pod gets the restore init containers: the
// seed of a restored cluster, built while the cluster is still new. A Pod
// built once the cluster exists never gets them, so it needs nothing of the
// snapshot's storage (whose claim or Secret may be long gone); one built
// before is still gated at every start by its startup ConfigMap.
func restores(p Params) bool {
	m := p.Member
	return m.Spec.Bootstrap && m.Spec.Restore != nil && p.OperatorImage != "" &&
		v1alpha1.InitialClusterState(m, p.ClusterFormed) == v1alpha1.InitialClusterStateNew
}

// restoreInit returns the init containers and the volumes they add.
//
// The etcd image has no shell, so the restore step runs the operator's own
// binary, which the first step copies into a shared emptyDir; it runs the
// image's etcdutl, so the data dir is written by the release that opens it.
// Both steps read --initial-cluster-state from the startup ConfigMap at
// every start, as etcd does, and do nothing unless it is "new" and the data
// dir does not exist yet (backup.RestoreNeeded).
func restoreInit(p Params) ([]corev1.Container, []corev1.Volume) {
	m := p.Member
	r := m.Spec.Restore
	fetch := agent.FetchArgs{
		StorageArgs: agent.StorageArgs{Destination: r.Source, Key: r.Key, AmbientCredentials: p.RestoreAmbientCredentials},
		SHA256:      r.SHA256, Size: r.SizeBytes, Compression: r.Compression,
		Encryption: r.Encryption, KeyFingerprint: r.KeyFingerprint,
		DataDir: DataDir, WorkDir: restoreWorkDir,
		CopySelfTo: path.Join(restoreToolsDir, "manager"),
	}
	storageVolumes, storageMounts := backupjob.StorageVolumes(r.Source, true, &fetch.StorageArgs)
	if r.Encryption != "" {
		kv, km := backupjob.KeyVolume(r.EncryptionKey, &fetch.StorageArgs)
		storageVolumes, storageMounts = append(storageVolumes, kv...), append(storageMounts, km...)
	}
	peer := m.PeerURLIn(p.clusterDomain())
	apply := agent.ApplyArgs{
		Etcdutl: "/usr/local/bin/etcdutl", DataDir: DataDir, WorkDir: restoreWorkDir,
		Name: m.Name, InitialCluster: m.Name + "=" + peer, InitialClusterToken: m.Spec.ClusterToken, PeerURL: peer,
		BumpRevision: r.BumpRevision, MarkCompacted: r.MarkCompacted,
	}
	gate := corev1.EnvVar{Name: agent.EnvInitialClusterState, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: v1alpha1.StartupConfigName(m.Name)},
		Key:                  v1alpha1.StartupInitialClusterStateKey,
	}}}
	tools := corev1.VolumeMount{Name: restoreToolsVolume, MountPath: restoreToolsDir}
	data := corev1.VolumeMount{Name: DataVolumeName, MountPath: DataMountPath}
	containers := []corev1.Container{
		{
			Name:                     RestoreFetchContainer,
			Image:                    p.OperatorImage,
			ImagePullPolicy:          corev1.PullIfNotPresent,
			Command:                  []string{backupjob.ManagerPath},
			Args:                     fetch.Args(),
			Env:                      append([]corev1.EnvVar{gate}, backupjob.StorageEnv(r.Source, p.RestoreAmbientCredentials)...),
			VolumeMounts:             append([]corev1.VolumeMount{data, tools}, storageMounts...),
			Resources:                backupjob.AgentResources(),
			SecurityContext:          containerSecurityContext(),
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		},
		{
			Name:                     RestoreApplyContainer,
			Image:                    p.image(),
			ImagePullPolicy:          corev1.PullIfNotPresent,
			Command:                  []string{fetch.CopySelfTo},
			Args:                     apply.Args(),
			Env:                      []corev1.EnvVar{gate},
			VolumeMounts:             []corev1.VolumeMount{data, tools},
			Resources:                defaultedResources(m),
			SecurityContext:          containerSecurityContext(),
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		},
	}
	volumes := append([]corev1.Volume{{Name: restoreToolsVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}, storageVolumes...)
	return containers, volumes
}
