package etcdsnapshot

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
)

func TestSucceedShowsTheEncryptionAndKeyFingerprint(t *testing.T) {
	const fp = "sha256:0123456789abcdef0123456789abcdef"
	s := &v1alpha1.EtcdSnapshot{}
	succeed(s, &backup.Metadata{Format: backup.MetadataFormatEncrypted, Compression: v1alpha1.CompressionZstd,
		Encryption: v1alpha1.EncryptionAge, KeyFingerprint: fp, SizeBytes: 42, SHA256: strings.Repeat("c", 64), EtcdVersion: "3.6.16"},
		metav1.Now())
	if s.Status.Encryption != v1alpha1.EncryptionAge || s.Status.KeyFingerprint != fp {
		t.Fatalf("status shows encryption %q, fingerprint %q", s.Status.Encryption, s.Status.KeyFingerprint)
	}
	if msg := s.Status.Conditions[0].Message; !strings.Contains(msg, fp) {
		t.Fatalf("the Succeeded message %q does not name the key", msg)
	}

	plain := &v1alpha1.EtcdSnapshot{}
	succeed(plain, &backup.Metadata{Format: backup.MetadataFormatCompressed, Compression: v1alpha1.CompressionZstd,
		SizeBytes: 42, SHA256: strings.Repeat("c", 64), EtcdVersion: "3.6.16"}, metav1.Now())
	if plain.Status.Encryption != "" || plain.Status.KeyFingerprint != "" {
		t.Fatal("an unencrypted snapshot shows an encryption")
	}
}
