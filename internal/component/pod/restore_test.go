package pod_test

import (
	"path"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup/agent"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
)

func restoredSeed(mutate ...func(*v1alpha1.EtcdMember)) *v1alpha1.EtcdMember {
	return newMember(append([]func(*v1alpha1.EtcdMember){func(m *v1alpha1.EtcdMember) {
		m.Spec.Bootstrap = true
		m.Spec.Restore = &v1alpha1.MemberRestore{
			Source: v1alpha1.SnapshotDestination{S3: &v1alpha1.S3Destination{
				Endpoint: "http://s3:7070", Bucket: "backups", ForcePathStyle: true, CredentialsSecretName: "s3-creds",
				CABundle: &v1alpha1.CABundleReference{ConfigMapName: "s3-ca", Key: "ca.crt"},
			}},
			Key: "prod/old/snap.db", SHA256: strings.Repeat("ab", 32), SizeBytes: 8224,
			BumpRevision: 1000000000, MarkCompacted: true,
		}
	}}, mutate...)...)
}

func restoreParams(m *v1alpha1.EtcdMember, formed bool) pod.Params {
	p := newParams(m)
	p.OperatorImage = "registry.example/operator:v1"
	p.ClusterFormed = formed
	return p
}

func initContainer(p *corev1.Pod, name string) *corev1.Container {
	for i := range p.Spec.InitContainers {
		if p.Spec.InitContainers[i].Name == name {
			return &p.Spec.InitContainers[i]
		}
	}
	return nil
}

func argValue(c *corev1.Container, name string) string {
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

func TestBuild_RestoreFetchDecodesWhatTheMetadataRecorded(t *testing.T) {
	g := NewWithT(t)
	p := pod.Build(restoreParams(restoredSeed(func(m *v1alpha1.EtcdMember) {
		m.Spec.Restore.Compression = v1alpha1.CompressionZstd
	}), false))
	g.Expect(argValue(initContainer(p, pod.RestoreFetchContainer), "compression")).To(Equal("Zstd"))
}

func TestBuild_RestoreInitContainers(t *testing.T) {
	g := NewWithT(t)
	p := pod.Build(restoreParams(restoredSeed(), false))
	g.Expect(p.Spec.InitContainers).To(HaveLen(2))
	fetch, apply := &p.Spec.InitContainers[0], &p.Spec.InitContainers[1]
	g.Expect(fetch.Name).To(Equal(pod.RestoreFetchContainer), "the download runs first")
	g.Expect(apply.Name).To(Equal(pod.RestoreApplyContainer))

	g.Expect(fetch.Image).To(Equal("registry.example/operator:v1"))
	g.Expect(fetch.Command).To(Equal([]string{"/manager"}))
	g.Expect(fetch.Args[:2]).To(Equal([]string{"restore", "fetch"}))
	g.Expect(argValue(fetch, "sha256")).To(Equal(strings.Repeat("ab", 32)))
	g.Expect(argValue(fetch, "data-dir")).To(Equal(pod.DataDir))
	g.Expect(argValue(fetch, "ca-file")).To(Equal(agent.DefaultCAFile))
	g.Expect(argValue(fetch, "compression")).To(BeEmpty(),
		"an uncompressed snapshot adds no flag, so the Pods of seeds created before compression do not change")

	// The etcd image of the member's own version, running the copied agent.
	g.Expect(apply.Image).To(Equal("registry.example/etcd:v3.6.16"))
	g.Expect(apply.Command).To(Equal([]string{argValue(fetch, "copy-self-to")}))
	g.Expect(argValue(apply, "name")).To(Equal(testMember))
	g.Expect(argValue(apply, "initial-cluster")).To(Equal(testInitial), "the seed alone")
	g.Expect(argValue(apply, "initial-cluster-token")).To(Equal(testToken))
	g.Expect(argValue(apply, "bump-revision")).To(Equal("1000000000"))
	g.Expect(argValue(apply, "mark-compacted")).To(Equal("true"))
	g.Expect(argValue(apply, "data-dir")).To(Equal(pod.DataDir))

	for _, c := range p.Spec.InitContainers {
		var gate *corev1.EnvVar
		for i := range c.Env {
			if c.Env[i].Name == v1alpha1.StartupInitialClusterStateKey {
				gate = &c.Env[i]
			}
		}
		g.Expect(gate).NotTo(BeNil(), "%s must read the gate", c.Name)
		g.Expect(gate.ValueFrom.ConfigMapKeyRef.Name).To(Equal(v1alpha1.StartupConfigName(testMember)), "re-read at every start")
		g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
		g.Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
		g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
		for _, a := range c.Args {
			g.Expect(strings.ToLower(a)).NotTo(ContainSubstring("secretaccesskey"), "no credential in an argument")
		}
	}
	var creds []string
	for _, e := range fetch.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			g.Expect(e.ValueFrom.SecretKeyRef.Name).To(Equal("s3-creds"))
			g.Expect(*e.ValueFrom.SecretKeyRef.Optional).To(BeTrue(), "a missing Secret is reported by the agent, not a stuck Pod")
			creds = append(creds, e.Name)
		}
	}
	g.Expect(creds).To(ConsistOf(agent.EnvAccessKeyID, agent.EnvSecretAccessKey))
	g.Expect(apply.Env).To(HaveLen(1), "etcdutl needs no credentials")
}

// The seed's download reaches the default chain only when the operator's
// policy allowed it for a source without a Secret; otherwise the instance
// metadata service is off.
func TestBuild_RestoreFetchAmbientCredentials(t *testing.T) {
	g := NewWithT(t)
	noSecret := restoredSeed(func(m *v1alpha1.EtcdMember) { m.Spec.Restore.Source.S3.CredentialsSecretName = "" })
	imdsOff := corev1.EnvVar{Name: "AWS_EC2_METADATA_DISABLED", Value: "true"}

	p := restoreParams(noSecret, false)
	fetch := initContainer(pod.Build(p), pod.RestoreFetchContainer)
	g.Expect(fetch.Args).NotTo(ContainElement("--ambient-credentials"))
	g.Expect(fetch.Env).To(ContainElement(imdsOff))

	p.RestoreAmbientCredentials = true
	fetch = initContainer(pod.Build(p), pod.RestoreFetchContainer)
	g.Expect(fetch.Args).To(ContainElement("--ambient-credentials"))
	g.Expect(fetch.Env).NotTo(ContainElement(imdsOff))

	p = restoreParams(restoredSeed(), false)
	p.RestoreAmbientCredentials = true
	fetch = initContainer(pod.Build(p), pod.RestoreFetchContainer)
	g.Expect(fetch.Args).NotTo(ContainElement("--ambient-credentials"), "a named Secret is never ambient")
	g.Expect(fetch.Env).To(ContainElement(imdsOff))
}

func TestBuild_NoRestoreOnceTheClusterExists(t *testing.T) {
	booted := metav1.Now()
	cases := map[string]pod.Params{
		"the cluster formed":           restoreParams(restoredSeed(), true),
		"the seed has booted":          restoreParams(restoredSeed(func(m *v1alpha1.EtcdMember) { m.Status.FirstReadyTime = &booted }), false),
		"the seed's ID is latched":     restoreParams(restoredSeed(func(m *v1alpha1.EtcdMember) { m.Status.MemberID = "8e9e05c52164694d" }), false),
		"a joining member":             restoreParams(restoredSeed(func(m *v1alpha1.EtcdMember) { m.Spec.Bootstrap = false }), false),
		"no restore":                   restoreParams(restoredSeed(func(m *v1alpha1.EtcdMember) { m.Spec.Restore = nil }), false),
		"no operator image configured": newParams(restoredSeed()),
	}
	for name, params := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			p := pod.Build(params)
			g.Expect(p.Spec.InitContainers).To(BeEmpty())
			g.Expect(p.Spec.Volumes).To(HaveLen(1), "only the data volume: nothing of the snapshot's storage")
		})
	}
}

func TestBuild_RestoreFromAVolumeMountsItReadOnly(t *testing.T) {
	g := NewWithT(t)
	m := restoredSeed(func(m *v1alpha1.EtcdMember) {
		m.Spec.Restore.Source = v1alpha1.SnapshotDestination{PersistentVolumeClaim: &v1alpha1.PVCDestination{ClaimName: "backups", Path: "etcd"}}
	})
	p := pod.Build(restoreParams(m, false))
	var claim *corev1.PersistentVolumeClaimVolumeSource
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "backups" {
			claim = v.PersistentVolumeClaim
		}
	}
	g.Expect(claim).NotTo(BeNil())
	g.Expect(claim.ReadOnly).To(BeTrue())
	fetch := initContainer(p, pod.RestoreFetchContainer)
	g.Expect(argValue(fetch, "pvc-mount")).To(Equal(agent.DefaultPVCMount))
	for _, e := range fetch.Env {
		g.Expect(e.ValueFrom.SecretKeyRef).To(BeNil(), "a volume needs no credentials")
	}
}

// The seed of a restored TLS cluster gets both: the restore steps with the
// https peer URL the member will advertise, and etcd's TLS mounts, with no
// volume name taken twice.
func TestBuild_RestoredTLSSeed(t *testing.T) {
	g := NewWithT(t)
	peerURL := "https://m.demo-peer.ns.svc.cluster.local:2380"
	m := restoredSeed(withTLS(peerURL, "https://m.demo.ns.svc.cluster.local:2379", &v1alpha1.MemberTLS{
		Peer:   &v1alpha1.MemberTLSEndpoint{TrustBundle: "demo-peer-trust-aaaa"},
		Client: &v1alpha1.MemberTLSEndpoint{TrustBundle: "demo-client-trust-bbbb", ClientCertAuth: true},
	}))
	p := pod.Build(restoreParams(m, false))
	apply := initContainer(p, pod.RestoreApplyContainer)
	g.Expect(apply).NotTo(BeNil())
	g.Expect(argValue(apply, "initial-advertise-peer-urls")).To(Equal(peerURL), "etcdutl writes the member with the URL etcd advertises")
	g.Expect(argValue(apply, "initial-cluster")).To(Equal(m.Name + "=" + peerURL))
	names := map[string]bool{}
	for _, v := range p.Spec.Volumes {
		g.Expect(names).NotTo(HaveKey(v.Name), "volume %s twice", v.Name)
		names[v.Name] = true
	}
	g.Expect(names).To(HaveKey("tls-certs"))
	g.Expect(names).To(HaveKey("tls-client-trust"))
	var etcdArgs []string
	for _, c := range p.Spec.Containers {
		etcdArgs = append(etcdArgs, c.Command...)
		etcdArgs = append(etcdArgs, c.Args...)
	}
	g.Expect(strings.Join(etcdArgs, " ")).To(ContainSubstring("--initial-advertise-peer-urls=" + peerURL))
}

// The seed's download gets the restore's key as a mounted Secret file,
// optional so that a missing one is reported by the agent, and never in
// its environment or arguments.
func TestBuild_RestoreFetchDecryptsWithAMountedKey(t *testing.T) {
	g := NewWithT(t)
	p := pod.Build(restoreParams(restoredSeed(func(m *v1alpha1.EtcdMember) {
		m.Spec.Restore.Encryption = v1alpha1.EncryptionAge
		m.Spec.Restore.KeyFingerprint = "sha256:0123456789abcdef0123456789abcdef"
		m.Spec.Restore.EncryptionKey = &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: "restore-key", Key: "age.key"}}
	}), false))
	fetch := initContainer(p, pod.RestoreFetchContainer)
	g.Expect(argValue(fetch, "encryption")).To(Equal("Age"))
	g.Expect(argValue(fetch, "key-fingerprint")).To(Equal("sha256:0123456789abcdef0123456789abcdef"))
	g.Expect(argValue(fetch, "encryption-key")).To(Equal("restore-key/age.key"))
	file := argValue(fetch, "encryption-key-file")
	var vol *corev1.Volume
	for i := range p.Spec.Volumes {
		if s := p.Spec.Volumes[i].Secret; s != nil && s.SecretName == "restore-key" {
			vol = &p.Spec.Volumes[i]
		}
	}
	g.Expect(vol).NotTo(BeNil(), "the key's Secret is a volume")
	g.Expect(*vol.Secret.Optional).To(BeTrue())
	g.Expect(vol.Secret.Items).To(ConsistOf(corev1.KeyToPath{Key: "age.key", Path: path.Base(file)}))
	g.Expect(fetch.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: vol.Name, MountPath: path.Dir(file), ReadOnly: true}))
	for _, e := range fetch.Env {
		g.Expect(e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "restore-key").To(BeTrue(),
			"the key is never an environment variable")
	}
	apply := initContainer(p, pod.RestoreApplyContainer)
	g.Expect(apply.VolumeMounts).NotTo(ContainElement(HaveField("Name", vol.Name)), "etcdutl's step never sees the key")
}
