// Package backupjob builds the Jobs of backups and restores, and the parts
// of a Pod that reach a snapshot's storage (credentials, the claim, the CA
// bundle), which the seed's restore init containers share. Building is
// pure: no client, no I/O.
//
// Every Pod here runs the operator's own image and passes the restricted
// Pod Security level. None gets a ServiceAccount token: the agent needs
// nothing from the Kubernetes API, as it is handed everything on its
// command line, and credentials come from a Secret the kubelet resolves
// into the environment, never into arguments.
package backupjob

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"path"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup/agent"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
)

const (
	// ContainerName is the container of every Job here; its termination
	// message carries the agent's result.
	ContainerName = "agent"
	// ManagerPath is the manager binary in the operator image.
	ManagerPath = "/manager"

	pvcVolume        = "snapshots"
	caVolume         = "s3-ca"
	etcdClientVolume = "etcd-client"
	etcdRootVolume   = "etcd-root"
	keyVolume        = "snapshot-key"

	nonRootID int64 = 65532

	// Deadlines: a snapshot of a large database streams for minutes; a
	// prune or a check makes a few requests.
	snapshotDeadline int64 = 3600
	shortDeadline    int64 = 600
)

// SnapshotJobName is the one Job that snapshots a cluster. There is only
// ever one per cluster: the name is the lock that serialises snapshots,
// one-shot and scheduled alike, enforced by the API server.
func SnapshotJobName(cluster string) string { return name(cluster, "snapshot") }

// PruneJobName is the Job that deletes a pruned snapshot's objects.
func PruneJobName(snapshot string) string { return name(snapshot, "prune") }

// RestoreCheckJobName is the Job that checks a restore's source.
func RestoreCheckJobName(cluster string) string { return name(cluster, "restore-check") }

// name keeps Job names within the 63 characters their Pods' job-name label
// allows, with a hash of the whole when the base is too long.
func name(base, suffix string) string {
	n := base + "-" + suffix
	if len(n) <= 63 {
		return n
	}
	sum := sha256.Sum256([]byte(n))
	h := hex.EncodeToString(sum[:])[:8]
	return base[:63-len(suffix)-len(h)-2] + "-" + h + "-" + suffix
}

// EnvIMDSDisabled turns the AWS SDK's instance metadata client off: where
// ambient credentials are not allowed, no bug or stray default can reach
// the node's instance role.
const EnvIMDSDisabled = "AWS_EC2_METADATA_DISABLED"

// StorageEnv passes the credentials of an S3 destination, and turns the
// instance metadata service off unless ambient says the Pod may use the
// SDK's default chain (backup.CredentialsDecision.Ambient).
//
// The Secret is optional to the kubelet: a missing Secret leaves the
// variables empty, and the agent reports CredentialsInvalid naming the
// Secret, instead of the Pod hanging in CreateContainerConfigError. A named
// Secret never turns into ambient credentials: the agent refuses empty ones
// whenever a Secret is named.
func StorageEnv(d v1alpha1.SnapshotDestination, ambient bool) []corev1.EnvVar {
	if d.S3 == nil {
		return nil
	}
	var env []corev1.EnvVar
	if name := d.S3.CredentialsSecretName; name != "" {
		ref := func(key string) *corev1.EnvVarSource {
			return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: name},
				Key:                  key,
				Optional:             ptr.To(true),
			}}
		}
		env = append(env,
			corev1.EnvVar{Name: agent.EnvAccessKeyID, ValueFrom: ref(v1alpha1.S3AccessKeyIDKey)},
			corev1.EnvVar{Name: agent.EnvSecretAccessKey, ValueFrom: ref(v1alpha1.S3SecretAccessKeyKey)})
	}
	if !ambient || d.S3.CredentialsSecretName != "" {
		env = append(env, corev1.EnvVar{Name: EnvIMDSDisabled, Value: "true"})
	}
	return env
}

// StorageVolumes mounts what the destination needs, and fills in where the
// agent finds it.
func StorageVolumes(d v1alpha1.SnapshotDestination, readOnly bool, a *agent.StorageArgs) ([]corev1.Volume, []corev1.VolumeMount) {
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	if c := d.PersistentVolumeClaim; c != nil {
		vols = append(vols, corev1.Volume{Name: pvcVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.ClaimName, ReadOnly: readOnly},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: pvcVolume, MountPath: agent.DefaultPVCMount, ReadOnly: readOnly})
		a.PVCMount = agent.DefaultPVCMount
	}
	if d.S3 != nil && d.S3.CABundle != nil {
		key := d.S3.CABundle.Key
		if key == "" {
			key = "ca.crt"
		}
		vols = append(vols, corev1.Volume{Name: caVolume, VolumeSource: corev1.VolumeSource{
			// Optional for the same reason as the Secret: a missing bundle is
			// reported by the agent, not left as a Pod that never starts.
			ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: d.S3.CABundle.ConfigMapName},
				Items:                []corev1.KeyToPath{{Key: key, Path: "ca.crt"}},
				Optional:             ptr.To(true),
			},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: caVolume, MountPath: "/etc/quorumctl/s3-ca", ReadOnly: true})
		a.CAFile = agent.DefaultCAFile
	}
	return vols, mounts
}

// KeyVolume mounts the Secret key an encryption names at
// agent.DefaultKeyFile, and tells the agent so. The key reaches the Pod as
// this file only: never an environment variable (which the kubelet, the
// runtime and crash dumps show more widely) nor an argument. The volume is
// optional, like the credentials: a missing Secret or key leaves no file,
// and the agent reports EncryptionKeyMissing naming it, instead of the Pod
// never starting.
func KeyVolume(e *v1alpha1.SnapshotEncryption, a *agent.StorageArgs) ([]corev1.Volume, []corev1.VolumeMount) {
	if e == nil {
		return nil, nil
	}
	a.EncryptionKey = agent.KeyFile{Ref: agent.KeyRef(e), Path: agent.DefaultKeyFile}
	dir, file := path.Split(agent.DefaultKeyFile)
	return []corev1.Volume{{Name: keyVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  e.SecretRef.Name,
			Items:       []corev1.KeyToPath{{Key: e.SecretRef.Key, Path: file}},
			DefaultMode: ptr.To(int32(0o440)),
			Optional:    ptr.To(true),
		}}}},
		[]corev1.VolumeMount{{Name: keyVolume, MountPath: path.Clean(dir), ReadOnly: true}}
}

// PodSecurityContext passes the restricted Pod Security level; fsGroup
// makes a claim writable by the non-root user.
func PodSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:        ptr.To(true),
		RunAsUser:           ptr.To(nonRootID),
		RunAsGroup:          ptr.To(nonRootID),
		FSGroup:             ptr.To(nonRootID),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// ContainerSecurityContext is the container half of the restricted level.
func ContainerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
	}
}

// AgentResources are the requests of an agent container: the upload
// buffers parts in memory (see store.DefaultPartSize).
func AgentResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("128Mi"),
	}}
}

// jobParams is one Job.
type jobParams struct {
	name, namespace string
	owner           metav1.OwnerReference
	labels          map[string]string
	image           string
	args            []string
	dest            v1alpha1.SnapshotDestination
	storage         *agent.StorageArgs
	readOnly        bool
	deadline        int64
}

func build(p jobParams) *batchv1.Job {
	vols, mounts := StorageVolumes(p.dest, p.readOnly, p.storage)
	labels := maps.Clone(p.labels)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.name, Namespace: p.namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{p.owner},
		},
		Spec: batchv1.JobSpec{
			// A failed snapshot is reported, not retried: the next one is the
			// schedule's to take, and a retry could only hide the reason.
			BackoffLimit:          ptr.To[int32](0),
			ActiveDeadlineSeconds: ptr.To(p.deadline),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(p.labels)},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					SecurityContext:              PodSecurityContext(),
					Volumes:                      vols,
					Containers: []corev1.Container{{
						Name:                     ContainerName,
						Image:                    p.image,
						ImagePullPolicy:          corev1.PullIfNotPresent,
						Command:                  []string{ManagerPath},
						Args:                     p.args,
						Env:                      StorageEnv(p.dest, p.storage.AmbientCredentials),
						VolumeMounts:             mounts,
						Resources:                AgentResources(),
						SecurityContext:          ContainerSecurityContext(),
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					}},
				},
			},
		},
	}
}

func ownerRef(kind, name string, uid metav1.Object) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: kind, Name: name, UID: uid.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
}

func jobLabels(cluster, kind string, extra map[string]string) map[string]string {
	l := map[string]string{
		"app.kubernetes.io/name":       "etcd-backup",
		"app.kubernetes.io/instance":   cluster,
		"app.kubernetes.io/managed-by": "etcd-operator",
		v1alpha1.JobKindLabel:          kind,
	}
	maps.Copy(l, extra)
	return l
}

// EtcdClientLabels select the Pods of a cluster's Jobs that dial its
// members: the snapshot Jobs. The cluster's NetworkPolicy admits them on
// the client port; a new Job that dials etcd must carry them, and the Jobs
// that only reach a snapshot's storage (prune, restore check) do not.
func EtcdClientLabels(cluster string) map[string]string {
	return jobLabels(cluster, v1alpha1.JobKindSnapshot, nil)
}

// Snapshot is the Job that takes snapshot s of its cluster. The Job itself
// carries the cluster label, so the operator's cache (which keeps only
// labelled objects) sees it; its Pod does not, so that no Service or
// PodDisruptionBudget of the cluster ever selects it. shape says how the
// members are reached (see etcdAccess); endpoints carry its scheme.
// ambient is the operator's CredentialsDecision for the destination.
func Snapshot(s *v1alpha1.EtcdSnapshot, c *v1alpha1.EtcdCluster, shape etcdaccess.Shape, endpoints []string, key, image string, ambient bool) *batchv1.Job {
	a := agent.SaveArgs{
		Namespace: s.Namespace, Cluster: c.Name, Snapshot: s.Name, Endpoints: endpoints, ClusterID: c.Status.ClusterID,
		StorageArgs: agent.StorageArgs{Destination: s.Spec.Destination, Key: key, AmbientCredentials: ambient},
	}
	vols, mounts := etcdAccess(c, shape, &a.EtcdTLS)
	kv, km := KeyVolume(s.Spec.Destination.Encryption, &a.StorageArgs)
	vols, mounts = append(vols, kv...), append(mounts, km...)
	p := jobParams{
		name: SnapshotJobName(c.Name), namespace: s.Namespace, owner: ownerRef("EtcdSnapshot", s.Name, s),
		labels: jobLabels(c.Name, v1alpha1.JobKindSnapshot, map[string]string{v1alpha1.SnapshotLabel: s.Name}),
		image:  image, dest: s.Spec.Destination, storage: &a.StorageArgs, deadline: snapshotDeadline,
	}
	// Volumes fill in the mount paths, so the arguments are rendered after.
	job := build(p)
	spec := &job.Spec.Template.Spec
	spec.Volumes = append(spec.Volumes, vols...)
	spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, mounts...)
	spec.Containers[0].Args = a.Args()
	job.Labels[v1alpha1.ClusterLabel] = c.Name
	return job
}

// etcdAccess gives the snapshot Pod what the operator itself dials the
// cluster with: once the members serve TLS on their client port, the
// operator's client certificate and the client trust bundle, from the Secret
// the operator keeps and renews in place; with etcd's authentication on and
// no client certificate to name the user, root's password from the root
// Secret, mounted as a file (see etcdaccess.IdentityOf).
//
// The Secrets are not optional: without them the operator cannot reach
// the cluster either, and the Pod waiting for them is reported as stuck.
func etcdAccess(c *v1alpha1.EtcdCluster, shape etcdaccess.Shape, a *agent.EtcdTLSArgs) ([]corev1.Volume, []corev1.VolumeMount) {
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	if shape.HTTPS {
		vols = append(vols, corev1.Volume{Name: etcdClientVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  v1alpha1.OperatorClientSecretName(c.Name),
			DefaultMode: ptr.To(int32(0o440)),
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: etcdClientVolume, MountPath: agent.DefaultEtcdTLSDir, ReadOnly: true})
		a.InDir(agent.DefaultEtcdTLSDir)
	}
	if etcdaccess.IdentityOf(c, shape) == etcdaccess.IdentityPassword {
		vols = append(vols, corev1.Volume{Name: etcdRootVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  c.RootSecretName(),
			Items:       []corev1.KeyToPath{{Key: v1alpha1.RootPasswordKey, Path: v1alpha1.RootPasswordKey}},
			DefaultMode: ptr.To(int32(0o440)),
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: etcdRootVolume, MountPath: agent.DefaultEtcdRootDir, ReadOnly: true})
		a.PasswordFile = agent.DefaultEtcdRootDir + "/" + v1alpha1.RootPasswordKey
	}
	return vols, mounts
}

// Prune is the Job that deletes snapshot s's objects.
func Prune(s *v1alpha1.EtcdSnapshot, key, image string, ambient bool) *batchv1.Job {
	a := agent.StorageCommandArgs{StorageArgs: agent.StorageArgs{Destination: s.Spec.Destination, Key: key, AmbientCredentials: ambient}}
	job := build(jobParams{
		name: PruneJobName(s.Name), namespace: s.Namespace, owner: ownerRef("EtcdSnapshot", s.Name, s),
		labels: jobLabels(s.Spec.ClusterName, v1alpha1.JobKindPrune, map[string]string{v1alpha1.SnapshotLabel: s.Name}),
		image:  image, dest: s.Spec.Destination, storage: &a.StorageArgs, deadline: shortDeadline,
	})
	job.Spec.Template.Spec.Containers[0].Args = a.DeleteArgs()
	job.Labels[v1alpha1.ClusterLabel] = s.Spec.ClusterName
	return job
}

// RestoreCheck is the Job that checks a restore's source before the seed
// exists: the object, its metadata, that the credentials work, and for an
// encrypted snapshot that the key (enc, from spec.bootstrap.restore) is
// the one it needs, with the very Secrets and mounts the seed's download
// will use.
func RestoreCheck(c *v1alpha1.EtcdCluster, dest v1alpha1.SnapshotDestination, enc *v1alpha1.SnapshotEncryption, key, image string, ambient bool) *batchv1.Job {
	return inspect(jobParams{
		name: RestoreCheckJobName(c.Name), namespace: c.Namespace, owner: ownerRef("EtcdCluster", c.Name, c),
		labels: jobLabels(c.Name, v1alpha1.JobKindRestoreCheck, nil),
		image:  image, dest: dest, readOnly: true, deadline: shortDeadline,
	}, c.Name, enc, key, ambient)
}

// inspect is a Job that runs the agent's inspect of one snapshot with the
// key enc names mounted as a file: the check of a restore's source, and of
// a recovery's key, are the one check.
func inspect(p jobParams, cluster string, enc *v1alpha1.SnapshotEncryption, key string, ambient bool) *batchv1.Job {
	a := agent.StorageCommandArgs{StorageArgs: agent.StorageArgs{Destination: p.dest, Key: key, AmbientCredentials: ambient}}
	p.storage = &a.StorageArgs
	job := build(p)
	kv, km := KeyVolume(enc, &a.StorageArgs)
	spec := &job.Spec.Template.Spec
	spec.Volumes = append(spec.Volumes, kv...)
	spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, km...)
	job.Spec.Template.Spec.Containers[0].Args = a.InspectArgs()
	job.Labels[v1alpha1.ClusterLabel] = cluster
	return job
}
