package etcdcluster

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// newRecoveryHarness is the harness with the kinds a restore touches (Jobs,
// EtcdSnapshots) in its scheme, and the operator's image set.
func newRecoveryHarness(t *testing.T) *harness {
	h := newHarness(t)
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = policyv1.AddToScheme(scheme)
	_ = batchv1.AddToScheme(scheme)
	_ = networkingv1.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	c := fakeclient.NewClientBuilder().WithScheme(scheme).
		WithStatusSubresource(&v1alpha1.EtcdCluster{}, &v1alpha1.EtcdMember{}, &v1alpha1.EtcdSnapshot{}, &v1alpha1.EtcdRecovery{}).Build()
	h.c, h.r.Client, h.r.APIReader, h.r.OperatorImage = c, c, c, "op:v1"
	return h
}

// nightly is a succeeded EtcdSnapshot of the harness cluster.
func (h *harness) nightly() {
	ctx := context.Background()
	s := &v1alpha1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: testNS},
		Spec: v1alpha1.EtcdSnapshotSpec{ClusterName: testName, Destination: restoreDest}}
	h.g.Expect(h.c.Create(ctx, s)).To(Succeed())
	// status.key points elsewhere: the restore reads only the key the
	// snapshot's own name, namespace and cluster give.
	s.Status.Phase, s.Status.SHA256, s.Status.Key, s.Status.Revision = v1alpha1.SnapshotSucceeded, strings.Repeat("5", 64), "other-tenant/db/snap.db", 10042
	h.g.Expect(h.c.Status().Update(ctx, s)).To(Succeed())
}

func (h *harness) runningFromSnapshot(name string) *v1alpha1.EtcdRecovery {
	h.t.Helper()
	er := &v1alpha1.EtcdRecovery{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID("uid-" + name)},
		Spec: v1alpha1.EtcdRecoverySpec{ClusterName: testName,
			Source: v1alpha1.RecoverySource{Snapshot: &v1alpha1.SnapshotSource{}}},
	}
	h.g.Expect(h.c.Create(context.Background(), er)).To(Succeed())
	er.Status.Phase = v1alpha1.RecoveryRunning
	er.Status.Plan = &v1alpha1.RecoveryPlan{Source: v1alpha1.RecoveryFromSnapshot, Snapshot: "nightly", Revision: 10042,
		Loses: "every write after revision 10042"}
	h.g.Expect(h.c.Status().Update(context.Background(), er)).To(Succeed())
	return er
}

// The whole snapshot path, each pass twice (once on a restarted operator):
// every member goes without an etcd-side removal, the cluster's identity is
// dropped in one write, and the ordinary bootstrap restores the snapshot
// into a new seed under a new token, which forms a new cluster.
func TestRecovery_FromASnapshot(t *testing.T) {
	h := newRecoveryHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.withFinalizers()
	h.nightly()
	oldID, oldToken := h.cluster().Status.ClusterID, h.cluster().Status.ClusterToken
	h.loseQuorum("demo-a", "demo-b", "demo-c")
	h.reconcile()
	twice := func() {
		h.reconcile()
		h.restartOperator()
		h.r.OperatorImage = "op:v1"
		h.reconcile()
	}
	er := h.runningFromSnapshot("rec")

	h.reconcile()
	rec := h.cluster().Status.Recovery
	h.g.Expect(rec).To(HaveField("Snapshot", "nightly"))
	h.g.Expect(rec).To(HaveField("PreviousClusterID", oldID))
	h.g.Expect(h.members()).To(HaveLen(3), "status.recovery is written before any member goes")

	for range 3 {
		twice()
		h.runFinalizers()
	}
	h.g.Expect(h.members()).To(BeEmpty(), "the survivor's data is not used either")
	h.g.Expect(h.etcd.Removed).To(BeEmpty())
	twice()
	h.g.Expect(h.cluster().Status.ClusterID).To(Equal(oldID), "not before every member's Pod is gone")
	h.collectGarbage()

	h.reconcile()
	cl := h.cluster()
	h.g.Expect(cl.Status.ClusterID).To(BeEmpty(), "the old identity is dropped")
	h.g.Expect(cl.Status.ClusterToken).NotTo(Equal(oldToken), "no member of the old cluster can join the new one")
	h.g.Expect(cl.Status.ClusterToken).To(Equal(v1alpha1.RecoveredClusterToken(cl, cl.Status.Recovery)))
	h.g.Expect(cl.Status.Recovery.ResetAt).NotTo(BeNil())
	h.g.Expect(h.quorumLost().Reason).To(Equal(v1alpha1.RecoveringReason))

	// From here it is the bootstrap of a restored cluster.
	twice()
	h.g.Expect(h.seedMembers()).To(BeEmpty(), "no seed before the snapshot is checked")
	h.g.Expect(h.checkJob().Spec.Template.Spec.Containers[0].Args).To(ContainElement("--key=" + testNS + "/" + testName + "/nightly.db"))
	h.finishCheck(backup.Result{Code: backup.CodeOK, Metadata: goodMetadata("3.6.16")})
	h.reconcile()
	seeds := h.seedMembers()
	h.g.Expect(seeds).To(HaveLen(1))
	seed := seeds[0]
	h.g.Expect(seed.Spec.Restore).NotTo(BeNil())
	h.g.Expect(seed.Spec.Restore.BumpRevision).To(Equal(v1alpha1.DefaultBumpRevision), "revisions never go backwards for old clients")
	h.g.Expect(seed.Spec.Restore.MarkCompacted).To(BeTrue(), "old watches end with a compacted error")
	h.g.Expect(seed.Spec.ClusterToken).To(Equal(cl.Status.ClusterToken))
	h.g.Expect(h.cluster().Status.RestoredFrom.SnapshotName).To(Equal("nightly"))
	h.reconcile()

	// The seed restores and forms a new cluster.
	fresh := etcdfake.New()
	fresh.SetClusterID(0x00c0ffee00c0ffee)
	h.etcd = fresh
	h.r.Dialer = fresh
	h.readyPod(seed.Name)
	h.etcd.AddVoter(seed.Name, h.member(seed.Name).Spec.PeerURL, h.member(seed.Name).Spec.ClientURL)
	h.reconcile()
	h.g.Expect(h.cluster().Status.ClusterID).To(Equal(etcd.FormatMemberID(0x00c0ffee00c0ffee)))
	twice()
	rec = h.cluster().Status.Recovery
	h.g.Expect(rec.RestoredAt).NotTo(BeNil())
	h.g.Expect(h.eventsWith("ClusterRecovered")).NotTo(BeEmpty())

	h.finish(er, v1alpha1.RecoverySucceeded)
	h.reconcile()
	h.g.Expect(h.cluster().Status.Recovery).To(BeNil())
	h.g.Expect(h.cluster().Status.RestoredFrom.RestoredAt).NotTo(BeNil())
	h.labelVoter(seed.Name)
	h.reconcile()
	h.g.Expect(len(h.members())).To(BeNumerically(">=", 2), "and grows back as in a scale-up")
}

// A recovery from an encrypted snapshot hands the key its EtcdRecovery
// names to the restore: the check Job and the seed mount it as a Secret
// file, exactly as for spec.bootstrap.restore.encryption.
func TestRecovery_FromAnEncryptedSnapshotMountsItsKey(t *testing.T) {
	ctx := context.Background()
	h := newRecoveryHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.withFinalizers()
	h.nightly()
	h.loseQuorum("demo-a", "demo-b", "demo-c")
	h.reconcile()
	key := &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: "dr-key", Key: "age.key"}}
	er := &v1alpha1.EtcdRecovery{
		ObjectMeta: metav1.ObjectMeta{Name: "rec", Namespace: testNS, UID: "uid-rec"},
		Spec: v1alpha1.EtcdRecoverySpec{ClusterName: testName,
			Source: v1alpha1.RecoverySource{Snapshot: &v1alpha1.SnapshotSource{SnapshotName: "nightly", Encryption: key}}},
	}
	h.g.Expect(h.c.Create(ctx, er)).To(Succeed())
	er.Status.Phase = v1alpha1.RecoveryRunning
	er.Status.Plan = &v1alpha1.RecoveryPlan{Source: v1alpha1.RecoveryFromSnapshot, Snapshot: "nightly", Revision: 10042}
	h.g.Expect(h.c.Status().Update(ctx, er)).To(Succeed())

	h.reconcile()
	h.g.Expect(h.cluster().Status.Recovery.Encryption).To(Equal(key))
	for range 4 {
		h.reconcile()
		h.runFinalizers()
	}
	h.g.Expect(h.members()).To(BeEmpty())
	h.collectGarbage()
	h.reconcile()
	h.g.Expect(h.cluster().Status.Recovery.ResetAt).NotTo(BeNil())

	h.reconcile()
	check := h.checkJob().Spec.Template.Spec
	h.g.Expect(check.Containers[0].Args).To(ContainElement("--encryption-key=dr-key/age.key"))
	h.g.Expect(check.Volumes).To(ContainElement(HaveField("VolumeSource.Secret.SecretName", "dr-key")))
	for _, e := range check.Containers[0].Env {
		h.g.Expect(e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "dr-key").To(BeTrue(), "the key is a file, never an environment variable")
	}
	h.finishCheck(backup.Result{Code: backup.CodeOK, Metadata: encryptedMetadata()})
	h.reconcile()
	seeds := h.seedMembers()
	h.g.Expect(seeds).To(HaveLen(1))
	r := seeds[0].Spec.Restore
	h.g.Expect(r.Encryption).To(Equal(v1alpha1.EncryptionAge))
	h.g.Expect(r.EncryptionKey).To(Equal(key))
	h.g.Expect(r.KeyFingerprint).To(Equal(testFingerprint))
}
