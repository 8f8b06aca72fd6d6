package pod

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

const (
	// DefaultImageRepository is used when Params.ImageRepository is empty. It
	// must match ETCD_IMAGE_REPOSITORY in versions.env, which is where the
	// local cluster tags its preloaded images.
	DefaultImageRepository = "gcr.io/etcd-development/etcd"

	// DefaultClusterDomain is used when Params.ClusterDomain is empty.
	DefaultClusterDomain = "cluster.local"

	// ContainerName is the etcd container; status readers look it up by name.
	ContainerName = "etcd"

	// DataVolumeName is the Pod volume that holds etcd's data.
	DataVolumeName = "data"
	// DataMountPath is where the data volume is mounted.
	DataMountPath = "/var/lib/etcd"
	// DataDir is etcd's --data-dir. It is a subdirectory of the mount because
	// a fresh filesystem may carry lost+found, and etcd treats a non-empty
	// data dir as an existing member's.
	DataDir = DataMountPath + "/data"

	etcdBinary = "/usr/local/bin/etcd"

	// nonRootID is the distroless "nonroot" user; any non-zero ID would pass
	// Pod Security, this one is the conventional choice for static images.
	nonRootID int64 = 65532

	// terminationGracePeriod covers what a graceful etcd stop does, handing
	// off leadership and committing the backend, with room to spare. It is
	// not longer because a hung member holds up its own replacement.
	terminationGracePeriod int64 = 30
)

// Params is everything Build needs; it carries no client so Build stays pure.
type Params struct {
	// Member is the EtcdMember the Pod runs. It must not be Pending.
	Member *v1alpha1.EtcdMember
	// Namespace of the Pod; it must equal Member.Namespace, since an owner
	// reference cannot cross namespaces. Empty means Member.Namespace.
	Namespace string
	// ClusterFormed is EtcdCluster.ClusterFormed() of the member's cluster.
	ClusterFormed bool
	// ClusterDomain is the cluster's DNS suffix. Empty means cluster.local.
	ClusterDomain string
	// ImageRepository is the etcd image without a tag; the tag is derived
	// from the member's version. Empty means DefaultImageRepository.
	ImageRepository string
	// Image, when set, is used verbatim instead of ImageRepository and the
	// version, for pinning by digest or testing a private build.
	Image string
	// OperatorImage is the operator's own image, which downloads a restored
	// cluster's snapshot in its seed's Pod.
	OperatorImage string
	// RestoreAmbientCredentials lets that download use the SDK's default
	// chain: the operator's CredentialsDecision for the restore's source.
	RestoreAmbientCredentials bool
}

func (p Params) namespace() string {
	if p.Namespace != "" {
		return p.Namespace
	}
	return p.Member.Namespace
}

func (p Params) clusterDomain() string {
	if p.ClusterDomain != "" {
		return p.ClusterDomain
	}
	return DefaultClusterDomain
}

// image is the container image of the member's etcd.
func (p Params) image() string {
	if p.Image != "" {
		return p.Image
	}
	repo := p.Member.Spec.ImageRepository
	if repo == "" {
		repo = p.ImageRepository
	}
	if repo == "" {
		repo = DefaultImageRepository
	}
	version := p.Member.Spec.Version
	if version == "" {
		version = v1alpha1.DefaultEtcdVersion
	}
	return repo + ":v" + strings.TrimPrefix(version, "v")
}

// Build returns the Pod of one member. The result shares no memory with the
// member, so callers may modify either freely.
func Build(p Params) *corev1.Pod {
	m := p.Member
	ns := p.namespace()
	cluster := m.Spec.ClusterName

	labels := Labels(m)
	annotations := map[string]string{}
	if md := m.Spec.AdditionalMetadata; md != nil {
		maps.Copy(annotations, md.Annotations)
	}
	annotations[TemplateHashAnnotation] = TemplateHash(m)
	if m.Spec.ForceNewCluster {
		annotations[ForceNewClusterAnnotation] = "true"
	}

	var pullSecrets []corev1.LocalObjectReference
	if len(m.Spec.ImagePullSecrets) > 0 {
		pullSecrets = slices.Clone(m.Spec.ImagePullSecrets)
	}
	var tolerations []corev1.Toleration
	for i := range m.Spec.Tolerations {
		tolerations = append(tolerations, *m.Spec.Tolerations[i].DeepCopy())
	}
	var nodeSelector map[string]string
	if len(m.Spec.NodeSelector) > 0 {
		nodeSelector = maps.Clone(m.Spec.NodeSelector)
	}

	volumes := append([]corev1.Volume{dataVolume(m)}, tlsVolumeList(m)...)
	var initContainers []corev1.Container
	if restores(p) {
		var extra []corev1.Volume
		initContainers, extra = restoreInit(p)
		volumes = append(volumes, extra...)
	}

	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            m.Name,
			Namespace:       ns,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{ownerReference(m)},
		},
		Spec: corev1.PodSpec{
			// hostname.subdomain is what v1alpha1.MemberHost resolves, through
			// the headless peer Service of the same name as the subdomain.
			Hostname:  m.Name,
			Subdomain: v1alpha1.PeerServiceName(cluster),

			// Service links would inject variables such as ETCD_PORT when the
			// cluster is named "etcd", and etcd reads ETCD_* variables as flags.
			EnableServiceLinks: ptr.To(false),
			// etcd never talks to the Kubernetes API.
			AutomountServiceAccountToken: ptr.To(false),

			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To(terminationGracePeriod),
			SecurityContext:               podSecurityContext(),

			InitContainers: initContainers,
			Containers:     []corev1.Container{container(p, ns)},
			Volumes:        volumes,

			Affinity:                  defaultAffinity(m),
			TopologySpreadConstraints: defaultSpread(m),
			NodeSelector:              nodeSelector,
			Tolerations:               tolerations,
			PriorityClassName:         m.Spec.PriorityClassName,
			ImagePullSecrets:          pullSecrets,
		},
	}
}

// Labels are the labels Build puts on a member's Pod: the member's additional
// labels overlaid with the operator's own. The role label is never taken from
// additional metadata, since it decides who receives client traffic; it is
// set here only for members already known to be voters, so that a re-created
// voter is routable as soon as it is ready instead of after the next status
// sync.
func Labels(m *v1alpha1.EtcdMember) map[string]string {
	out := map[string]string{}
	if md := m.Spec.AdditionalMetadata; md != nil {
		maps.Copy(out, md.Labels)
	}
	delete(out, v1alpha1.RoleLabel)
	maps.Copy(out, v1alpha1.MemberLabels(m.Spec.ClusterName, m.Name))
	if ServesClients(m) {
		out[v1alpha1.RoleLabel] = v1alpha1.RoleLabelVoter
	}
	return out
}

// ServesClients says whether the member's Pod belongs behind the client
// Service: a voter that is neither fenced nor leaving. A learner cannot serve
// linearizable requests, a fenced member's view disagrees with the quorum's,
// and a member being removed is about to stop answering.
func ServesClients(m *v1alpha1.EtcdMember) bool {
	return m.Status.Role == v1alpha1.MemberRoleVoter && m.Status.Fenced == "" && m.DeletionTimestamp.IsZero()
}

// Args are etcd's command-line flags for a member, sorted so that the same
// member always yields the same Pod.
func Args(p Params) []string {
	m := p.Member
	domain := p.clusterDomain()
	peerURL := m.PeerURLIn(domain)
	args := []string{
		"--name=" + m.Name,
		"--data-dir=" + DataDir,
		"--listen-client-urls=" + listenClientURLs(m),
		"--advertise-client-urls=" + m.ClientURLIn(domain),
		"--listen-peer-urls=" + listenPeerURLs(peerURL),
		"--initial-advertise-peer-urls=" + peerURL,
		fmt.Sprintf("--listen-metrics-urls=http://0.0.0.0:%d", v1alpha1.MetricsPort),
		"--initial-cluster-token=" + m.Spec.ClusterToken,
	}
	args = append(args, optionFlags(m)...)
	args = append(args, tlsFlags(m)...)
	slices.Sort(args)
	return args
}

func container(p Params, ns string) corev1.Container {
	return corev1.Container{
		Name:            ContainerName,
		Image:           p.image(),
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{etcdBinary},
		Args:            Args(p),
		Env:             env(p),
		Ports: []corev1.ContainerPort{
			{Name: "client", ContainerPort: v1alpha1.ClientPort, Protocol: corev1.ProtocolTCP},
			{Name: "peer", ContainerPort: v1alpha1.PeerPort, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: v1alpha1.MetricsPort, Protocol: corev1.ProtocolTCP},
		},
		// Readiness gates the client Service only; the peer Service publishes
		// unready members, so a failing probe never cuts raft traffic.
		//
		// There is deliberately no liveness probe: a member busy applying a
		// large snapshot or defragmenting fails /health for a while, and a
		// kill then restarts that work from scratch and takes another member
		// out of the quorum. Replacing a member that is really broken is the
		// operator's job, which can see etcd's side of the story.
		//
		// A NOSPACE alarm does not make a member unready: etcd still serves
		// reads and deletes, and the alarm is the cluster's, so counting it
		// would empty the client Service of every member at once and turn
		// refused writes into refused connections.
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{
					Path:   HealthPath,
					Port:   intstr.FromString("metrics"),
					Scheme: corev1.URISchemeHTTP,
				},
			},
			// Every join waits on this probe before its promotion, so it runs
			// each second; /health is one read-index round trip, cheap at that rate.
			PeriodSeconds:    1,
			TimeoutSeconds:   2,
			FailureThreshold: 3,
			SuccessThreshold: 1,
		},
		// etcd logs the reason for a fatal exit last; keeping it in the
		// container status lets self-heal classify failures without log access.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		Resources:                defaultedResources(p.Member),
		VolumeMounts: append([]corev1.VolumeMount{
			{Name: DataVolumeName, MountPath: DataMountPath},
		}, tlsMountList(p.Member)...),
		SecurityContext: containerSecurityContext(),
	}
}

// HealthPath is the readiness probe's path: etcd's /health, with the
// NOSPACE alarm excluded (etcd 3.5 and later understand exclude).
const HealthPath = "/health?exclude=NOSPACE"

// podSecurityContext passes the Pod Security "restricted" profile.
func podSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot: ptr.To(true),
		RunAsUser:    ptr.To(nonRootID),
		RunAsGroup:   ptr.To(nonRootID),
		// fsGroup makes a fresh volume writable by the non-root user;
		// OnRootMismatch skips the recursive chown of a large data dir on
		// every restart.
		FSGroup:             ptr.To(nonRootID),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func containerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		// etcd writes nowhere but its data dir.
		ReadOnlyRootFilesystem: ptr.To(true),
		RunAsNonRoot:           ptr.To(true),
	}
}

func dataVolume(m *v1alpha1.EtcdMember) corev1.Volume {
	if m.Spec.Storage.Medium == v1alpha1.StorageMediumMemory {
		// tmpfs pages are charged to the Pod's memory, so a memory limit must
		// leave room for the data on top of etcd's own use.
		size := m.Spec.Storage.EffectiveSize()
		return corev1.Volume{
			Name: DataVolumeName,
			VolumeSource: corev1.VolumeSource{
				EmptyDir: &corev1.EmptyDirVolumeSource{
					Medium:    corev1.StorageMediumMemory,
					SizeLimit: &size,
				},
			},
		}
	}
	return corev1.Volume{
		Name: DataVolumeName,
		VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: v1alpha1.DataVolumeClaimName(m.Name),
			},
		},
	}
}

// ownerReference is built by hand because Build has no scheme to look the
// kind up in. BlockOwnerDeletion keeps a foreground deletion of the member
// waiting until its Pod is gone.
func ownerReference(m *v1alpha1.EtcdMember) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         v1alpha1.GroupVersion.String(),
		Kind:               "EtcdMember",
		Name:               m.Name,
		UID:                m.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}
