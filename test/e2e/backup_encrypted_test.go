//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/codec"
	"github.com/quorumctl/etcd-operator/internal/backup/crypt"
	"github.com/quorumctl/etcd-operator/internal/backup/store"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// bboltMagic is what a bbolt file holds at offset 16 of its first page
// (after the page header), little-endian.
const bboltMagic = 0xED0CDAED

// TestBackupEncryptedRoundTripThroughS3 is issue 31's acceptance of item
// 1: an encrypted (to a recipient only), compressed S3 round trip of
// 10,000 keys. The stored object, read straight from the S3 server,
// holds no key or value in clear, is neither a bbolt file nor zstd, and
// only the key's identity opens it (to zstd, and then bbolt); a restore
// with another key is refused with its reason and no seed ever exists;
// the restore with the right key holds exactly the keys.
func TestBackupEncryptedRoundTripThroughS3(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	b := newBackupEnv(ctx, t, "backup-encrypted")
	g := b.g

	key, identity, err := crypt.GenerateKey()
	g.Expect(err).NotTo(HaveOccurred())
	_, other, err := crypt.GenerateKey()
	g.Expect(err).NotTo(HaveOccurred())
	for name, data := range map[string]map[string]string{
		// The writer gets the public half only: it need not be able to read.
		"snapshot-recipient": {"recipient": key.Recipient()},
		"snapshot-key":       {"age.key": string(identity)},
		"other-key":          {"age.key": string(other)},
	} {
		_, err := env.Clientset.CoreV1().Secrets(b.ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: data}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	ref := func(name, k string) *v1alpha1.SnapshotEncryption {
		return &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: name, Key: k}}
	}
	dest := framework.S3Destination(b.prefix)
	dest.Encryption = ref("snapshot-recipient", "recipient")
	b.restoreKey = ref("snapshot-key", "age.key")

	roundTrip(ctx, t, b, dest, func(snap *v1alpha1.EtcdSnapshot, written map[string]string) {
		g.Expect(snap.Status.Encryption).To(Equal(v1alpha1.EncryptionAge))
		g.Expect(snap.Status.KeyFingerprint).To(Equal(key.Fingerprint()))

		t.Log("reading the stored object from the S3 server")
		data, err := store.Get(ctx, b.bucket, snap.Status.Key, 1<<30)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(int64(len(data))).To(Equal(snap.Status.SizeBytes))
		g.Expect(fmt.Sprintf("%x", sha256.Sum256(data))).To(Equal(snap.Status.SHA256), "sha256 is of the stored, encrypted object")
		g.Expect(bytes.Contains(data, []byte("backup/"))).To(BeFalse(), "no key in clear: every key starts with backup/")
		n := 0
		for _, v := range written {
			g.Expect(bytes.Contains(data, []byte(v))).To(BeFalse(), "no value in clear")
			if n++; n == 200 {
				break
			}
		}
		g.Expect(isBbolt(data)).To(BeFalse(), "not a bbolt file")
		g.Expect(isZstd(data)).To(BeFalse(), "not zstd either: compressed, then encrypted")
		g.Expect(bytes.HasPrefix(data, []byte("age-encryption.org/v1\n"))).To(BeTrue(), "an age file")

		t.Log("opening it with the identity: zstd inside, bbolt inside that")
		_, err = crypt.NewReader(mustKey(g, other), bytes.NewReader(data))
		g.Expect(err).To(MatchError(crypt.ErrWrongKey))
		plain, err := crypt.NewReader(key, bytes.NewReader(data))
		g.Expect(err).NotTo(HaveOccurred())
		compressed, err := io.ReadAll(plain)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(isZstd(compressed)).To(BeTrue())
		dec, err := codec.NewReader(v1alpha1.CompressionZstd, bytes.NewReader(compressed))
		g.Expect(err).NotTo(HaveOccurred())
		db, err := io.ReadAll(dec)
		dec.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(isBbolt(db)).To(BeTrue())
		g.Expect(bytes.Contains(db, []byte("backup/0000"))).To(BeTrue(), "the check for keys in clear can fail")

		meta, err := store.Get(ctx, b.bucket, backup.MetadataKey(snap.Status.Key), 1<<16)
		g.Expect(err).NotTo(HaveOccurred())
		m, err := backup.ParseMetadata(meta)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(m.Format).To(Equal(backup.MetadataFormatEncrypted))
		g.Expect(m.KeyFingerprint).To(Equal(key.Fingerprint()))
		g.Expect(string(meta)).NotTo(ContainSubstring("AGE-SECRET-KEY"), "never the key")

		t.Log("a restore with another key is refused before any seed exists")
		b.cluster(ctx, "wrong-key", 1, "", &v1alpha1.RestoreSpec{SnapshotName: "snap", Encryption: ref("other-key", "age.key")})
		cl, err := framework.WaitForClusterCondition(ctx, b.c, b.ns, "wrong-key", v1alpha1.StalledCondition,
			metav1.ConditionTrue, v1alpha1.RestoreEncryptionKeyWrongReason, 5*time.Minute)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cl.Status.ClusterID).To(BeEmpty())
		b.expectNoMembers(ctx, "wrong-key")
		pods, err := env.MemberPods(ctx, b.ns, "wrong-key")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods).To(BeEmpty(), "the seed's Pod never exists")
		g.Expect(framework.WaitFor(ctx, time.Minute, time.Second, func(ctx context.Context) (bool, error) {
			events, err := env.Clientset.CoreV1().Events(b.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, e := range events.Items {
				if e.InvolvedObject.Name == "wrong-key" && e.Reason == v1alpha1.RestoreEncryptionKeyWrongReason {
					return true, nil
				}
			}
			return false, nil
		})).To(Succeed(), "a Warning Event names the reason")
	})

	restored := &v1alpha1.EtcdCluster{}
	g.Expect(b.c.Get(ctx, types.NamespacedName{Namespace: b.ns, Name: "restored"}, restored)).To(Succeed())
	g.Expect(restored.Status.RestoredFrom.Encryption).To(Equal(v1alpha1.EncryptionAge))
	g.Expect(restored.Status.RestoredFrom.KeyFingerprint).To(Equal(key.Fingerprint()))
	events, err := env.Clientset.CoreV1().Events(b.ns).List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range events.Items {
		g.Expect(strings.Contains(e.Message, "AGE-SECRET-KEY")).To(BeFalse(), "no key in Events: %s", e.Message)
	}
}

func mustKey(g *WithT, data []byte) crypt.Key {
	k, err := crypt.ParseKey(data)
	g.Expect(err).NotTo(HaveOccurred())
	return k
}

func isBbolt(data []byte) bool {
	return len(data) >= 20 && binary.LittleEndian.Uint32(data[16:20]) == bboltMagic
}

func isZstd(data []byte) bool {
	return bytes.HasPrefix(data, []byte{0x28, 0xb5, 0x2f, 0xfd})
}
