package plugin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

func TestParseDestination(t *testing.T) {
	g := NewWithT(t)
	d, err := parseDestination(snapshotOptions{to: "s3://backups/etcd/prod", endpoint: "http://s3:7070", credential: "creds", pathStyle: true, insecure: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*d.S3).To(Equal(v1alpha1.S3Destination{Endpoint: "http://s3:7070", Bucket: "backups", Prefix: "etcd/prod/",
		ForcePathStyle: true, CredentialsSecretName: "creds", Insecure: true}))
	d, err = parseDestination(snapshotOptions{to: "s3://backups", endpoint: "https://s3.example"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.S3.Insecure).To(BeFalse())
	g.Expect(d.PersistentVolumeClaim).To(BeNil())

	d, err = parseDestination(snapshotOptions{to: "pvc://snapshots/etcd"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*d.PersistentVolumeClaim).To(Equal(v1alpha1.PVCDestination{ClaimName: "snapshots", Path: "etcd"}))

	for _, bad := range []snapshotOptions{
		{to: "backups"}, {to: "gs://bucket"}, {to: "s3:///prefix"}, {to: "s3://b?x=1"},
		{to: "pvc://claim", credential: "creds"}, {to: "s3://key:secret@bucket"}, {to: "s3://key@bucket/p"},
		{to: "s3://b", endpoint: "http://s3:7070"}, {to: "s3://b", endpoint: "https://s3.example", insecure: true},
		{to: "s3://b", insecure: true}, {to: "s3://b", endpoint: "https://key:secret@s3.example"},
		{to: "s3://b", endpoint: "s3.example:7070"}, {to: "s3://b", endpoint: "https://"}, {to: "pvc://claim", insecure: true},
	} {
		_, err := parseDestination(bad)
		g.Expect(err).To(HaveOccurred(), "%+v", bad)
		var usage *usageError
		g.Expect(err).To(BeAssignableToTypeOf(usage))
	}
}

// finishOnRead makes every read of an EtcdSnapshot show it ended, as the
// operator would have made it.
func finishOnRead(w *world, phase v1alpha1.SnapshotPhase, reason, message string) {
	w.funcs.Get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		if s, ok := obj.(*v1alpha1.EtcdSnapshot); ok {
			s.Status.Phase, s.Status.Revision, s.Status.SizeBytes = phase, 42, 8224
			s.Status.Location = "s3://backups/ns1/demo/" + s.Name + ".db"
			meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: v1alpha1.SnapshotSucceededCondition,
				Status: metav1.ConditionFalse, Reason: reason, Message: message})
		}
		return nil
	}
}

func TestSnapshotCreatesAndWaits(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.cluster("demo")
	finishOnRead(w, v1alpha1.SnapshotSucceeded, v1alpha1.SnapshotSavedReason, "")
	r := w.run("snapshot", "demo", "--to", "s3://backups", "--s3-endpoint", "http://s3:7070", "--s3-insecure", "--name", "before-upgrade")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(ContainSubstring("Created EtcdSnapshot before-upgrade of EtcdCluster demo"))
	g.Expect(r.out).To(ContainSubstring("succeeded: revision 42"))
	g.Expect(r.out).To(ContainSubstring("s3://backups/ns1/demo/before-upgrade.db"))
}

func TestSnapshotReportsAFailure(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.cluster("demo")
	finishOnRead(w, v1alpha1.SnapshotFailed, v1alpha1.CredentialsInvalidReason, "the storage refused the credentials")
	r := w.run("snapshot", "demo", "--to", "s3://backups")
	g.Expect(r.code).To(Equal(ExitError))
	g.Expect(r.err).To(ContainSubstring("failed: CredentialsInvalid: the storage refused the credentials"))
}

func TestSnapshotUsage(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.cluster("demo")
	r := w.run("snapshot", "demo")
	g.Expect(r.code).To(Equal(ExitUsage))
	g.Expect(r.err).To(ContainSubstring("snapshot needs --to DESTINATION"))
	r = w.run("snapshot", "demo", "--to", "s3://backups", "--s3-endpoint", "http://s3:7070")
	g.Expect(r.code).To(Equal(ExitUsage))
	g.Expect(r.err).To(ContainSubstring("add --s3-insecure to allow it"))
	r = w.run("snapshot", "demo", "--to", "s3://backups", "--s3-endpoint", "https://s3.example", "--s3-insecure")
	g.Expect(r.code).To(Equal(ExitUsage))
	g.Expect(r.err).To(ContainSubstring("--s3-insecure only allows an http:// endpoint"))
	r = w.run("snapshot", "nope", "--to", "pvc://claim", "--wait=false")
	g.Expect(r.code).To(Equal(ExitError))
	g.Expect(r.err).To(ContainSubstring("EtcdCluster nope not found"))
}

func TestSnapshotsListsNewestFirst(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.cluster("demo")
	at := func(h int) *metav1.Time { t := metav1.NewTime(time.Date(2026, 12, 1, h, 0, 0, 0, time.UTC)); return &t }
	snap := func(name, cluster string, phase v1alpha1.SnapshotPhase, completed *metav1.Time) *v1alpha1.EtcdSnapshot {
		return &v1alpha1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
			Spec: v1alpha1.EtcdSnapshotSpec{ClusterName: cluster},
			Status: v1alpha1.EtcdSnapshotStatus{Phase: phase, CompletedAt: completed, Revision: 7, SizeBytes: 2048,
				Compression: v1alpha1.CompressionZstd, Encryption: v1alpha1.EncryptionAge,
				KeyFingerprint: "sha256:0123456789abcdef0123456789abcdef", Location: "pvc://c/" + name}}
	}
	w.objs = append(w.objs,
		snap("old", "demo", v1alpha1.SnapshotSucceeded, at(1)),
		snap("new", "demo", v1alpha1.SnapshotSucceeded, at(3)),
		snap("running", "demo", v1alpha1.SnapshotRunning, nil),
		snap("other", "another", v1alpha1.SnapshotSucceeded, at(2)),
	)
	r := w.run("snapshots", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	g.Expect(lines).To(HaveLen(4))
	g.Expect(lines[0]).To(HavePrefix("NAME"))
	g.Expect(lines[1]).To(HavePrefix("running"))
	g.Expect(lines[2]).To(HavePrefix("new"))
	g.Expect(lines[3]).To(HavePrefix("old"))
	g.Expect(r.out).NotTo(ContainSubstring("other"))

	r = w.run("snapshots", "demo", "-o", "json")
	var rows []SnapshotReport
	g.Expect(json.Unmarshal([]byte(r.out), &rows)).To(Succeed())
	g.Expect(rows).To(HaveLen(3))
	g.Expect(rows[1].SizeBytes).To(Equal(int64(2048)))
	g.Expect(rows[1].Compression).To(Equal("Zstd"))
	g.Expect(rows[1].Encryption).To(Equal("Age"))
	g.Expect(rows[1].KeyFingerprint).To(Equal("sha256:0123456789abcdef0123456789abcdef"))
}
