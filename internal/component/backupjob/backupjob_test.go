package backupjob_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/component/backupjob"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
)

func snapshot(dest v1alpha1.SnapshotDestination) *v1alpha1.EtcdSnapshot {
	return &v1alpha1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "prod", UID: "snap-uid"},
		Spec:       v1alpha1.EtcdSnapshotSpec{ClusterName: "main", Destination: dest},
	}
}

func cluster() *v1alpha1.EtcdCluster {
	c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "prod", UID: "cluster-uid"}}
	c.Status.ClusterID = "cdf818194e3a8c32"
	return c
}

var s3Dest = v1alpha1.SnapshotDestination{S3: &v1alpha1.S3Destination{
	Endpoint: "http://s3:7070", Bucket: "backups", CredentialsSecretName: "creds",
}}

func TestSnapshotJob(t *testing.T) {
	g := NewWithT(t)
	job := backupjob.Snapshot(snapshot(s3Dest), cluster(), etcdaccess.Shape{}, []string{"http://a:2379", "http://b:2379"}, "prod/main/nightly.db", "op:v1", false)
	g.Expect(job.Name).To(Equal("main-snapshot"), "one per cluster: the name is the lock")
	g.Expect(job.OwnerReferences).To(HaveLen(1))
	g.Expect(job.OwnerReferences[0].Kind).To(Equal("EtcdSnapshot"))
	g.Expect(*job.OwnerReferences[0].Controller).To(BeTrue())
	g.Expect(job.Labels).To(HaveKeyWithValue(v1alpha1.ClusterLabel, "main"), "the operator's cache only sees labelled objects")
	g.Expect(job.Spec.Template.Labels).NotTo(HaveKey(v1alpha1.ClusterLabel), "no Service or budget of the cluster may select the Pod")
	g.Expect(job.Spec.Template.Labels).To(HaveKeyWithValue(v1alpha1.SnapshotLabel, "nightly"))
	g.Expect(*job.Spec.BackoffLimit).To(BeZero())
	g.Expect(job.Spec.ActiveDeadlineSeconds).NotTo(BeNil())

	spec := job.Spec.Template.Spec
	g.Expect(spec.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
	g.Expect(*spec.AutomountServiceAccountToken).To(BeFalse(), "the agent needs no Kubernetes API access")
	g.Expect(spec.ServiceAccountName).To(BeEmpty())
	g.Expect(*spec.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(spec.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	c := spec.Containers[0]
	g.Expect(c.Name).To(Equal(backupjob.ContainerName))
	g.Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
	g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
	g.Expect(c.Command).To(Equal([]string{"/manager"}))
	g.Expect(c.Args[:2]).To(Equal([]string{"snapshot", "save"}))
	g.Expect(c.Args).To(ContainElements("--endpoints=http://a:2379,http://b:2379", "--cluster-id=cdf818194e3a8c32", "--key=prod/main/nightly.db"))
	for _, a := range c.Args {
		g.Expect(a).NotTo(ContainSubstring("accessKey"), "credentials never go into arguments")
	}
	g.Expect(c.Env).To(HaveLen(3))
	for _, e := range c.Env[:2] {
		g.Expect(e.Value).To(BeEmpty())
		g.Expect(e.ValueFrom.SecretKeyRef.Name).To(Equal("creds"))
	}
	g.Expect(c.Env[2]).To(Equal(corev1.EnvVar{Name: backupjob.EnvIMDSDisabled, Value: "true"}))
	g.Expect(c.Args).NotTo(ContainElement("--ambient-credentials"))
}

// Only a destination without a Secret, and only when the operator's policy
// allows it, reaches the SDK's default chain; everywhere else the instance
// metadata service is off and the agent gets no --ambient-credentials.
func TestStorageCredentials(t *testing.T) {
	noSecret := v1alpha1.SnapshotDestination{S3: &v1alpha1.S3Destination{Bucket: "shared"}}
	imdsOff := corev1.EnvVar{Name: backupjob.EnvIMDSDisabled, Value: "true"}
	names := func(env []corev1.EnvVar) []string {
		var out []string
		for _, e := range env {
			out = append(out, e.Name)
		}
		return out
	}
	cases := []struct {
		name     string
		dest     v1alpha1.SnapshotDestination
		ambient  bool
		wantEnv  []string
		wantFlag bool
	}{
		{"secret", s3Dest, false, []string{"BACKUP_S3_ACCESS_KEY_ID", "BACKUP_S3_SECRET_ACCESS_KEY", imdsOff.Name}, false},
		{"secret, ambient asked for: the Secret wins", s3Dest, true, []string{"BACKUP_S3_ACCESS_KEY_ID", "BACKUP_S3_SECRET_ACCESS_KEY", imdsOff.Name}, false},
		{"no secret, not allowed", noSecret, false, []string{imdsOff.Name}, false},
		{"no secret, allowed", noSecret, true, nil, true},
		{"claim", v1alpha1.SnapshotDestination{PersistentVolumeClaim: &v1alpha1.PVCDestination{ClaimName: "c"}}, false, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			for _, job := range []*batchv1.Job{
				backupjob.Snapshot(snapshot(tc.dest), cluster(), etcdaccess.Shape{}, []string{"http://a:2379"}, "k.db", "op:v1", tc.ambient),
				backupjob.Prune(snapshot(tc.dest), "k.db", "op:v1", tc.ambient),
				backupjob.RestoreCheck(cluster(), tc.dest, nil, "k.db", "op:v1", tc.ambient),
			} {
				c := job.Spec.Template.Spec.Containers[0]
				g.Expect(names(c.Env)).To(Equal(tc.wantEnv), job.Name)
				if tc.wantFlag {
					g.Expect(c.Args).To(ContainElement("--ambient-credentials"), job.Name)
				} else {
					g.Expect(c.Args).NotTo(ContainElement("--ambient-credentials"), job.Name)
				}
			}
		})
	}
}

// A snapshot Job reaches a TLS cluster as the operator does: with the
// operator's client certificate and the client trust bundle, once the
// members serve TLS on their client port.
func TestSnapshotJobReachesTLSClusters(t *testing.T) {
	cases := []struct {
		name  string
		shape etcdaccess.Shape
		cert  bool
	}{
		{"plaintext", etcdaccess.Shape{}, false},
		{"server TLS only", etcdaccess.Shape{TLS: true, HTTPS: true}, true},
		{"mutual TLS", etcdaccess.Shape{TLS: true, HTTPS: true, Mutual: true}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			job := backupjob.Snapshot(snapshot(s3Dest), cluster(), tc.shape, []string{"https://a:2379"}, "k.db", "op:v1", false)
			spec := job.Spec.Template.Spec
			ctr := spec.Containers[0]
			var secretVolume *corev1.Volume
			for i := range spec.Volumes {
				if s := spec.Volumes[i].Secret; s != nil && s.SecretName == "main-operator-client" {
					secretVolume = &spec.Volumes[i]
				}
			}
			g.Expect(secretVolume != nil).To(Equal(tc.cert), "the operator's client certificate is mounted")
			certArgs := []string{"--etcd-cacert=/etc/quorumctl/etcd-client/ca.crt", "--etcd-cert=/etc/quorumctl/etcd-client/tls.crt", "--etcd-key=/etc/quorumctl/etcd-client/tls.key"}
			if !tc.cert {
				g.Expect(ctr.Args).NotTo(ContainElements(certArgs[0]))
				return
			}
			g.Expect(ctr.Args).To(ContainElements(certArgs))
			g.Expect(ctr.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: secretVolume.Name, MountPath: "/etc/quorumctl/etcd-client", ReadOnly: true}))
			g.Expect(secretVolume.Secret.Items).To(BeEmpty(), "the whole Secret, so a renewal reaches the Pod")
			g.Expect(*secretVolume.Secret.DefaultMode).To(Equal(int32(0o440)), "readable by the agent's group only")
		})
	}
}

// With etcd's authentication on, a snapshot Job authenticates as the
// operator does: by the operator's client certificate with mutual TLS,
// otherwise with root's password, mounted as a file from the root Secret
// and named by path only, so that it is on no command line.
func TestSnapshotJobAuthenticates(t *testing.T) {
	cases := []struct {
		name     string
		shape    etcdaccess.Shape
		secret   string
		password bool
	}{
		{"plaintext, generated Secret", etcdaccess.Shape{}, "", true},
		{"server TLS only, named Secret", etcdaccess.Shape{TLS: true, HTTPS: true}, "roots", true},
		{"mutual TLS: the certificate", etcdaccess.Shape{TLS: true, HTTPS: true, Mutual: true}, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := cluster()
			c.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true, RootSecretName: tc.secret}
			job := backupjob.Snapshot(snapshot(s3Dest), c, tc.shape, []string{"http://a:2379"}, "k.db", "op:v1", false)
			spec := job.Spec.Template.Spec
			var root *corev1.Volume
			for i := range spec.Volumes {
				if spec.Volumes[i].Name == "etcd-root" {
					root = &spec.Volumes[i]
				}
			}
			arg := "--etcd-password-file=/etc/quorumctl/etcd-root/password"
			if !tc.password {
				g.Expect(root).To(BeNil())
				g.Expect(spec.Containers[0].Args).NotTo(ContainElement(arg))
				return
			}
			g.Expect(root).NotTo(BeNil())
			g.Expect(root.Secret.SecretName).To(Equal(c.RootSecretName()))
			g.Expect(root.Secret.Items).To(Equal([]corev1.KeyToPath{{Key: "password", Path: "password"}}))
			g.Expect(spec.Containers[0].Args).To(ContainElement(arg))
			g.Expect(spec.Containers[0].VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "etcd-root", MountPath: "/etc/quorumctl/etcd-root", ReadOnly: true}))
		})
	}
	g := NewWithT(t)
	job := backupjob.Snapshot(snapshot(s3Dest), cluster(), etcdaccess.Shape{}, []string{"http://a:2379"}, "k.db", "op:v1", false)
	for _, v := range job.Spec.Template.Spec.Volumes {
		g.Expect(v.Name).NotTo(Equal("etcd-root"), "no auth, no password")
	}
}

func TestJobsOnAVolume(t *testing.T) {
	g := NewWithT(t)
	dest := v1alpha1.SnapshotDestination{PersistentVolumeClaim: &v1alpha1.PVCDestination{ClaimName: "backups", Path: "etcd"}}
	save := backupjob.Snapshot(snapshot(dest), cluster(), etcdaccess.Shape{}, []string{"http://a:2379"}, "k.db", "op:v1", false)
	g.Expect(save.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName).To(Equal("backups"))
	g.Expect(save.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ReadOnly).To(BeFalse())
	g.Expect(*save.Spec.Template.Spec.SecurityContext.FSGroup).To(BeNumerically(">", 0), "a fresh claim must be writable")
	g.Expect(save.Spec.Template.Spec.Containers[0].Env).To(BeEmpty())

	check := backupjob.RestoreCheck(cluster(), dest, nil, "k.db", "op:v1", false)
	g.Expect(check.Name).To(Equal("main-restore-check"))
	g.Expect(check.OwnerReferences[0].Kind).To(Equal("EtcdCluster"))
	g.Expect(check.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ReadOnly).To(BeTrue(), "a check never writes")
	g.Expect(check.Spec.Template.Spec.Containers[0].Args[:2]).To(Equal([]string{"snapshot", "inspect"}))

	prune := backupjob.Prune(snapshot(dest), "k.db", "op:v1", false)
	g.Expect(prune.Name).To(Equal("nightly-prune"))
	g.Expect(prune.Spec.Template.Spec.Containers[0].Args[:2]).To(Equal([]string{"snapshot", "delete"}))
}

func TestJobNamesFitALabel(t *testing.T) {
	g := NewWithT(t)
	long := strings.Repeat("a", 60)
	for _, n := range []string{backupjob.SnapshotJobName(long), backupjob.PruneJobName(long + "-x"), backupjob.RestoreCheckJobName(long)} {
		g.Expect(len(n)).To(BeNumerically("<=", 63), n)
	}
	g.Expect(backupjob.PruneJobName(long)).NotTo(Equal(backupjob.PruneJobName(long+"b")), "truncation keeps names apart")
}

func TestObserve(t *testing.T) {
	g := NewWithT(t)
	done := &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}}}
	withMessage := func(msg string) []corev1.Pod {
		return []corev1.Pod{{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: backupjob.ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: msg}},
		}}}}}
	}
	o := backupjob.Observe(done, withMessage(string(backup.ResultOf(backup.ErrCredentials).Encode())))
	g.Expect(o.Done).To(BeTrue())
	g.Expect(o.Result.Code).To(Equal(backup.CodeCredentialsInvalid))
	g.Expect(o.NoResult).To(BeEmpty())

	o = backupjob.Observe(done, withMessage("OOMKilled"))
	g.Expect(o.Result.Code).To(BeEmpty())
	g.Expect(o.NoResult).To(ContainSubstring("BackoffLimitExceeded"))

	stuck := []corev1.Pod{{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name: backupjob.ContainerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "not present"}},
	}}}}}
	o = backupjob.Observe(&batchv1.Job{}, stuck)
	g.Expect(o.Done).To(BeFalse())
	g.Expect(o.Stuck).To(ContainSubstring("ErrImageNeverPull"))
}

func TestInitFailure(t *testing.T) {
	g := NewWithT(t)
	mismatch := string(backup.ResultOf(backup.ErrChecksumMismatch).Encode())
	p := &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{
		Name:                 "restore-fetch",
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: mismatch}},
	}}}}
	res, failed := backupjob.InitFailure(p, "restore-fetch")
	g.Expect(failed).To(BeTrue(), "the failure before the restart in back-off")
	g.Expect(res.Code).To(Equal(backup.CodeChecksumMismatch))

	p.Status.InitContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
	_, failed = backupjob.InitFailure(p, "restore-fetch")
	g.Expect(failed).To(BeFalse(), "it has since succeeded")
	_, failed = backupjob.InitFailure(nil, "restore-fetch")
	g.Expect(failed).To(BeFalse())
}

// The cluster's NetworkPolicy admits exactly the Job Pods that dial etcd:
// its own snapshot Jobs, not another cluster's, and not the Jobs that only
// reach storage.
func TestEtcdClientLabels(t *testing.T) {
	g := NewWithT(t)
	matches := func(job *batchv1.Job) bool {
		return labels.SelectorFromSet(backupjob.EtcdClientLabels("main")).Matches(labels.Set(job.Spec.Template.Labels))
	}
	other := cluster()
	other.Name = "other"
	otherSnap := snapshot(s3Dest)
	otherSnap.Spec.ClusterName = "other"

	g.Expect(matches(backupjob.Snapshot(snapshot(s3Dest), cluster(), etcdaccess.Shape{}, nil, "k", "op:v1", false))).To(BeTrue())
	g.Expect(matches(backupjob.Snapshot(otherSnap, other, etcdaccess.Shape{}, nil, "k", "op:v1", false))).To(BeFalse(), "another cluster's snapshot")
	g.Expect(matches(backupjob.Prune(snapshot(s3Dest), "k", "op:v1", false))).To(BeFalse(), "a prune never dials etcd")
	g.Expect(matches(backupjob.RestoreCheck(cluster(), s3Dest, nil, "k", "op:v1", false))).To(BeFalse(), "a restore check never dials etcd")
}

// A snapshot encrypted to a Secret's key gets it as a file the kubelet
// mounts, optional (the agent reports a missing one), never as an
// environment variable; a prune, which reads nothing, gets no key.
func TestSnapshotJobMountsTheEncryptionKey(t *testing.T) {
	g := NewWithT(t)
	dest := *s3Dest.DeepCopy()
	dest.Encryption = &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: "snap-key", Key: "recipient"}}
	job := backupjob.Snapshot(snapshot(dest), cluster(), etcdaccess.Shape{}, []string{"http://a:2379"}, "prod/main/nightly.db", "op:v1", false)
	spec := job.Spec.Template.Spec
	var vol *corev1.Volume
	for i := range spec.Volumes {
		if s := spec.Volumes[i].Secret; s != nil && s.SecretName == "snap-key" {
			vol = &spec.Volumes[i]
		}
	}
	g.Expect(vol).NotTo(BeNil())
	g.Expect(*vol.Secret.Optional).To(BeTrue())
	g.Expect(vol.Secret.Items).To(HaveLen(1))
	g.Expect(vol.Secret.Items[0].Key).To(Equal("recipient"))
	c := spec.Containers[0]
	g.Expect(c.Args).To(ContainElements("--encryption-key=snap-key/recipient", "--encryption-key-file=/etc/quorumctl/snapshot-key/"+vol.Secret.Items[0].Path))
	g.Expect(c.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: vol.Name, MountPath: "/etc/quorumctl/snapshot-key", ReadOnly: true}))
	for _, e := range c.Env {
		g.Expect(e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "snap-key").To(BeTrue())
	}
	prune := backupjob.Prune(snapshot(dest), "prod/main/nightly.db", "op:v1", false)
	for _, v := range prune.Spec.Template.Spec.Volumes {
		g.Expect(v.Secret == nil || v.Secret.SecretName != "snap-key").To(BeTrue(), "a prune needs no key")
	}
}
