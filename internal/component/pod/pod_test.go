package pod_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
)

const (
	testCluster = "demo"
	testMember  = "demo-x7k2p"
	testNS      = "prod"
	testToken   = "etcd-3f1c"
	testInitial = "demo-x7k2p=http://demo-x7k2p.demo.prod.svc.cluster.local:2380"
)

func newMember(mutate ...func(*v1alpha1.EtcdMember)) *v1alpha1.EtcdMember {
	m := &v1alpha1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: testMember, Namespace: testNS, UID: "member-uid"},
		Spec: v1alpha1.EtcdMemberSpec{
			ClusterName:    testCluster,
			InitialCluster: testInitial,
			ClusterToken:   testToken,
			MemberTemplate: v1alpha1.MemberTemplate{Version: "3.6.16"},
		},
	}
	for _, f := range mutate {
		f(m)
	}
	return m
}

func newParams(m *v1alpha1.EtcdMember) pod.Params {
	return pod.Params{
		Member:          m,
		Namespace:       m.Namespace,
		ClusterDomain:   "cluster.local",
		ImageRepository: "registry.example/etcd",
	}
}

// flag returns the value of one --flag in the etcd container's args.
func flag(p *corev1.Pod, name string) (string, bool) {
	for _, a := range p.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func TestBuildStartupConfig_InitialClusterState(t *testing.T) {
	// Rows marked "bootstrap alone says new" are the ones a derivation from
	// spec.bootstrap alone gets wrong: each would let a seed that lost its data
	// quietly form a fresh single-member cluster.
	booted := metav1.NewTime(time.Unix(1_700_000_000, 0))
	tests := []struct {
		name          string
		bootstrap     bool
		memberID      string
		clusterFormed bool
		booted        bool
		want          string
	}{
		{name: "seed before the cluster exists", bootstrap: true, want: "new"},
		{name: "seed once the cluster is formed (bootstrap alone says new)", bootstrap: true, clusterFormed: true, want: "existing"},
		{name: "seed with a latched member ID (bootstrap alone says new)", bootstrap: true, memberID: "8e9e05c52164694d", want: "existing"},
		{name: "seed with member ID in a formed cluster (bootstrap alone says new)", bootstrap: true, memberID: "8e9e05c52164694d", clusterFormed: true, want: "existing"},
		{name: "seed that booted before anything was latched (bootstrap alone says new)", bootstrap: true, booted: true, want: "existing"},
		{name: "non-seed before the cluster is formed", want: "existing"},
		{name: "non-seed with member ID in a formed cluster", memberID: "91bc3c398fb3c146", clusterFormed: true, want: "existing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m := newMember(func(m *v1alpha1.EtcdMember) {
				m.Spec.Bootstrap = tt.bootstrap
				m.Status.MemberID = tt.memberID
				if tt.booted {
					m.Status.FirstReadyTime = &booted
				}
			})
			p := newParams(m)
			p.ClusterFormed = tt.clusterFormed
			cm := pod.BuildStartupConfig(p)
			g.Expect(cm.Data).To(HaveKeyWithValue(v1alpha1.StartupInitialClusterStateKey, tt.want))
		})
	}
}

func TestBuildStartupConfig_InitialClusterNamesOnlySelfOnceBooted(t *testing.T) {
	g := NewWithT(t)
	joiner := newMember(func(m *v1alpha1.EtcdMember) {
		m.Spec.InitialCluster = "a=http://a:2380,demo-x7k2p=http://demo-x7k2p.demo.prod.svc.cluster.local:2380"
	})
	cm := pod.BuildStartupConfig(newParams(joiner))
	g.Expect(cm.Data).To(HaveKeyWithValue(v1alpha1.StartupInitialClusterKey, joiner.Spec.InitialCluster),
		"before its first boot a member joins with etcd's member list")
	g.Expect(cm.Name).To(Equal(testMember + "-startup"))
	g.Expect(cm.OwnerReferences).To(HaveLen(1))
	g.Expect(cm.OwnerReferences[0].UID).To(BeEquivalentTo("member-uid"))

	booted := metav1.NewTime(time.Unix(1_700_000_000, 0))
	joiner.Status.FirstReadyTime = &booted
	cm = pod.BuildStartupConfig(newParams(joiner))
	g.Expect(cm.Data).To(HaveKeyWithValue(v1alpha1.StartupInitialClusterKey, testInitial),
		"after it, an empty data dir must find no peer to rejoin through")
}

func TestBuild_StartupFlagsComeFromTheConfigMap(t *testing.T) {
	g := NewWithT(t)
	c := pod.Build(newParams(newMember())).Spec.Containers[0]
	for _, a := range c.Args {
		g.Expect(a).NotTo(HavePrefix("--initial-cluster="), "a flag would shadow the re-resolved variable")
		g.Expect(a).NotTo(HavePrefix("--initial-cluster-state="))
	}
	refs := map[string]string{}
	optional := map[string]bool{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
			refs[e.Name] = e.ValueFrom.ConfigMapKeyRef.Name + "/" + e.ValueFrom.ConfigMapKeyRef.Key
			optional[e.Name] = e.ValueFrom.ConfigMapKeyRef.Optional != nil && *e.ValueFrom.ConfigMapKeyRef.Optional
		}
	}
	g.Expect(refs).To(Equal(map[string]string{
		"ETCD_INITIAL_CLUSTER":       testMember + "-startup/ETCD_INITIAL_CLUSTER",
		"ETCD_INITIAL_CLUSTER_STATE": testMember + "-startup/ETCD_INITIAL_CLUSTER_STATE",
		"ETCD_FORCE_NEW_CLUSTER":     testMember + "-startup/ETCD_FORCE_NEW_CLUSTER",
	}))
	g.Expect(optional).To(Equal(map[string]bool{
		"ETCD_INITIAL_CLUSTER": false, "ETCD_INITIAL_CLUSTER_STATE": false,
		// Absent from every ConfigMap but a recovering survivor's: a required
		// reference would keep every other member from starting.
		"ETCD_FORCE_NEW_CLUSTER": true,
	}))
}

// --force-new-cluster reaches etcd only while the member's spec asks for
// it, and the Pod built then says so, so that a survivor's Pod started
// before the flag is told apart and re-created.
func TestForceNewCluster_OnlyWhileTheSpecAsks(t *testing.T) {
	g := NewWithT(t)
	m := newMember()
	g.Expect(pod.BuildStartupConfig(newParams(m)).Data).NotTo(HaveKey(v1alpha1.StartupForceNewClusterKey))
	p := pod.Build(newParams(m))
	g.Expect(p.Annotations).NotTo(HaveKey(pod.ForceNewClusterAnnotation))
	g.Expect(pod.StartedToForce(p.Annotations)).To(BeFalse())

	m.Spec.ForceNewCluster = true
	g.Expect(pod.BuildStartupConfig(newParams(m)).Data).To(HaveKeyWithValue(v1alpha1.StartupForceNewClusterKey, "true"))
	p = pod.Build(newParams(m))
	g.Expect(pod.StartedToForce(p.Annotations)).To(BeTrue())
	g.Expect(pod.Outdated(m, p)).To(BeFalse())
	m.Spec.ForceNewCluster = false
	g.Expect(pod.Outdated(m, p)).To(BeFalse(), "forcing is not a template change: a rollout never restarts for it")
}

func TestBuild_Args(t *testing.T) {
	host := "demo-x7k2p.demo.prod.svc.cluster.local"
	base := []string{
		"--name=demo-x7k2p",
		"--data-dir=/var/lib/etcd/data",
		"--listen-client-urls=http://0.0.0.0:2379",
		"--advertise-client-urls=http://" + host + ":2379",
		"--listen-peer-urls=http://0.0.0.0:2380",
		"--initial-advertise-peer-urls=http://" + host + ":2380",
		"--listen-metrics-urls=http://0.0.0.0:2381",
		"--initial-cluster-token=" + testToken,
		// The member runs 3.6, which takes two learners at once.
		"--max-learners=2",
	}
	// 1Gi by default; a third of what the WAL's 128 MB leaves is the quota.
	defaults := []string{
		"--quota-backend-bytes=315247274",
		"--auto-compaction-mode=periodic",
		"--auto-compaction-retention=1h",
	}
	tests := []struct {
		name    string
		domain  string
		options *v1alpha1.EtcdOptions
		extra   []string
	}{
		{name: "no options gets the defaults", extra: defaults},
		{name: "empty options gets the defaults", options: &v1alpha1.EtcdOptions{}, extra: defaults},
		{name: "empty cluster domain defaults to cluster.local", domain: "-", extra: defaults},
		{name: "trailing dot in the cluster domain", domain: "cluster.local.", extra: defaults},
		{
			name: "all options",
			options: &v1alpha1.EtcdOptions{
				QuotaBackendBytes:       ptr.To[int64](8 << 30),
				AutoCompactionMode:      "periodic",
				AutoCompactionRetention: "1h",
				SnapshotCount:           ptr.To[int64](10000),
			},
			extra: []string{
				"--quota-backend-bytes=8589934592",
				"--auto-compaction-mode=periodic",
				"--auto-compaction-retention=1h",
				"--snapshot-count=10000",
			},
		},
		{
			name:    "some options",
			options: &v1alpha1.EtcdOptions{AutoCompactionMode: "revision", AutoCompactionRetention: "1000"},
			extra:   []string{"--quota-backend-bytes=315247274", "--auto-compaction-mode=revision", "--auto-compaction-retention=1000"},
		},
		{
			name:    "zero quota is passed through, etcd reads it as its default",
			options: &v1alpha1.EtcdOptions{QuotaBackendBytes: ptr.To[int64](0)},
			extra:   []string{"--quota-backend-bytes=0", "--auto-compaction-mode=periodic", "--auto-compaction-retention=1h"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := newParams(newMember(func(m *v1alpha1.EtcdMember) { m.Spec.Options = tt.options }))
			switch tt.domain {
			case "":
			case "-":
				p.ClusterDomain = ""
			default:
				p.ClusterDomain = tt.domain
			}

			c := pod.Build(p).Spec.Containers[0]
			g.Expect(c.Command).To(Equal([]string{"/usr/local/bin/etcd"}))
			g.Expect(c.Args).To(ConsistOf(append(slices.Clone(base), tt.extra...)))
			g.Expect(slices.IsSorted(c.Args)).To(BeTrue(), "args must be sorted: %v", c.Args)
		})
	}
}

func TestBuild_MaxLearnersOnlyWhereEtcdHasIt(t *testing.T) {
	g := NewWithT(t)
	for version, want := range map[string]bool{"3.5.35": false, "3.6.16": true, "3.7.3": true} {
		args := pod.Build(newParams(newMember(func(m *v1alpha1.EtcdMember) { m.Spec.Version = version }))).Spec.Containers[0].Args
		g.Expect(slices.Contains(args, "--max-learners=2")).To(Equal(want), "etcd %s", version)
	}
}

func TestBuild_Image(t *testing.T) {
	tests := []struct {
		name    string
		repo    string
		image   string
		version string
		want    string
	}{
		{name: "repository and version", repo: "registry.example/etcd", version: "3.5.35", want: "registry.example/etcd:v3.5.35"},
		{name: "default version", repo: "registry.example/etcd", want: "registry.example/etcd:v" + v1alpha1.DefaultEtcdVersion},
		{name: "default repository", version: "3.7.3", want: pod.DefaultImageRepository + ":v3.7.3"},
		{name: "no double v", repo: "r/etcd", version: "v3.6.16", want: "r/etcd:v3.6.16"},
		{name: "override wins", repo: "r/etcd", version: "3.6.16", image: "r/etcd@sha256:abc", want: "r/etcd@sha256:abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := newParams(newMember(func(m *v1alpha1.EtcdMember) { m.Spec.Version = tt.version }))
			p.ImageRepository, p.Image = tt.repo, tt.image

			c := pod.Build(p).Spec.Containers[0]
			g.Expect(c.Image).To(Equal(tt.want))
			g.Expect(c.ImagePullPolicy).To(Equal(corev1.PullIfNotPresent))
		})
	}
}

func TestBuild_DataVolume(t *testing.T) {
	tests := []struct {
		name    string
		storage v1alpha1.StorageSpec
		want    corev1.VolumeSource
	}{
		{
			name: "default medium uses the member's claim",
			want: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + testMember}},
		},
		{
			name:    "default medium ignores the size",
			storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("8Gi")), StorageClassName: ptr.To("fast")},
			want:    corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + testMember}},
		},
		{
			name:    "memory is a size-limited tmpfs",
			storage: v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: ptr.To(resource.MustParse("256Mi"))},
			want: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("256Mi")),
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := pod.Build(newParams(newMember(func(m *v1alpha1.EtcdMember) { m.Spec.Storage = tt.storage })))

			g.Expect(p.Spec.Volumes).To(Equal([]corev1.Volume{{Name: "data", VolumeSource: tt.want}}))
			g.Expect(p.Spec.Containers[0].VolumeMounts).To(Equal([]corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}}))
			dataDir, _ := flag(p, "data-dir")
			g.Expect(dataDir).To(HavePrefix("/var/lib/etcd/"), "data dir must be below the mount, away from lost+found")
		})
	}
}

func TestBuild_Security(t *testing.T) {
	g := NewWithT(t)
	p := pod.Build(newParams(newMember()))

	psc := p.Spec.SecurityContext
	g.Expect(psc).NotTo(BeNil())
	g.Expect(psc.RunAsNonRoot).To(HaveValue(BeTrue()))
	g.Expect(psc.RunAsUser).To(HaveValue(BeEquivalentTo(65532)))
	g.Expect(psc.RunAsGroup).To(HaveValue(BeEquivalentTo(65532)))
	g.Expect(psc.FSGroup).To(HaveValue(BeEquivalentTo(65532)))
	g.Expect(psc.FSGroupChangePolicy).To(HaveValue(Equal(corev1.FSGroupChangeOnRootMismatch)))
	g.Expect(psc.SeccompProfile).To(Equal(&corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}))

	g.Expect(p.Spec.Containers).To(HaveLen(1))
	g.Expect(p.Spec.InitContainers).To(BeEmpty())
	sc := p.Spec.Containers[0].SecurityContext
	g.Expect(sc).NotTo(BeNil())
	g.Expect(sc.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
	g.Expect(sc.Capabilities).To(Equal(&corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}))
	g.Expect(sc.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
	g.Expect(sc.Privileged).To(BeNil())
	g.Expect(sc.RunAsUser).To(BeNil(), "the Pod-level user applies; a container override could be root")

	g.Expect(p.Spec.HostNetwork).To(BeFalse())
	g.Expect(p.Spec.HostPID).To(BeFalse())
	g.Expect(p.Spec.HostIPC).To(BeFalse())
	for _, v := range p.Spec.Volumes {
		g.Expect(v.HostPath).To(BeNil())
	}
	g.Expect(p.Spec.EnableServiceLinks).To(HaveValue(BeFalse()))
	g.Expect(p.Spec.AutomountServiceAccountToken).To(HaveValue(BeFalse()))
}

func TestBuild_Container(t *testing.T) {
	g := NewWithT(t)
	p := pod.Build(newParams(newMember()))

	g.Expect(p.Spec.Hostname).To(Equal(testMember))
	g.Expect(p.Spec.Subdomain).To(Equal(v1alpha1.PeerServiceName(testCluster)))
	g.Expect(p.Spec.TerminationGracePeriodSeconds).To(HaveValue(BeEquivalentTo(30)))
	g.Expect(p.Spec.RestartPolicy).To(Equal(corev1.RestartPolicyAlways))

	c := p.Spec.Containers[0]
	g.Expect(c.Name).To(Equal(pod.ContainerName))
	g.Expect(c.Ports).To(Equal([]corev1.ContainerPort{
		{Name: "client", ContainerPort: 2379, Protocol: corev1.ProtocolTCP},
		{Name: "peer", ContainerPort: 2380, Protocol: corev1.ProtocolTCP},
		{Name: "metrics", ContainerPort: 2381, Protocol: corev1.ProtocolTCP},
	}))
	g.Expect(c.ReadinessProbe).NotTo(BeNil())
	g.Expect(c.ReadinessProbe.HTTPGet).To(Equal(&corev1.HTTPGetAction{
		Path: "/health?exclude=NOSPACE", Port: intstr.FromString("metrics"), Scheme: corev1.URISchemeHTTP,
	}))
	g.Expect(c.ReadinessProbe.PeriodSeconds).To(BeEquivalentTo(1))
	g.Expect(c.ReadinessProbe.TimeoutSeconds).To(BeEquivalentTo(2))
	g.Expect(c.ReadinessProbe.FailureThreshold).To(BeEquivalentTo(3))
	g.Expect(c.LivenessProbe).To(BeNil())
	g.Expect(c.StartupProbe).To(BeNil())
	g.Expect(c.TerminationMessagePolicy).To(Equal(corev1.TerminationMessageFallbackToLogsOnError))
}

func TestBuild_Resources(t *testing.T) {
	custom := &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")},
	}
	tests := []struct {
		name      string
		resources *corev1.ResourceRequirements
		want      corev1.ResourceRequirements
	}{
		{
			name: "default requests",
			want: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
			}},
		},
		{name: "member's resources", resources: custom, want: *custom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := pod.Build(newParams(newMember(func(m *v1alpha1.EtcdMember) { m.Spec.Resources = tt.resources }))).Spec.Containers[0].Resources
			g.Expect(got.Requests.Cpu().Equal(*tt.want.Requests.Cpu())).To(BeTrue())
			g.Expect(got.Requests.Memory().Equal(*tt.want.Requests.Memory())).To(BeTrue())
			g.Expect(got.Limits.Memory().Equal(*tt.want.Limits.Memory())).To(BeTrue())
			g.Expect(got.Limits.Cpu().IsZero()).To(Equal(tt.want.Limits.Cpu().IsZero()))
		})
	}
}

func TestServesClients(t *testing.T) {
	g := NewWithT(t)
	m := &v1alpha1.EtcdMember{Status: v1alpha1.EtcdMemberStatus{Role: v1alpha1.MemberRoleVoter}}
	g.Expect(pod.ServesClients(m)).To(BeTrue())
	g.Expect(pod.Labels(m)).To(HaveKeyWithValue(v1alpha1.RoleLabel, v1alpha1.RoleLabelVoter))

	learner := &v1alpha1.EtcdMember{Status: v1alpha1.EtcdMemberStatus{Role: v1alpha1.MemberRoleLearner}}
	g.Expect(pod.ServesClients(learner)).To(BeFalse())

	fenced := m.DeepCopy()
	fenced.Status.Fenced = "its member list differs"
	g.Expect(pod.ServesClients(fenced)).To(BeFalse())
	g.Expect(pod.Labels(fenced)).NotTo(HaveKey(v1alpha1.RoleLabel), "a re-created Pod of a fenced member starts outside the Service")

	leaving := m.DeepCopy()
	leaving.DeletionTimestamp = &metav1.Time{Time: time.Unix(1_800_000_000, 0)}
	g.Expect(pod.ServesClients(leaving)).To(BeFalse())
}

func TestBuild_Metadata(t *testing.T) {
	memberLabels := v1alpha1.MemberLabels(testCluster, testMember)
	withRole := func(l map[string]string) map[string]string {
		out := map[string]string{v1alpha1.RoleLabel: v1alpha1.RoleLabelVoter}
		for k, v := range l {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		name            string
		metadata        *v1alpha1.AdditionalMetadata
		role            v1alpha1.MemberRole
		wantLabels      map[string]string
		wantAnnotations map[string]string
	}{
		{name: "operator labels only", wantLabels: memberLabels},
		{
			name: "additional metadata is added",
			metadata: &v1alpha1.AdditionalMetadata{
				Labels:      map[string]string{"team": "storage"},
				Annotations: map[string]string{"example.com/note": "hi"},
			},
			wantLabels:      with(memberLabels, "team", "storage"),
			wantAnnotations: map[string]string{"example.com/note": "hi"},
		},
		{
			name: "operator labels win",
			metadata: &v1alpha1.AdditionalMetadata{Labels: map[string]string{
				v1alpha1.ClusterLabel: "other", v1alpha1.MemberLabel: "other", "app.kubernetes.io/name": "mine",
			}},
			wantLabels: memberLabels,
		},
		{
			name:       "a user's role label never routes a learner",
			metadata:   &v1alpha1.AdditionalMetadata{Labels: map[string]string{v1alpha1.RoleLabel: v1alpha1.RoleLabelVoter}},
			role:       v1alpha1.MemberRoleLearner,
			wantLabels: memberLabels,
		},
		{name: "a member of unknown role gets no role label", wantLabels: memberLabels},
		{name: "a learner gets no role label", role: v1alpha1.MemberRoleLearner, wantLabels: memberLabels},
		{name: "a known voter is routable at once", role: v1alpha1.MemberRoleVoter, wantLabels: withRole(memberLabels)},
		{
			name:       "a user's role value cannot override the voter label",
			metadata:   &v1alpha1.AdditionalMetadata{Labels: map[string]string{v1alpha1.RoleLabel: "learner"}},
			role:       v1alpha1.MemberRoleVoter,
			wantLabels: withRole(memberLabels),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m := newMember(func(m *v1alpha1.EtcdMember) {
				m.Spec.AdditionalMetadata = tt.metadata
				m.Status.Role = tt.role
			})
			p := pod.Build(newParams(m))

			g.Expect(p.Name).To(Equal(testMember))
			g.Expect(p.Namespace).To(Equal(testNS))
			g.Expect(p.Labels).To(Equal(tt.wantLabels))
			want := map[string]string{pod.TemplateHashAnnotation: pod.TemplateHash(m)}
			for k, v := range tt.wantAnnotations {
				want[k] = v
			}
			g.Expect(p.Annotations).To(Equal(want), "the user's annotations and the template hash")
		})
	}
}

func with(l map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for lk, lv := range l {
		out[lk] = lv
	}
	return out
}

func TestBuild_OwnerReference(t *testing.T) {
	g := NewWithT(t)
	p := pod.Build(newParams(newMember()))

	g.Expect(p.OwnerReferences).To(Equal([]metav1.OwnerReference{{
		APIVersion:         "etcd.quorumctl.io/v1alpha1",
		Kind:               "EtcdMember",
		Name:               testMember,
		UID:                "member-uid",
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}}))
	g.Expect(metav1.GetControllerOf(p).UID).To(BeEquivalentTo("member-uid"))
}

func TestBuild_NamespaceDefaultsToMember(t *testing.T) {
	g := NewWithT(t)
	p := newParams(newMember())
	p.Namespace = ""

	got := pod.Build(p)
	g.Expect(got.Namespace).To(Equal(testNS))
	url, _ := flag(got, "advertise-client-urls")
	g.Expect(url).To(ContainSubstring("." + testNS + ".svc."))
}

func TestBuild_Scheduling(t *testing.T) {
	g := NewWithT(t)
	affinity := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{
				TopologyKey:   "kubernetes.io/hostname",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.ClusterLabel: testCluster}},
			},
		}},
	}}
	spread := []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway}}
	tolerations := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "etcd", Effect: corev1.TaintEffectNoSchedule}}
	m := newMember(func(m *v1alpha1.EtcdMember) {
		m.Spec.Affinity = affinity
		m.Spec.TopologySpreadConstraints = spread
		m.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		m.Spec.Tolerations = tolerations
		m.Spec.PriorityClassName = "system-cluster-critical"
		m.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
		m.Spec.AdditionalMetadata = &v1alpha1.AdditionalMetadata{Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"}}
	})
	snapshot := m.DeepCopy()

	p := pod.Build(newParams(m))
	g.Expect(p.Spec.Affinity).To(Equal(affinity))
	g.Expect(p.Spec.TopologySpreadConstraints).To(Equal(spread))
	g.Expect(p.Spec.NodeSelector).To(Equal(map[string]string{"disk": "ssd"}))
	g.Expect(p.Spec.Tolerations).To(Equal(tolerations))
	g.Expect(p.Spec.PriorityClassName).To(Equal("system-cluster-critical"))
	g.Expect(p.Spec.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "pull"}}))

	// The Pod must share no memory with the member: callers mutate Pods, and
	// the member may be a cached object.
	p.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].Weight = 1
	p.Spec.TopologySpreadConstraints[0].MaxSkew = 9
	p.Spec.NodeSelector["disk"] = "hdd"
	p.Spec.Tolerations[0].Value = "x"
	p.Spec.ImagePullSecrets[0].Name = "x"
	p.Labels["a"] = "x"
	p.Annotations["c"] = "x"
	p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("9")
	g.Expect(m).To(Equal(snapshot))
}

func TestBuild_DefaultScheduling(t *testing.T) {
	g := NewWithT(t)
	p := pod.Build(newParams(newMember()))
	anti := p.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	g.Expect(anti).To(HaveLen(1))
	g.Expect(anti[0].PodAffinityTerm.TopologyKey).To(Equal("kubernetes.io/hostname"))
	g.Expect(anti[0].PodAffinityTerm.LabelSelector.MatchLabels).To(HaveKeyWithValue(v1alpha1.ClusterLabel, testCluster))
	g.Expect(p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty(),
		"preferred only: a one-node cluster must still schedule every member")
	g.Expect(p.Spec.TopologySpreadConstraints).To(HaveLen(1))
	g.Expect(p.Spec.TopologySpreadConstraints[0].TopologyKey).To(Equal("topology.kubernetes.io/zone"))
	g.Expect(p.Spec.TopologySpreadConstraints[0].WhenUnsatisfiable).To(Equal(corev1.ScheduleAnyway))

	user := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
	p = pod.Build(newParams(newMember(func(m *v1alpha1.EtcdMember) { m.Spec.Affinity = user })))
	g.Expect(p.Spec.Affinity).To(Equal(user), "a user's affinity replaces the default")
}

func TestBuild_MemoryLimitDefault(t *testing.T) {
	g := NewWithT(t)
	m := newMember(func(m *v1alpha1.EtcdMember) {
		m.Spec.Storage = v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: ptr.To(resource.MustParse("512Mi"))}
	})
	c := pod.Build(newParams(m)).Spec.Containers[0]
	g.Expect(c.Resources.Limits.Memory().String()).To(Equal("768Mi"), "size plus 256Mi of headroom")
	m.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}
	c = pod.Build(newParams(m)).Spec.Containers[0]
	g.Expect(c.Resources.Limits.Memory().String()).To(Equal("2Gi"), "a user's limit wins")
	pvc := pod.Build(newParams(newMember())).Spec.Containers[0]
	g.Expect(pvc.Resources.Limits).To(BeNil(), "volume members get no default limit")
}

func TestBuild_SchedulingDefaultsOff(t *testing.T) {
	g := NewWithT(t)
	p := pod.Build(newParams(newMember(func(m *v1alpha1.EtcdMember) {
		m.Spec.DefaultScheduling = v1alpha1.DefaultSchedulingDisabled
	})))

	g.Expect(p.Spec.Affinity).To(BeNil())
	g.Expect(p.Spec.TopologySpreadConstraints).To(BeNil())
	g.Expect(p.Spec.NodeSelector).To(BeNil())
	g.Expect(p.Spec.Tolerations).To(BeNil())
	g.Expect(p.Spec.ImagePullSecrets).To(BeNil())
	g.Expect(p.Spec.PriorityClassName).To(BeEmpty())
}

func TestBuild_Deterministic(t *testing.T) {
	g := NewWithT(t)
	m := newMember(func(m *v1alpha1.EtcdMember) {
		m.Spec.Options = &v1alpha1.EtcdOptions{SnapshotCount: ptr.To[int64](5000), AutoCompactionMode: "periodic"}
		m.Spec.AdditionalMetadata = &v1alpha1.AdditionalMetadata{Labels: map[string]string{"a": "1", "b": "2", "c": "3"}}
	})
	first := pod.Build(newParams(m))
	for range 20 {
		g.Expect(pod.Build(newParams(m))).To(Equal(first))
	}
}

func TestTemplateHash(t *testing.T) {
	g := NewWithT(t)
	m := newMember()
	p := pod.Build(newParams(m))
	g.Expect(pod.Outdated(m, p)).To(BeFalse())
	g.Expect(pod.Outdated(m, &corev1.Pod{})).To(BeFalse(), "a Pod from before the annotation is current")

	for name, change := range map[string]func(*v1alpha1.EtcdMember){
		"version":          func(m *v1alpha1.EtcdMember) { m.Spec.Version = "3.6.17" },
		"resources":        func(m *v1alpha1.EtcdMember) { m.Spec.Resources = &corev1.ResourceRequirements{} },
		"options":          func(m *v1alpha1.EtcdMember) { m.Spec.Options = &v1alpha1.EtcdOptions{SnapshotCount: ptr.To[int64](5)} },
		"node selector":    func(m *v1alpha1.EtcdMember) { m.Spec.NodeSelector = map[string]string{"a": "b"} },
		"image repository": func(m *v1alpha1.EtcdMember) { m.Spec.ImageRepository = "mirror.example/etcd" },
	} {
		changed := newMember(change)
		g.Expect(pod.Outdated(changed, p)).To(BeTrue(), "a change of the %s re-creates the Pod", name)
	}
	// What the operator writes for itself does not, nor does the member's
	// identity, which the operator records into older members.
	same := newMember(func(m *v1alpha1.EtcdMember) {
		m.Status.Role = v1alpha1.MemberRoleVoter
		m.Spec.InitialCluster = "x=y"
		m.Spec.PeerURL, m.Spec.ClientURL = "http://x:2380", "http://x:2379"
	})
	g.Expect(pod.Outdated(same, p)).To(BeFalse())
	g.Expect(pod.RestartApproved(same)).To(BeFalse())
	same.Status.RestartApproved = pod.TemplateHash(same)
	g.Expect(pod.RestartApproved(same)).To(BeTrue())
	g.Expect(pod.Leaving(same, p)).To(BeFalse(), "approved, but built from the member's spec")
	changed := newMember(func(m *v1alpha1.EtcdMember) { m.Spec.Version = "3.6.17" })
	g.Expect(pod.Leaving(changed, p)).To(BeFalse(), "outdated, not approved")
	changed.Status.RestartApproved = pod.TemplateHash(changed)
	g.Expect(pod.Leaving(changed, p)).To(BeTrue())
}

func TestBuild_ImageRepositoryOfTheCluster(t *testing.T) {
	g := NewWithT(t)
	m := newMember(func(m *v1alpha1.EtcdMember) { m.Spec.ImageRepository = "mirror.example/etcd" })
	g.Expect(pod.Build(newParams(m)).Spec.Containers[0].Image).To(Equal("mirror.example/etcd:v3.6.16"), "the cluster's own repository wins")
	g.Expect(pod.Build(newParams(newMember())).Spec.Containers[0].Image).To(Equal("registry.example/etcd:v3.6.16"), "else the operator's")
}
