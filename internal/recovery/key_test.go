package recovery

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
)

func withKey(r Request, check *KeyCheck) Request {
	src := *r.Source.Snapshot
	src.Encryption = &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: "keys", Key: "age.key"}}
	r.Source.Snapshot, r.KeyCheck = &src, check
	return r
}

func TestDecide_AnEncryptedSnapshotWaitsForItsKeyCheck(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1_700_000_000, 0)
	snaps := []Snapshot{
		{Name: "sealed", ClusterName: "demo", Succeeded: true, CompletedAt: now.Add(-time.Hour), Revision: 25, Encrypted: true},
		{Name: "plain", ClusterName: "demo", Succeeded: true, CompletedAt: now.Add(-2 * time.Hour), Revision: 20},
	}
	for _, check := range []*KeyCheck{nil, {Snapshot: "sealed"}, {Snapshot: "other", Code: backup.CodeOK}} {
		plan, refused := Decide(lostTwo(), withKey(fromSnapshot("", 0, false), check), snaps, now)
		g.Expect(plan).To(BeNil())
		g.Expect(refused.Reason).To(Equal(v1alpha1.RecoveryKeyCheckingReason))
		g.Expect(refused.Waiting).To(BeTrue(), "a check that has not reported may still pass")
		g.Expect(refused.CheckKeyOf).To(Equal("sealed"), "the latest snapshot is the one whose key is checked")
		g.Expect(refused.Message).To(ContainSubstring("checking the key in Secret keys (key age.key)"))
	}

	// A key named for a snapshot that is not encrypted needs no check.
	plan, refused := Decide(lostTwo(), withKey(fromSnapshot("plain", 0, false), nil), snaps, now)
	g.Expect(refused).To(BeNil())
	g.Expect(plan.Snapshot).To(Equal("plain"))
}

func TestDecide_AnEncryptedSnapshotsKeyRefused(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	snaps := []Snapshot{{Name: "sealed", ClusterName: "demo", Succeeded: true, CompletedAt: now.Add(-time.Hour), Revision: 25, Encrypted: true}}
	for code, reason := range map[backup.Code]string{
		backup.CodeEncryptionKeyMissing: v1alpha1.RecoveryKeyMissingReason,
		backup.CodeEncryptionKeyInvalid: v1alpha1.RecoveryKeyInvalidReason,
		backup.CodeEncryptionKeyWrong:   v1alpha1.RecoveryKeyWrongReason,
		backup.CodeObjectNotFound:       v1alpha1.SnapshotUnreadableReason,
		backup.CodeMetadataInvalid:      v1alpha1.SnapshotUnreadableReason,
	} {
		t.Run(string(code), func(t *testing.T) {
			g := NewWithT(t)
			// Forced, too: spec.force never lets a key that cannot decrypt
			// the snapshot delete the members.
			plan, refused := Decide(lostTwo(), withKey(fromSnapshot("sealed", 0, true),
				&KeyCheck{Snapshot: "sealed", Code: code, Message: "the agent said so"}), snaps, now)
			g.Expect(plan).To(BeNil())
			g.Expect(refused.Reason).To(Equal(reason))
			g.Expect(refused.Waiting).To(BeFalse())
			g.Expect(refused.Message).To(ContainSubstring("EtcdSnapshot sealed cannot be recovered with the key in Secret keys (key age.key): the agent said so"))
		})
	}
}

func TestDecide_AnEncryptedSnapshotWithItsKey(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1_700_000_000, 0)
	snaps := []Snapshot{{Name: "sealed", ClusterName: "demo", Succeeded: true, CompletedAt: now.Add(-time.Hour), Revision: 25, Encrypted: true}}
	plan, refused := Decide(lostTwo(), withKey(fromSnapshot("sealed", 0, false), &KeyCheck{Snapshot: "sealed", Code: backup.CodeOK}), snaps, now)
	g.Expect(refused).To(BeNil())
	g.Expect(plan.Source).To(Equal(v1alpha1.RecoveryFromSnapshot))
	g.Expect(plan.Snapshot).To(Equal("sealed"))
	g.Expect(plan.Revision).To(Equal(int64(25)))
	g.Expect(plan.Removed).To(Equal([]string{"a", "b", "c"}))
}

// A check whose agent never ran is no verdict: the recovery waits for the
// next check, however forced, and names why this one did not run.
func TestDecide_AKeyCheckThatDidNotRun(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1_700_000_000, 0)
	snaps := []Snapshot{{Name: "sealed", ClusterName: "demo", Succeeded: true, CompletedAt: now.Add(-time.Hour), Revision: 25, Encrypted: true}}
	for _, check := range []*KeyCheck{
		{Snapshot: "sealed", NotRun: "Unschedulable: 0/3 nodes are available"},
		{Snapshot: "sealed", NotRun: "DeadlineExceeded: Job was active longer than specified deadline", RetryAt: now.Add(time.Minute)},
	} {
		plan, refused := Decide(lostTwo(), withKey(fromSnapshot("sealed", 0, true), check), snaps, now)
		g.Expect(plan).To(BeNil(), "nothing is planned before the key is known good")
		g.Expect(refused.Reason).To(Equal(v1alpha1.RecoveryKeyCheckNotRunReason))
		g.Expect(refused.Waiting).To(BeTrue(), "an infrastructure failure passes; the recovery is not refused")
		g.Expect(refused.CheckKeyOf).To(Equal("sealed"))
		g.Expect(refused.Message).To(ContainSubstring("gave no verdict, which says nothing of the key or the snapshot: " + check.NotRun + ". Nothing was changed"))
	}
	_, refused := Decide(lostTwo(), withKey(fromSnapshot("sealed", 0, false),
		&KeyCheck{Snapshot: "sealed", NotRun: "x", RetryAt: now.Add(time.Minute)}), snaps, now)
	g.Expect(refused.Message).To(HaveSuffix("the check is started again at 2023-11-14T22:14:20Z"))

	// A result for another snapshot is none for this one, failed or not.
	_, refused = Decide(lostTwo(), withKey(fromSnapshot("sealed", 0, false), &KeyCheck{Snapshot: "other", NotRun: "x"}), snaps, now)
	g.Expect(refused.Reason).To(Equal(v1alpha1.RecoveryKeyCheckingReason))
}
