package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/codec"
	"github.com/quorumctl/etcd-operator/internal/backup/crypt"
	"github.com/quorumctl/etcd-operator/internal/backup/store"
)

// Files of the restore work dir, on the seed's own data volume.
const (
	// SnapshotFile is the downloaded, checked snapshot.
	SnapshotFile = "snapshot.db"
	// restoringDir is where etcdutl restores before the data dir is moved
	// into place.
	restoringDir = "data.restoring"
)

// FetchArgs is the command line of restore fetch.
type FetchArgs struct {
	StorageArgs
	// SHA256 and Size are what the download must have: of the stored
	// object, before it is decoded.
	SHA256 string
	Size   int64
	// Compression is how the object is encoded, as its metadata records
	// it (never the destination's setting, which is for new snapshots).
	Compression v1alpha1.SnapshotCompression
	// Encryption and KeyFingerprint are how the object is encrypted and to
	// which key, from its metadata; StorageArgs.EncryptionKey must be that
	// key, which is checked before the payload is read.
	Encryption     v1alpha1.SnapshotEncryptionScheme
	KeyFingerprint string
	// DataDir is the seed's etcd data dir; WorkDir a directory on the same
	// volume.
	DataDir, WorkDir string
	// CopySelfTo, if set, is where the agent puts a copy of its own binary,
	// for the restore step that runs in the etcd image.
	CopySelfTo string
}

// Args renders the command line.
func (a FetchArgs) Args() []string {
	out := append([]string{"restore", "fetch"}, a.flags()...)
	out = append(out, "--sha256="+a.SHA256, "--size="+strconv.FormatInt(a.Size, 10),
		"--data-dir="+a.DataDir, "--work-dir="+a.WorkDir)
	if a.Compression != "" {
		out = append(out, "--compression="+string(a.Compression))
	}
	if a.Encryption != "" {
		out = append(out, "--encryption="+string(a.Encryption), "--key-fingerprint="+a.KeyFingerprint)
	}
	if a.CopySelfTo != "" {
		out = append(out, "--copy-self-to="+a.CopySelfTo)
	}
	return out
}

func parseFetch(args []string, env Env) (FetchArgs, string, error) {
	var a FetchArgs
	fs := newFlagSet("restore fetch", env)
	decode := storageFlags(fs, &a.StorageArgs)
	fs.StringVar(&a.SHA256, "sha256", "", "the snapshot's recorded SHA-256 (hex)")
	fs.Int64Var(&a.Size, "size", 0, "the snapshot's recorded size")
	fs.StringVar(&a.DataDir, "data-dir", "", "etcd's data dir")
	fs.StringVar(&a.WorkDir, "work-dir", "", "a directory on the data dir's volume")
	fs.StringVar(&a.CopySelfTo, "copy-self-to", "", "where to copy this binary")
	var compression string
	fs.StringVar(&compression, "compression", "", "how the stored object is encoded, from its metadata: None (the default) or Zstd")
	var encryption string
	fs.StringVar(&encryption, "encryption", "", "how the stored object is encrypted, from its metadata: Age, or empty")
	fs.StringVar(&a.KeyFingerprint, "key-fingerprint", "", "the fingerprint of the key it is encrypted to, from its metadata")
	logPath := terminationFlag(fs)
	err := parse(fs, args, decode, func() error {
		a.Encryption = v1alpha1.SnapshotEncryptionScheme(encryption)
		switch {
		case a.Encryption != "" && a.Encryption != v1alpha1.EncryptionAge:
			return &backup.UnsupportedError{What: fmt.Sprintf("encryption %q", encryption), Known: string(v1alpha1.EncryptionAge)}
		case (a.Encryption == "") != (a.KeyFingerprint == ""):
			return fmt.Errorf("%w: --encryption and --key-fingerprint go together", backup.ErrInvalidArguments)
		}
		if len(a.SHA256) != 64 || a.Size <= 0 || a.DataDir == "" || a.WorkDir == "" {
			return fmt.Errorf("%w: --sha256, --size, --data-dir and --work-dir are required", backup.ErrInvalidArguments)
		}
		a.Compression = v1alpha1.SnapshotCompression(compression)
		if !backup.KnownCompression(a.Compression) {
			// Refused as the check Job refuses it, by its own code.
			return &backup.UnsupportedError{What: fmt.Sprintf("compression %q", compression),
				Known: fmt.Sprintf("%s and %s", v1alpha1.CompressionNone, v1alpha1.CompressionZstd)}
		}
		return nil
	})
	return a, *logPath, err
}

func runFetch(ctx context.Context, args []string, env Env) (backup.Result, string) {
	a, logPath, err := parseFetch(args, env)
	if err != nil {
		return backup.ResultOf(err), logPath
	}
	if a.CopySelfTo != "" {
		if err := copySelf(a.CopySelfTo); err != nil {
			return backup.ResultOf(err), logPath
		}
	}
	if !gateOpen(a.DataDir, env) {
		_, _ = fmt.Fprintln(env.Stdout, "the cluster exists or the data dir is in place; nothing to fetch")
		return backup.Result{Code: backup.CodeOK, Skipped: true}, logPath
	}
	st, err := openStore(ctx, a.StorageArgs, env)
	if err != nil {
		return backup.ResultOf(err), logPath
	}
	return backup.ResultOf(Fetch(ctx, st, a, env.Stdout)), logPath
}

// gateOpen is backup.RestoreNeeded for this Pod.
func gateOpen(dataDir string, env Env) bool {
	_, err := os.Stat(dataDir)
	return backup.RestoreNeeded(env.Getenv(EnvInitialClusterState), !errors.Is(err, fs.ErrNotExist))
}

// Fetch downloads the snapshot into the work dir and decrypts and decodes
// it on the way, in one streaming pass (receive). The recorded SHA-256 and
// size are of the stored object; etcd's own digest is checked on the
// decoded stream. The file gets its final name only when both match
// (backup.CheckDownload); a refused or failed download leaves no file. The
// key is checked against the recorded fingerprint before the store is
// read.
func Fetch(ctx context.Context, st store.Store, a FetchArgs, log io.Writer) error {
	key, err := a.EncryptionKey.decryptionKey(a.KeyFingerprint)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(a.WorkDir); err != nil {
		return fmt.Errorf("failed to clear %s: %w", a.WorkDir, err)
	}
	if err := os.MkdirAll(a.WorkDir, 0o700); err != nil {
		return fmt.Errorf("failed to create %s: %w", a.WorkDir, err)
	}
	src, err := st.Reader(ctx, a.Key)
	if err != nil {
		return err
	}
	defer src.Close()
	final := filepath.Join(a.WorkDir, SnapshotFile)
	partial := final + ".partial"
	f, err := os.OpenFile(partial, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("failed to create %s: %w", partial, err)
	}
	defer f.Close()
	// Whatever is refused leaves nothing of itself: the partial file holds
	// bytes no check vouches for, as many as the snapshot, on the seed's
	// data volume.
	kept := false
	defer func() {
		if !kept {
			_ = os.Remove(partial)
		}
	}()
	d, r, err := receive(f, src, a, key)
	if err != nil {
		return err
	}
	if err := backup.CheckDownload(d, a.Size, a.SHA256); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("failed to sync %s: %w", partial, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("failed to close %s: %w", partial, err)
	}
	if err := os.Rename(partial, final); err != nil {
		return fmt.Errorf("failed to rename %s: %w", partial, err)
	}
	kept = true
	_, _ = fmt.Fprintf(log, "downloaded and checked %d bytes (%s%s), sha256 %s; decoded %d bytes, etcd's sha256 %s verified\n",
		d.Size, compressionName(a.Compression), decryptedWith(a), d.SHA256, r.Size(), r.EtcdSHA256())
	return nil
}

// receive is the one pass over the stored object: store → hash of the
// stored object → age → decoder → check of etcd's digest → dst. An object
// stored as etcd sent it (backup.StoredAsSent) is hashed once, by the
// checksum reader, which gives both its SHA-256 and etcd's check; a
// second hash of the same bytes was over a quarter of a fetch's CPU
// (BenchmarkRestoreFromS3, docs/design/0028). Encoded, the stored bytes
// are others and are hashed as they arrive. It decides nothing: what it
// found is for backup.CheckDownload. Its error is a wrong key only, which
// age finds in the header before any payload.
func receive(dst io.Writer, src io.Reader, a FetchArgs, key crypt.Key) (backup.Download, *backup.ChecksumReader, error) {
	var (
		r      *backup.ChecksumReader
		stored io.Reader
		err    error
	)
	var object *backup.ObjectHash
	if backup.StoredAsSent(a.Compression, a.Encryption) {
		r = backup.NewChecksumReader(src)
		stored = r
	} else {
		object = backup.NewObjectHash()
		stored = io.TeeReader(src, object)
		var closeDec func()
		r, closeDec, err = openStored(stored, a.Compression, a.Encryption, key)
		if errors.Is(err, crypt.ErrWrongKey) {
			return backup.Download{}, nil, err
		}
		if err == nil {
			defer closeDec()
		}
	}
	if err == nil {
		_, err = io.CopyBuffer(dst, r, make([]byte, copyBuffer))
	}
	// Whatever the decoder left unread is part of the object too: read it,
	// so the stored object's hash covers every byte, and so a decoding
	// error caused by damaged bytes is reported as what it is. Read as
	// sent, the checksum reader has read to the end already unless the
	// write failed, or it ended with its error, which it repeats.
	_, derr := io.Copy(io.Discard, stored)
	d := backup.Download{DecodeErr: err, Verified: r != nil && r.Verified()}
	if object == nil {
		d.SHA256, d.Size = r.ReceivedSHA256(), r.Size()
		d.Ended = d.SHA256 != ""
	} else {
		d.SHA256, d.Size = object.SHA256(), object.Size()
		d.Ended = derr == nil
	}
	if !d.Ended {
		d.ReadErr = derr
	}
	return d, r, nil
}

func decryptedWith(a FetchArgs) string {
	if a.Encryption == "" {
		return ""
	}
	return ", decrypted with " + a.KeyFingerprint
}

// openStored undoes what the save did, in reverse: age (when encrypted),
// then the decoder, then etcd's digest check. A wrong key is refused when
// age reads the header, before any payload.
func openStored(stored io.Reader, c v1alpha1.SnapshotCompression, e v1alpha1.SnapshotEncryptionScheme, key crypt.Key) (*backup.ChecksumReader, func(), error) {
	plain := stored
	if e != "" {
		var err error
		if plain, err = crypt.NewReader(key, stored); err != nil {
			return nil, nil, err
		}
	}
	dec, err := codec.NewReader(c, plain)
	if err != nil {
		return nil, nil, err
	}
	return backup.NewTrailerReader(dec), func() { _ = dec.Close() }, nil
}

func compressionName(c v1alpha1.SnapshotCompression) v1alpha1.SnapshotCompression {
	if c == "" {
		return v1alpha1.CompressionNone
	}
	return c
}

// copySelf installs this binary at dst, whole or not at all.
func copySelf(dst string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("failed to find this binary: %w", err)
	}
	in, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("failed to open %s: %w", self, err)
	}
	defer in.Close()
	tmp := dst + ".partial"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return fmt.Errorf("failed to create %s: %w", tmp, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("failed to copy %s: %w", self, err)
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
