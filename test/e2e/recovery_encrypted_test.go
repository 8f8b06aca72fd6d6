//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup/crypt"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// TestRecoverFromAnEncryptedSnapshot is disaster recovery from a snapshot
// encrypted (to a recipient only) in the S3 server: two of three members
// lose their data with the operator stopped, so the quorum is lost for
// good; an EtcdRecovery without a key is refused with SnapshotEncrypted,
// one with another key is refused with RecoveryKeyWrong after its check Job
// ran, and neither deletes a member; the one with the snapshot's identity,
// created while a ResourceQuota leaves no room for its check's Pod, waits
// as RecoveryKeyCheckNotRun with nothing changed, and once the quota is
// lifted rebuilds the cluster under a new cluster ID with exactly the keys of the
// snapshot.
//
// It stops the operator (loseDataDirs, as TestRecoverFromASnapshot does):
// self-heal cannot be switched off and would replace the first wiped
// member before the second is wiped. So it is serial, not parallel; it
// still has its own namespace.
func TestRecoverFromAnEncryptedSnapshot(t *testing.T) {
	framework.Serial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	h := newHealCluster(ctx, t, "dr-encrypted", nil)
	defer func() {
		if t.Failed() {
			env.DumpNamespace(t, h.ns)
		}
	}()
	h.g.Expect(env.EnsureS3Bucket(ctx)).To(Succeed(), "the local cluster's S3 server answers")
	h.g.Expect(env.CopyS3Credentials(ctx, h.ns)).To(Succeed())

	key, identity, err := crypt.GenerateKey()
	h.g.Expect(err).NotTo(HaveOccurred())
	_, other, err := crypt.GenerateKey()
	h.g.Expect(err).NotTo(HaveOccurred())
	for name, data := range map[string]map[string]string{
		// The writer gets the public half only.
		"snapshot-recipient": {"recipient": key.Recipient()},
		"snapshot-key":       {"age.key": string(identity)},
		"other-key":          {"age.key": string(other)},
	} {
		_, err := env.Clientset.CoreV1().Secrets(h.ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: data}, metav1.CreateOptions{})
		h.g.Expect(err).NotTo(HaveOccurred())
	}
	ref := func(name, k string) *v1alpha1.SnapshotEncryption {
		return &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: name, Key: k}}
	}

	h.putKeys(ctx, "dr", recoveryKeys)
	old := h.cluster(ctx)
	dest := framework.S3Destination("e2e/" + h.ns + "/")
	dest.Encryption = ref("snapshot-recipient", "recipient")
	h.g.Expect(h.c.Create(ctx, &v1alpha1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "sealed", Namespace: h.ns},
		Spec:       v1alpha1.EtcdSnapshotSpec{ClusterName: h.name, Destination: dest},
	})).To(Succeed())
	snap, err := framework.WaitForSnapshot(ctx, h.c, h.ns, "sealed", 10*time.Minute)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(snap.Status.Phase).To(Equal(v1alpha1.SnapshotSucceeded))
	h.g.Expect(snap.Status.Encryption).To(Equal(v1alpha1.EncryptionAge))
	h.g.Expect(snap.Status.KeyFingerprint).To(Equal(key.Fingerprint()))
	h.putKeys(ctx, "later", 20)

	survivor := h.pick(ctx, true)
	first := h.pick(ctx, false)
	second := h.pick(ctx, false, first.Name)
	h.loseDataDirs(ctx, nil, first, second)
	h.waitQuorumLost(ctx, survivor.Name)
	var before []string
	for _, m := range h.members(ctx) {
		before = append(before, m.Name)
	}

	t.Log("without a key: refused up front")
	er := h.askRecovery(ctx, "no-key", v1alpha1.EtcdRecoverySpec{
		Source: v1alpha1.RecoverySource{Snapshot: &v1alpha1.SnapshotSource{SnapshotName: "sealed"}}})
	h.expectRefused(er, v1alpha1.SnapshotEncryptedReason, "EtcdSnapshot sealed is encrypted")

	t.Log("with another key: refused after its check, before anything changes")
	er = h.awaitRecovery(ctx, "wrong-key", v1alpha1.EtcdRecoverySpec{
		Source: v1alpha1.RecoverySource{Snapshot: &v1alpha1.SnapshotSource{SnapshotName: "sealed", Encryption: ref("other-key", "age.key")}}})
	h.expectRefused(er, v1alpha1.RecoveryKeyWrongReason, "encrypted to the key "+key.Fingerprint())
	h.expectUnchanged(ctx, before)
	cl := h.cluster(ctx)
	h.g.Expect(cl.Status.ClusterID).To(Equal(old.Status.ClusterID), "the cluster is not reset")
	h.g.Expect(cl.Status.Recovery).To(BeNil(), "the cluster controller never took it up")

	t.Log("with the snapshot's identity while a quota leaves no room for the check's Pod: pending, nothing changed")
	h.fillPodQuota(ctx, "no-room")
	er = &v1alpha1.EtcdRecovery{ObjectMeta: metav1.ObjectMeta{Name: "right-key", Namespace: h.ns}, Spec: v1alpha1.EtcdRecoverySpec{
		ClusterName: h.name,
		Source:      v1alpha1.RecoverySource{Snapshot: &v1alpha1.SnapshotSource{SnapshotName: "sealed", Encryption: ref("snapshot-key", "age.key")}}}}
	h.g.Expect(h.c.Create(ctx, er)).To(Succeed())
	h.g.Expect(framework.WaitFor(ctx, 3*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(er), er); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(er.Status.Conditions, v1alpha1.RecoveryPlannedCondition)
		return c != nil && c.Reason == v1alpha1.RecoveryKeyCheckNotRunReason, nil
	})).To(Succeed(), "the check that cannot run is reported as such, not as a verdict")
	h.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryPending))
	h.g.Expect(meta.FindStatusCondition(er.Status.Conditions, v1alpha1.RecoveryPlannedCondition).Message).To(ContainSubstring("exceeded quota"))
	h.expectUnchanged(ctx, before)
	h.g.Expect(h.c.Get(ctx, client.ObjectKeyFromObject(er), er)).To(Succeed())
	h.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryPending), "still pending, not refused")
	h.g.Expect(er.Status.Plan).To(BeNil())
	h.g.Expect(h.cluster(ctx).Status.Recovery).To(BeNil())

	t.Log("the quota lifted: the check runs and the snapshot's identity recovers the cluster")
	h.g.Expect(env.Clientset.CoreV1().ResourceQuotas(h.ns).Delete(ctx, "no-room", metav1.DeleteOptions{})).To(Succeed())
	h.g.Expect(framework.WaitFor(ctx, 5*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(er), er); err != nil {
			return false, err
		}
		return er.Status.Phase != v1alpha1.RecoveryPending, nil
	})).To(Succeed(), "the operator plans EtcdRecovery right-key once its check can run")
	h.g.Expect(er.Status.Phase).To(BeElementOf(v1alpha1.RecoveryRunning, v1alpha1.RecoverySucceeded))
	h.g.Expect(er.Status.Plan.Snapshot).To(Equal("sealed"))

	cl, err = framework.WaitForClusterReady(ctx, h.c, h.ns, h.name, 10*time.Minute)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(cl.Status.Members).To(HaveLen(3))
	h.g.Expect(cl.Status.ClusterID).NotTo(Equal(old.Status.ClusterID), "the cluster's identity changes")
	h.g.Expect(cl.Status.RestoredFrom).NotTo(BeNil())
	h.g.Expect(cl.Status.RestoredFrom.SnapshotName).To(Equal("sealed"))
	h.g.Expect(cl.Status.RestoredFrom.Encryption).To(Equal(v1alpha1.EncryptionAge))
	h.g.Expect(cl.Status.RestoredFrom.KeyFingerprint).To(Equal(key.Fingerprint()))
	h.expectKeysEverywhere(ctx, "dr", recoveryKeys, 3)
	h.expectKeysEverywhere(ctx, "later", 0, 3)
	h.expectSentinelEverywhere(ctx)

	h.g.Expect(framework.WaitFor(ctx, 2*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(er), er); err != nil {
			return false, err
		}
		return er.Status.Phase == v1alpha1.RecoverySucceeded, nil
	})).To(Succeed(), "EtcdRecovery right-key succeeds")
	cond := meta.FindStatusCondition(er.Status.Conditions, v1alpha1.RecoveredCondition)
	h.g.Expect(cond.Reason).To(Equal(v1alpha1.ClusterRestoredReason))

	events, err := env.Clientset.CoreV1().Events(h.ns).List(ctx, metav1.ListOptions{})
	h.g.Expect(err).NotTo(HaveOccurred())
	// The refusals name the format of a key (AGE-SECRET-KEY-1…), never a key.
	secrets := []string{secretKeyLine(identity), secretKeyLine(other)}
	for _, e := range events.Items {
		for _, k := range secrets {
			h.g.Expect(k).NotTo(BeEmpty())
			h.g.Expect(strings.Contains(e.Message, k)).To(BeFalse(), "no key in Events: %s", e.Message)
		}
	}
	h.putKeys(ctx, "after", 10)
}

// fillPodQuota creates a ResourceQuota that leaves no room for another Pod
// in the namespace, as a namespace whose quota is used up does, and waits
// for the quota controller to count the Pods there, which admission goes by.
// The Pods there keep running.
func (h *healHarness) fillPodQuota(ctx context.Context, name string) {
	h.t.Helper()
	_, err := env.Clientset.CoreV1().ResourceQuotas(h.ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}, metav1.CreateOptions{})
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(framework.WaitFor(ctx, time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		q, err := env.Clientset.CoreV1().ResourceQuotas(h.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, ok := q.Status.Used[corev1.ResourcePods]
		return ok, nil
	})).To(Succeed(), "the quota controller counts the namespace's Pods")
}

// awaitRecovery is askRecovery with room for the key check Job, which
// pulls and runs the operator's image before the plan is made.
func (h *healHarness) awaitRecovery(ctx context.Context, name string, spec v1alpha1.EtcdRecoverySpec) *v1alpha1.EtcdRecovery {
	h.t.Helper()
	spec.ClusterName = h.name
	er := &v1alpha1.EtcdRecovery{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns}, Spec: spec}
	h.g.Expect(h.c.Create(ctx, er)).To(Succeed())
	h.g.Expect(framework.WaitFor(ctx, 5*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(er), er); err != nil {
			return false, err
		}
		return er.Status.Phase != "" && er.Status.Phase != v1alpha1.RecoveryPending, nil
	})).To(Succeed(), "the operator plans or refuses EtcdRecovery %s", name)
	return er
}

// secretKeyLine is the AGE-SECRET-KEY-1 line of an age identity file.
func secretKeyLine(identity []byte) string {
	for _, l := range strings.Split(string(identity), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "AGE-SECRET-KEY-1") {
			return l
		}
	}
	return ""
}
