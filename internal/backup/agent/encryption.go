package agent

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/crypt"
)

// DefaultKeyFile is where the Pods mount the Secret key an encryption
// names. The key reaches the agent only as this file: never an argument,
// an environment variable, a log line or a result.
const DefaultKeyFile = "/etc/quorumctl/snapshot-key/key"

// maxKeyFile bounds what is read of the key file: an age identity is 74
// characters.
const maxKeyFile = 4 << 10

// KeyFile is the age key a command encrypts to or decrypts with.
type KeyFile struct {
	// Ref names the Secret key, "secret/key", for messages; empty when no
	// key is named.
	Ref string
	// Path is where the kubelet mounted it.
	Path string
}

// KeyRef renders a Secret key reference as KeyFile.Ref.
func KeyRef(e *v1alpha1.SnapshotEncryption) string {
	if e == nil {
		return ""
	}
	return e.SecretRef.Name + "/" + e.SecretRef.Key
}

// Named reports whether a key is named.
func (k KeyFile) Named() bool { return k.Ref != "" }

func (k KeyFile) flags() []string {
	if !k.Named() {
		return nil
	}
	return []string{"--encryption-key=" + k.Ref, "--encryption-key-file=" + k.Path}
}

func keyFlags(fs *flag.FlagSet, k *KeyFile) {
	fs.StringVar(&k.Ref, "encryption-key", "", "the Secret key (secret/key) the age key comes from, for messages")
	fs.StringVar(&k.Path, "encryption-key-file", DefaultKeyFile, "where that Secret key is mounted")
}

// read is the key file's content. A file that is not there is a Secret,
// or a key in it, that does not exist: the volume is optional, so that
// this is reported rather than left as a Pod that never starts.
func (k KeyFile) read() ([]byte, error) {
	if !k.Named() {
		return nil, fmt.Errorf("%w: no key is named", backup.ErrEncryptionKeyMissing)
	}
	f, err := os.Open(k.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: Secret %s does not exist or lacks the key %s", backup.ErrEncryptionKeyMissing,
			secretOf(k.Ref), keyOf(k.Ref))
	case err != nil:
		return nil, fmt.Errorf("failed to read the encryption key %s: %w", k.Ref, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile))
	switch {
	case err != nil:
		return nil, fmt.Errorf("failed to read the encryption key %s: %w", k.Ref, err)
	case len(strings.TrimSpace(string(data))) == 0:
		return nil, fmt.Errorf("%w: the Secret key %s is empty", backup.ErrEncryptionKeyMissing, k.Ref)
	}
	return data, nil
}

// Recipient is what a snapshot is encrypted to: the file may hold the
// identity or only its public half.
func (k KeyFile) Recipient() (crypt.Recipient, error) {
	data, err := k.read()
	if err != nil {
		return crypt.Recipient{}, err
	}
	r, err := crypt.ParseRecipient(data)
	if err != nil {
		return crypt.Recipient{}, fmt.Errorf("the Secret key %s: %w", k.Ref, err)
	}
	return r, nil
}

// Identity is what decrypts: the file must hold the identity.
func (k KeyFile) Identity() (crypt.Key, error) {
	data, err := k.read()
	if err != nil {
		return crypt.Key{}, err
	}
	key, err := crypt.ParseKey(data)
	if err != nil {
		hint := ""
		if strings.HasPrefix(strings.TrimSpace(string(data)), "age1") {
			hint = "; it holds a recipient (age1…), which can encrypt but not decrypt"
		}
		return crypt.Key{}, fmt.Errorf("the Secret key %s: %w%s", k.Ref, err, hint)
	}
	return key, nil
}

// decryptionKey is the key a restore of a snapshot recorded with
// fingerprint needs, checked against it before a byte of the object is
// read; the zero Key when the snapshot is not encrypted.
func (k KeyFile) decryptionKey(fingerprint string) (crypt.Key, error) {
	if fingerprint == "" {
		return crypt.Key{}, nil
	}
	if !k.Named() {
		return crypt.Key{}, backup.CheckKey(fingerprint, "")
	}
	key, err := k.Identity()
	if err != nil {
		return crypt.Key{}, err
	}
	return key, backup.CheckKey(fingerprint, key.Fingerprint())
}

func secretOf(ref string) string { s, _, _ := strings.Cut(ref, "/"); return s }
func keyOf(ref string) string    { _, k, _ := strings.Cut(ref, "/"); return k }
