//go:build envtest

package v1alpha1_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

func s3Dest() *v1alpha1.S3Destination {
	return &v1alpha1.S3Destination{Endpoint: "http://s3.example:7070", Bucket: "backups", ForcePathStyle: true, Insecure: true}
}

func pvcDest() *v1alpha1.PVCDestination {
	return &v1alpha1.PVCDestination{ClaimName: "snapshots", Path: "etcd"}
}

func newSnapshot(name string, mutate func(*v1alpha1.EtcdSnapshot)) *v1alpha1.EtcdSnapshot {
	s := &v1alpha1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1alpha1.EtcdSnapshotSpec{
			ClusterName: "c",
			Destination: v1alpha1.SnapshotDestination{S3: s3Dest()},
		},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func TestSnapshotCreateValidation(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*v1alpha1.EtcdSnapshot)
		message string
	}{
		{"no destination", func(s *v1alpha1.EtcdSnapshot) { s.Spec.Destination = v1alpha1.SnapshotDestination{} },
			"destination must set exactly one of s3 or persistentVolumeClaim"},
		{"two destinations", func(s *v1alpha1.EtcdSnapshot) { s.Spec.Destination.PersistentVolumeClaim = pvcDest() },
			"destination must set exactly one of s3 or persistentVolumeClaim"},
		{"endpoint without a scheme", func(s *v1alpha1.EtcdSnapshot) { s.Spec.Destination.S3.Endpoint = "s3.example:7070" },
			"s3.endpoint must be an http:// or https:// URL"},
		{"prefix climbing out", func(s *v1alpha1.EtcdSnapshot) { s.Spec.Destination.S3.Prefix = "a/../../b" },
			"s3.prefix must be relative and must not contain '..'"},
		{"absolute prefix", func(s *v1alpha1.EtcdSnapshot) { s.Spec.Destination.S3.Prefix = "/etcd" },
			"s3.prefix must be relative and must not contain '..'"},
		{"bucket with upper case", func(s *v1alpha1.EtcdSnapshot) { s.Spec.Destination.S3.Bucket = "Backups" },
			"spec.destination.s3.bucket in body should match"},
		{"absolute claim path", func(s *v1alpha1.EtcdSnapshot) {
			s.Spec.Destination = v1alpha1.SnapshotDestination{PersistentVolumeClaim: &v1alpha1.PVCDestination{ClaimName: "x", Path: "/etc"}}
		}, "persistentVolumeClaim.path must be relative and must not contain '..'"},
		{"claim path climbing out", func(s *v1alpha1.EtcdSnapshot) {
			s.Spec.Destination = v1alpha1.SnapshotDestination{PersistentVolumeClaim: &v1alpha1.PVCDestination{ClaimName: "x", Path: ".."}}
		}, "persistentVolumeClaim.path must be relative and must not contain '..'"},
		{"no cluster", func(s *v1alpha1.EtcdSnapshot) { s.Spec.ClusterName = "" },
			"spec.clusterName in body should be at least 1 chars long"},
		// The storage key is built from it: a path would climb out of the
		// cluster's place in the bucket.
		{"cluster name climbing out", func(s *v1alpha1.EtcdSnapshot) { s.Spec.ClusterName = "../other" },
			"clusterName must be the name of an EtcdCluster"},
		{"cluster name of dots", func(s *v1alpha1.EtcdSnapshot) { s.Spec.ClusterName = ".." },
			"clusterName must be the name of an EtcdCluster"},
		{"unknown compression", func(s *v1alpha1.EtcdSnapshot) { s.Spec.Destination.Compression = "Lz4" },
			`spec.destination.compression: Unsupported value: "Lz4": supported values: "None", "Zstd"`},
		{"compression in lower case", func(s *v1alpha1.EtcdSnapshot) { s.Spec.Destination.Compression = "zstd" },
			`spec.destination.compression: Unsupported value: "zstd": supported values: "None", "Zstd"`},
		{"encryption key Secret that is no name", func(s *v1alpha1.EtcdSnapshot) {
			s.Spec.Destination.Encryption = &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: "Keys/age", Key: "k"}}
		}, "encryption.secretRef.name must be the name of a Secret"},
		{"encryption key that is no Secret key", func(s *v1alpha1.EtcdSnapshot) {
			s.Spec.Destination.Encryption = &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: "keys", Key: "../k"}}
		}, "encryption.secretRef.key must be a Secret key"},
		{"encryption without its key", func(s *v1alpha1.EtcdSnapshot) {
			s.Spec.Destination.Encryption = &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: "keys"}}
		}, "spec.destination.encryption.secretRef.key in body should be at least 1 chars long"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8s.Create(context.Background(), newSnapshot(fmt.Sprintf("snap-create-%d", i), tc.mutate))
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}

func TestSnapshotSpecIsImmutable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newSnapshot("snap-immutable", nil)
	g.Expect(k8s.Create(ctx, s)).To(Succeed())
	s.Spec.Destination.S3.Prefix = "elsewhere/"
	err := k8s.Update(ctx, s)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("the spec of an EtcdSnapshot cannot be changed; create a new EtcdSnapshot"))

	g.Expect(k8s.Get(ctx, keyOf(s), s)).To(Succeed())
	s.Labels = map[string]string{"kept": "yes"}
	g.Expect(k8s.Update(ctx, s)).To(Succeed(), "metadata stays editable")
}

func TestSnapshotDefaults(t *testing.T) {
	g := NewWithT(t)
	s := newSnapshot("snap-defaults", func(s *v1alpha1.EtcdSnapshot) {
		s.Spec.Destination.S3.CABundle = &v1alpha1.CABundleReference{ConfigMapName: "ca"}
	})
	g.Expect(k8s.Create(context.Background(), s)).To(Succeed())
	g.Expect(s.Spec.Destination.S3.CABundle.Key).To(Equal("ca.crt"))
}

// Compression is accepted as None, Zstd or absent, and absent stays
// absent: no CRD default, which the API server would also apply to
// EtcdSnapshots stored before the field existed, uncompressed, and make
// them read as Zstd. The agent applies the default (CompressionOrDefault).
func TestSnapshotCompression(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	for name, c := range map[string]v1alpha1.SnapshotCompression{
		"snap-compression-absent": "", "snap-compression-none": v1alpha1.CompressionNone, "snap-compression-zstd": v1alpha1.CompressionZstd,
	} {
		s := newSnapshot(name, func(s *v1alpha1.EtcdSnapshot) { s.Spec.Destination.Compression = c })
		g.Expect(k8s.Create(ctx, s)).To(Succeed(), name)
		g.Expect(k8s.Get(ctx, keyOf(s), s)).To(Succeed())
		g.Expect(s.Spec.Destination.Compression).To(Equal(c), name)
	}
	// The status field takes only the same names.
	s := newSnapshot("snap-compression-status", nil)
	g.Expect(k8s.Create(ctx, s)).To(Succeed())
	s.Status.Compression = "Lz4"
	err := k8s.Status().Update(ctx, s)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring(`status.compression: Unsupported value: "Lz4"`))
}

func newSchedule(name string, mutate func(*v1alpha1.EtcdSnapshotSchedule)) *v1alpha1.EtcdSnapshotSchedule {
	s := &v1alpha1.EtcdSnapshotSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1alpha1.EtcdSnapshotScheduleSpec{
			ClusterName: "c",
			Schedule:    "*/5 * * * *",
			Destination: v1alpha1.SnapshotDestination{PersistentVolumeClaim: pvcDest()},
			Retention:   &v1alpha1.SnapshotRetention{KeepLast: ptr.To[int32](3)},
		},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func TestScheduleValidation(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*v1alpha1.EtcdSnapshotSchedule)
		message string
	}{
		{"empty retention", func(s *v1alpha1.EtcdSnapshotSchedule) { s.Spec.Retention = &v1alpha1.SnapshotRetention{} },
			"retention needs keepLast, maxAge or both"},
		{"keep none", func(s *v1alpha1.EtcdSnapshotSchedule) { s.Spec.Retention.KeepLast = ptr.To[int32](0) },
			"spec.retention.keepLast in body should be greater than or equal to 1"},
		{"two destinations", func(s *v1alpha1.EtcdSnapshotSchedule) { s.Spec.Destination.S3 = s3Dest() },
			"destination must set exactly one of s3 or persistentVolumeClaim"},
		{"empty schedule", func(s *v1alpha1.EtcdSnapshotSchedule) { s.Spec.Schedule = "" },
			"spec.schedule in body should be at least 1 chars long"},
		{"cluster name with a slash", func(s *v1alpha1.EtcdSnapshotSchedule) { s.Spec.ClusterName = "a/b" },
			"clusterName must be the name of an EtcdCluster"},
		{"unknown compression", func(s *v1alpha1.EtcdSnapshotSchedule) { s.Spec.Destination.Compression = "Gzip" },
			`spec.destination.compression: Unsupported value: "Gzip": supported values: "None", "Zstd"`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8s.Create(context.Background(), newSchedule(fmt.Sprintf("sched-%d", i), tc.mutate))
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
	g := NewWithT(t)
	ok := newSchedule("sched-ok", func(s *v1alpha1.EtcdSnapshotSchedule) {
		s.Spec.Retention = &v1alpha1.SnapshotRetention{MaxAge: &metav1.Duration{Duration: 48 * 3600e9}}
	})
	g.Expect(k8s.Create(context.Background(), ok)).To(Succeed(), "maxAge alone is a retention")
}

func withRestore(r *v1alpha1.RestoreSpec) func(*v1alpha1.EtcdCluster) {
	return func(c *v1alpha1.EtcdCluster) { c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Restore: r} }
}

func TestRestoreCreateValidation(t *testing.T) {
	source := &v1alpha1.RestoreSource{S3: s3Dest(), Key: "ns/c/snap.db"}
	cases := []struct {
		name    string
		mutate  func(*v1alpha1.EtcdCluster)
		message string
	}{
		{"neither name nor source", withRestore(&v1alpha1.RestoreSpec{}),
			"restore must set exactly one of snapshotName, source or fromSchedule"},
		{"both name and source", withRestore(&v1alpha1.RestoreSpec{SnapshotName: "snap", Source: source}),
			"restore must set exactly one of snapshotName, source or fromSchedule"},
		{"name and schedule", withRestore(&v1alpha1.RestoreSpec{SnapshotName: "snap", FromSchedule: fromSchedule("2026-12-07T01:00:00Z")}),
			"restore must set exactly one of snapshotName, source or fromSchedule"},
		{"source and schedule", withRestore(&v1alpha1.RestoreSpec{Source: source, FromSchedule: fromSchedule("2026-12-07T01:00:00Z")}),
			"restore must set exactly one of snapshotName, source or fromSchedule"},
		{"before not a time", withRestore(&v1alpha1.RestoreSpec{FromSchedule: fromSchedule("yesterday")}),
			"fromSchedule.before must be an RFC 3339 time, such as 2026-12-07T01:00:00Z"},
		{"before without a zone", withRestore(&v1alpha1.RestoreSpec{FromSchedule: fromSchedule("2026-12-07T01:00:00")}),
			"fromSchedule.before must be an RFC 3339 time"},
		{"before with a space", withRestore(&v1alpha1.RestoreSpec{FromSchedule: fromSchedule("2026-12-07 01:00:00Z")}),
			"fromSchedule.before must be an RFC 3339 time"},
		{"before not in the calendar", withRestore(&v1alpha1.RestoreSpec{FromSchedule: fromSchedule("2026-02-31T01:00:00Z")}),
			"fromSchedule.before must be a time that exists in the calendar"},
		{"schedule name not a name", withRestore(&v1alpha1.RestoreSpec{FromSchedule: &v1alpha1.RestoreFromSchedule{Name: "Nightly_1", Before: "2026-12-07T01:00:00Z"}}),
			"fromSchedule.name must be the name of an EtcdSnapshotSchedule"},
		{"source without storage", withRestore(&v1alpha1.RestoreSpec{Source: &v1alpha1.RestoreSource{Key: "k"}}),
			"source must set exactly one of s3 or persistentVolumeClaim"},
		{"source with both storages", withRestore(&v1alpha1.RestoreSpec{Source: &v1alpha1.RestoreSource{S3: s3Dest(), PersistentVolumeClaim: pvcDest(), Key: "k"}}),
			"source must set exactly one of s3 or persistentVolumeClaim"},
		{"key climbing out", withRestore(&v1alpha1.RestoreSpec{Source: &v1alpha1.RestoreSource{PersistentVolumeClaim: pvcDest(), Key: "../x.db"}}),
			"source.key must be relative and must not contain '..'"},
		{"negative bump", withRestore(&v1alpha1.RestoreSpec{SnapshotName: "snap", BumpRevision: ptr.To[int64](-1)}),
			"spec.bootstrap.restore.bumpRevision in body should be greater than or equal to 0"},
		{"restore key Secret that is no name", withRestore(&v1alpha1.RestoreSpec{SnapshotName: "snap",
			Encryption: &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: "-keys", Key: "age.key"}}}),
			"encryption.secretRef.name must be the name of a Secret"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8s.Create(context.Background(), newCluster(fmt.Sprintf("restore-create-%d", i), tc.mutate))
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}

func fromSchedule(before string) *v1alpha1.RestoreFromSchedule {
	return &v1alpha1.RestoreFromSchedule{Name: "nightly", Before: before}
}

func TestRestoreFromScheduleAccepted(t *testing.T) {
	for i, before := range []string{"2026-12-07T01:00:00Z", "2026-12-07T02:00:00+01:00", "2026-12-07T01:00:00.25Z"} {
		g := NewWithT(t)
		c := newCluster(fmt.Sprintf("restore-asof-%d", i), withRestore(&v1alpha1.RestoreSpec{FromSchedule: fromSchedule(before)}))
		g.Expect(k8s.Create(context.Background(), c)).To(Succeed(), before)
		g.Expect(c.Spec.Bootstrap.Restore.FromSchedule.Before).To(Equal(before), "kept as given")
	}
}

func TestRestoreDefaults(t *testing.T) {
	g := NewWithT(t)
	c := newCluster("restore-defaults", withRestore(&v1alpha1.RestoreSpec{SnapshotName: "snap"}))
	g.Expect(k8s.Create(context.Background(), c)).To(Succeed())
	g.Expect(c.Spec.Bootstrap.Restore.BumpRevision).To(Equal(ptr.To[int64](1000000000)))
	g.Expect(c.Spec.Bootstrap.Restore.MarkCompacted).To(Equal(ptr.To(true)))
	g.Expect(*c.Spec.Bootstrap.Restore.BumpRevision).To(Equal(v1alpha1.DefaultBumpRevision))
}

func TestRestoreCannotChangeAfterCreation(t *testing.T) {
	cases := []struct {
		name    string
		create  func(*v1alpha1.EtcdCluster)
		update  func(*v1alpha1.EtcdCluster)
		message string
	}{
		{"add a restore", nil,
			withRestore(&v1alpha1.RestoreSpec{SnapshotName: "snap"}),
			"spec.bootstrap cannot be added or removed after creation"},
		{"remove the restore", withRestore(&v1alpha1.RestoreSpec{SnapshotName: "snap"}),
			func(c *v1alpha1.EtcdCluster) { c.Spec.Bootstrap = nil },
			"spec.bootstrap cannot be added or removed after creation"},
		{"name another snapshot", withRestore(&v1alpha1.RestoreSpec{SnapshotName: "snap"}),
			func(c *v1alpha1.EtcdCluster) { c.Spec.Bootstrap.Restore.SnapshotName = "other" },
			"spec.bootstrap cannot be changed after creation"},
		{"change the bump", withRestore(&v1alpha1.RestoreSpec{SnapshotName: "snap"}),
			func(c *v1alpha1.EtcdCluster) { c.Spec.Bootstrap.Restore.BumpRevision = ptr.To[int64](5) },
			"spec.bootstrap cannot be changed after creation"},
		{"move the time", withRestore(&v1alpha1.RestoreSpec{FromSchedule: fromSchedule("2026-12-07T01:00:00Z")}),
			func(c *v1alpha1.EtcdCluster) { c.Spec.Bootstrap.Restore.FromSchedule.Before = "2026-12-08T01:00:00Z" },
			"spec.bootstrap cannot be changed after creation"},
		{"drop the restore but keep bootstrap", withRestore(&v1alpha1.RestoreSpec{SnapshotName: "snap"}),
			func(c *v1alpha1.EtcdCluster) { c.Spec.Bootstrap.Restore = nil },
			"spec.bootstrap cannot be changed after creation"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			c := newCluster(fmt.Sprintf("restore-update-%d", i), tc.create)
			g.Expect(k8s.Create(ctx, c)).To(Succeed())
			tc.update(c)
			err := k8s.Update(ctx, c)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
	g := NewWithT(t)
	ctx := context.Background()
	c := newCluster("restore-scale", withRestore(&v1alpha1.RestoreSpec{SnapshotName: "snap"}))
	g.Expect(k8s.Create(ctx, c)).To(Succeed())
	c.Spec.Replicas = ptr.To[int32](5)
	g.Expect(k8s.Update(ctx, c)).To(Succeed(), "the rest of a restored cluster's spec stays editable")
}

func keyOf(s *v1alpha1.EtcdSnapshot) client.ObjectKey { return client.ObjectKeyFromObject(s) }

// TestPreUpgradeSnapshotValidation: spec.rollout.snapshotBeforeUpgrade
// takes a destination under the rules an EtcdSnapshot's has, https above all.
func TestPreUpgradeSnapshotValidation(t *testing.T) {
	with := func(d v1alpha1.SnapshotDestination) func(*v1alpha1.EtcdCluster) {
		return func(c *v1alpha1.EtcdCluster) {
			c.Spec.Rollout.SnapshotBeforeUpgrade = &v1alpha1.PreUpgradeSnapshotSpec{Destination: d}
		}
	}
	plain := s3Dest()
	plain.Insecure = false
	cases := []struct {
		name    string
		mutate  func(*v1alpha1.EtcdCluster)
		message string
	}{
		{"no destination", with(v1alpha1.SnapshotDestination{}), "destination must set exactly one of s3 or persistentVolumeClaim"},
		{"two destinations", with(v1alpha1.SnapshotDestination{S3: s3Dest(), PersistentVolumeClaim: pvcDest()}),
			"destination must set exactly one of s3 or persistentVolumeClaim"},
		{"http without insecure", with(v1alpha1.SnapshotDestination{S3: plain}), "s3.endpoint must be https:// unless s3.insecure is true"},
		{"prefix climbing out", with(v1alpha1.SnapshotDestination{S3: &v1alpha1.S3Destination{Bucket: "backups", Prefix: "../x"}}),
			"s3.prefix must be relative and must not contain '..'"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8s.Create(context.Background(), newCluster(fmt.Sprintf("preupgrade-bad-%d", i), tc.mutate))
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
	for i, d := range []v1alpha1.SnapshotDestination{{S3: s3Dest()}, {PersistentVolumeClaim: pvcDest()},
		{S3: &v1alpha1.S3Destination{Endpoint: "https://s3.example", Bucket: "backups"}}} {
		g := NewWithT(t)
		g.Expect(k8s.Create(context.Background(), newCluster(fmt.Sprintf("preupgrade-ok-%d", i), with(d)))).To(Succeed())
	}
}
