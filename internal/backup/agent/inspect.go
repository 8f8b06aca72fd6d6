package agent

import (
	"context"
	"fmt"

	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/crypt"
	"github.com/quorumctl/etcd-operator/internal/backup/store"
)

// StorageCommandArgs is the command line of snapshot delete and inspect.
type StorageCommandArgs struct {
	StorageArgs
}

// DeleteArgs renders snapshot delete.
func (a StorageCommandArgs) DeleteArgs() []string {
	return append([]string{"snapshot", "delete"}, a.flags()...)
}

// InspectArgs renders snapshot inspect.
func (a StorageCommandArgs) InspectArgs() []string {
	return append([]string{"snapshot", "inspect"}, a.flags()...)
}

func parseStorageCommand(name string, args []string, env Env) (StorageCommandArgs, string, error) {
	var a StorageCommandArgs
	fs := newFlagSet(name, env)
	decode := storageFlags(fs, &a.StorageArgs)
	logPath := terminationFlag(fs)
	return a, *logPath, parse(fs, args, decode)
}

func runDelete(ctx context.Context, args []string, env Env) (backup.Result, string) {
	a, logPath, err := parseStorageCommand("snapshot delete", args, env)
	if err == nil {
		var st store.Store
		if st, err = openStore(ctx, a.StorageArgs, env); err == nil {
			err = Delete(ctx, st, a.Key)
		}
	}
	return backup.ResultOf(err), logPath
}

// maxMetadata bounds the metadata object read; it is a few hundred bytes.
const maxMetadata = 64 << 10

// Delete removes a snapshot: its metadata first, so that one whose object
// could not be deleted is no longer taken for a good snapshot. Missing
// objects are not errors; a missing bucket or refused credentials are.
func Delete(ctx context.Context, st store.Store, key string) error {
	if err := st.Delete(ctx, backup.MetadataKey(key)); err != nil {
		return err
	}
	return st.Delete(ctx, key)
}

func runInspect(ctx context.Context, args []string, env Env) (backup.Result, string) {
	a, logPath, err := parseStorageCommand("snapshot inspect", args, env)
	if err != nil {
		return backup.ResultOf(err), logPath
	}
	st, err := openStore(ctx, a.StorageArgs, env)
	if err != nil {
		return backup.ResultOf(err), logPath
	}
	meta, err := InspectWithKey(ctx, st, a.Key, a.EncryptionKey)
	res := backup.ResultOf(err)
	res.Metadata = meta
	return res, logPath
}

// Inspect checks what a restore needs before the seed exists: the object,
// its metadata beside it, and that the two agree on the size. It reads no
// snapshot data; the download checks the SHA-256.
func Inspect(ctx context.Context, st store.Store, key string) (*backup.Metadata, error) {
	return InspectWithKey(ctx, st, key, KeyFile{})
}

// InspectWithKey is Inspect, and for an encrypted snapshot also checks
// the key the restore will decrypt with: named, present, an identity, its
// fingerprint the one the metadata records, and then that the object's
// age header opens with it (a few hundred bytes are read, no payload).
// A restore is refused on any of these before its seed exists.
func InspectWithKey(ctx context.Context, st store.Store, key string, k KeyFile) (*backup.Metadata, error) {
	info, err := st.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	data, err := store.Get(ctx, st, backup.MetadataKey(key), maxMetadata)
	if err != nil {
		return nil, fmt.Errorf("the snapshot has no readable metadata object beside it, so it is not known to be whole: %w", err)
	}
	meta, err := backup.ParseMetadata(data)
	if err != nil {
		return nil, err
	}
	if meta.SizeBytes != info.Size {
		return meta, fmt.Errorf("%w: the object is %d bytes, its metadata says %d", backup.ErrChecksumMismatch, info.Size, meta.SizeBytes)
	}
	_, fingerprint, err := meta.EncryptionOf()
	if err != nil || fingerprint == "" {
		return meta, err
	}
	identity, err := k.decryptionKey(fingerprint)
	if err != nil {
		return meta, err
	}
	src, err := st.Reader(ctx, key)
	if err != nil {
		return meta, err
	}
	defer src.Close()
	if _, err := crypt.NewReader(identity, src); err != nil {
		return meta, err
	}
	return meta, nil
}
