package etcdsnapshot

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
)

// setPhase is the one place the phase and the Succeeded condition are set;
// they always agree.
func setPhase(s *v1alpha1.EtcdSnapshot, phase v1alpha1.SnapshotPhase, reason, message string) {
	s.Status.Phase = phase
	status := metav1.ConditionUnknown
	switch phase {
	case v1alpha1.SnapshotSucceeded:
		status = metav1.ConditionTrue
	case v1alpha1.SnapshotFailed:
		status = metav1.ConditionFalse
	}
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{
		Type:               v1alpha1.SnapshotSucceededCondition,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: s.Generation,
	})
	s.Status.ObservedGeneration = s.Generation
}

// succeed records what the Job stored.
func succeed(s *v1alpha1.EtcdSnapshot, m *backup.Metadata, now metav1.Time) {
	s.Status.Revision = m.Revision
	s.Status.SizeBytes = m.SizeBytes
	s.Status.SHA256 = m.SHA256
	if c, err := m.CompressionOf(); err == nil {
		// The Job's own agent wrote it, so it always parses; a failure
		// leaves the field empty rather than guessing.
		s.Status.Compression = c
	}
	if e, fp, err := m.EncryptionOf(); err == nil {
		s.Status.Encryption, s.Status.KeyFingerprint = e, fp
	}
	s.Status.EtcdVersion = m.EtcdVersion
	s.Status.ClusterID = m.ClusterID
	s.Status.Member = m.MemberID
	s.Status.CompletedAt = &now
	setPhase(s, v1alpha1.SnapshotSucceeded, v1alpha1.SnapshotSavedReason,
		fmt.Sprintf("snapshot of member %s at revision %d stored at %s (%d bytes, compression %s%s) with its metadata; etcd's SHA-256 verified",
			m.MemberID, m.Revision, s.Status.Location, m.SizeBytes, s.Status.Compression, encryptedTo(s.Status)))
}

func fail(s *v1alpha1.EtcdSnapshot, reason, message string, now metav1.Time) {
	s.Status.CompletedAt = &now
	setPhase(s, v1alpha1.SnapshotFailed, reason, message)
}

func encryptedTo(st v1alpha1.EtcdSnapshotStatus) string {
	if st.Encryption == "" {
		return ""
	}
	return fmt.Sprintf(", encrypted with %s to key %s", st.Encryption, st.KeyFingerprint)
}
