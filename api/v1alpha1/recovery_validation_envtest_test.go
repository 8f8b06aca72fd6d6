//go:build envtest

package v1alpha1_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

func newRecovery(name string, mutate func(*v1alpha1.EtcdRecovery)) *v1alpha1.EtcdRecovery {
	r := &v1alpha1.EtcdRecovery{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1alpha1.EtcdRecoverySpec{ClusterName: "demo",
			Source: v1alpha1.RecoverySource{Survivor: &v1alpha1.SurvivorSource{}}},
	}
	if mutate != nil {
		mutate(r)
	}
	return r
}

func TestRecoveryCreateValidation(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*v1alpha1.EtcdRecovery)
		message string
	}{
		{"no source", func(r *v1alpha1.EtcdRecovery) { r.Spec.Source = v1alpha1.RecoverySource{} },
			"source must set exactly one of survivor or snapshot"},
		{"both sources", func(r *v1alpha1.EtcdRecovery) { r.Spec.Source.Snapshot = &v1alpha1.SnapshotSource{} },
			"source must set exactly one of survivor or snapshot"},
		{"no cluster", func(r *v1alpha1.EtcdRecovery) { r.Spec.ClusterName = "" },
			"spec.clusterName"},
		// The key is a SnapshotEncryption, with the restore's rules.
		{"a key in a Secret that cannot exist", func(r *v1alpha1.EtcdRecovery) {
			r.Spec.Source = v1alpha1.RecoverySource{Snapshot: &v1alpha1.SnapshotSource{
				Encryption: &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: "Keys/age", Key: "k"}}}}
		}, "encryption.secretRef.name must be the name of a Secret"},
		{"a key that is a path", func(r *v1alpha1.EtcdRecovery) {
			r.Spec.Source = v1alpha1.RecoverySource{Snapshot: &v1alpha1.SnapshotSource{
				Encryption: &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: "keys", Key: "../k"}}}}
		}, "encryption.secretRef.key must be a Secret key"},
		{"a key with no key", func(r *v1alpha1.EtcdRecovery) {
			r.Spec.Source = v1alpha1.RecoverySource{Snapshot: &v1alpha1.SnapshotSource{
				Encryption: &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: "keys"}}}}
		}, "spec.source.snapshot.encryption.secretRef.key"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8s.Create(context.Background(), newRecovery(fmt.Sprintf("rec-create-%d", i), tc.mutate))
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}

func TestRecoveryAcceptsEitherSource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newRecovery("rec-any-survivor", nil))).To(Succeed(), "survivor: {} picks the member furthest ahead")
	g.Expect(k8s.Create(ctx, newRecovery("rec-named", func(r *v1alpha1.EtcdRecovery) {
		r.Spec.Source.Survivor.Member = "demo-abcde"
		r.Spec.Force = true
	}))).To(Succeed())
	g.Expect(k8s.Create(ctx, newRecovery("rec-snapshot", func(r *v1alpha1.EtcdRecovery) {
		r.Spec.Source = v1alpha1.RecoverySource{Snapshot: &v1alpha1.SnapshotSource{SnapshotName: "nightly", MaxAge: &metav1.Duration{Duration: time.Hour}}}
	}))).To(Succeed())
	g.Expect(k8s.Create(ctx, newRecovery("rec-latest-snapshot", func(r *v1alpha1.EtcdRecovery) {
		r.Spec.Source = v1alpha1.RecoverySource{Snapshot: &v1alpha1.SnapshotSource{}}
	}))).To(Succeed())
	g.Expect(k8s.Create(ctx, newRecovery("rec-encrypted-snapshot", func(r *v1alpha1.EtcdRecovery) {
		r.Spec.Source = v1alpha1.RecoverySource{Snapshot: &v1alpha1.SnapshotSource{
			Encryption: &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: "dr-keys", Key: "age.key"}}}}
	}))).To(Succeed())
}

func TestRecoverySpecIsImmutable(t *testing.T) {
	ctx := context.Background()
	for i, edit := range []func(*v1alpha1.EtcdRecovery){
		func(r *v1alpha1.EtcdRecovery) { r.Spec.Force = true },
		func(r *v1alpha1.EtcdRecovery) { r.Spec.Source.Survivor.Member = "other" },
		func(r *v1alpha1.EtcdRecovery) { r.Spec.ClusterName = "other" },
	} {
		g := NewWithT(t)
		r := newRecovery(fmt.Sprintf("rec-immutable-%d", i), nil)
		g.Expect(k8s.Create(ctx, r)).To(Succeed())
		edit(r)
		err := k8s.Update(ctx, r)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("the spec of an EtcdRecovery cannot be changed; create a new EtcdRecovery to try again"))
	}
	g := NewWithT(t)
	r := newRecovery("rec-status", nil)
	g.Expect(k8s.Create(ctx, r)).To(Succeed())
	r.Status.Phase = v1alpha1.RecoveryRefused
	g.Expect(k8s.Status().Update(ctx, r)).To(Succeed(), "status is the operator's to write")
}

func TestDisasterRecoveryPolicy(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	c := newCluster("dr-default", func(c *v1alpha1.EtcdCluster) {
		c.Spec.DisasterRecovery.Automatic = v1alpha1.AutomaticFromSurvivor
	})
	g.Expect(k8s.Create(ctx, c)).To(Succeed())
	g.Expect(c.Spec.DisasterRecovery.AfterSeconds).To(Equal(ptr.To[int32](300)))
	off := newCluster("dr-off", nil)
	g.Expect(k8s.Create(ctx, off)).To(Succeed())
	g.Expect(off.Spec.DisasterRecovery.Automatic).To(BeEmpty(), "off by default")

	cases := []struct {
		name    string
		mutate  func(*v1alpha1.EtcdCluster)
		message string
	}{
		{"from a survivor of a Memory cluster", func(c *v1alpha1.EtcdCluster) {
			c.Spec.Storage = v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: qty("256Mi")}
			c.Spec.DisasterRecovery.Automatic = v1alpha1.AutomaticFromSurvivor
		}, "disasterRecovery.automatic FromSurvivor is not possible for a Memory cluster"},
		{"too soon", func(c *v1alpha1.EtcdCluster) {
			c.Spec.DisasterRecovery = v1alpha1.DisasterRecoverySpec{Automatic: v1alpha1.AutomaticFromSnapshot, AfterSeconds: ptr.To[int32](5)}
		}, "spec.disasterRecovery.afterSeconds"},
		{"an unknown policy", func(c *v1alpha1.EtcdCluster) { c.Spec.DisasterRecovery.Automatic = "Always" },
			`Unsupported value: "Always"`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8s.Create(ctx, newCluster(fmt.Sprintf("dr-%d", i), tc.mutate))
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
	mem := newCluster("dr-memory-snapshot", func(c *v1alpha1.EtcdCluster) {
		c.Spec.Storage = v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: qty("256Mi")}
		c.Spec.DisasterRecovery.Automatic = v1alpha1.AutomaticFromSnapshot
	})
	g.Expect(k8s.Create(ctx, mem)).To(Succeed(), "a Memory cluster can recover from a snapshot")
}

// status.keyCheck, the record of a key check that gave no verdict, round
// trips through the CRD's schema, as the controller's merge patch of only
// its retryAt must.
func TestRecoveryKeyCheckStatus(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	r := newRecovery("rec-keycheck", nil)
	g.Expect(k8s.Create(ctx, r)).To(Succeed())
	at := metav1.NewTime(time.Unix(1_700_000_000, 0))
	r.Status.Phase = v1alpha1.RecoveryPending
	r.Status.KeyCheck = &v1alpha1.RecoveryKeyCheckStatus{Snapshot: "sealed", Attempt: 2,
		NotRun: "its Pod cannot start: ImagePullBackOff: x", RetryAt: at}
	g.Expect(k8s.Status().Update(ctx, r)).To(Succeed())
	got := &v1alpha1.EtcdRecovery{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(r), got)).To(Succeed())
	g.Expect(got.Status.KeyCheck).To(Equal(r.Status.KeyCheck))

	before := got.DeepCopy()
	got.Status.KeyCheck.RetryAt = metav1.NewTime(at.Add(time.Minute))
	g.Expect(k8s.Status().Patch(ctx, got, client.MergeFrom(before))).To(Succeed())

	got.Status.KeyCheck.Attempt = 0
	err := k8s.Status().Update(ctx, got)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("status.keyCheck.attempt"))
}
