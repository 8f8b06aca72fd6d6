// Package store is where snapshots are kept: one Store interface, with an
// S3 implementation (Amazon S3 and S3-compatible servers, through the AWS
// SDK) and a filesystem one (a directory on a mounted PersistentVolumeClaim).
//
// Both commit an object whole or not at all: nothing is visible at a key
// until Commit returns, and an aborted or failed write leaves nothing that
// could be taken for an object. S3 gets that from its multipart upload,
// which only becomes an object when completed (and is aborted otherwise);
// the filesystem from writing a hidden temporary file beside the target,
// syncing it and renaming it into place.
//
// Errors wrap the sentinels of package backup (ErrNotFound, ErrCredentials,
// ErrBucketNotFound), so callers classify them with errors.Is.
package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"
)

// Store is one destination, rooted at its prefix (S3) or path (volume).
// Keys are relative to that root and use "/" as separator.
type Store interface {
	// Writer starts an object at key. Nothing is at key until Commit
	// returns nil; an existing object there is replaced only then.
	Writer(ctx context.Context, key string) (ObjectWriter, error)
	// Reader opens the object at key.
	Reader(ctx context.Context, key string) (io.ReadCloser, error)
	// Stat describes the object at key.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// Delete removes the object at key; a missing object is not an error.
	Delete(ctx context.Context, key string) error
	// List describes the objects whose keys start with prefix.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
}

// ObjectWriter writes one object. Exactly one of Commit or Abort must be
// called; both wait until the write has ended.
type ObjectWriter interface {
	io.Writer
	// Commit makes the object visible at its key, whole.
	Commit() error
	// Abort discards everything written.
	Abort() error
}

// ObjectInfo describes one object.
type ObjectInfo struct {
	Key      string
	Size     int64
	Modified time.Time
}

// Put writes a small object at once, such as a snapshot's metadata.
func Put(ctx context.Context, s Store, key string, data []byte) error {
	w, err := s.Writer(ctx, key)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("failed to write %s: %w", key, abortJoin(w, err))
	}
	return w.Commit()
}

// Get reads a small object whole, refusing one larger than limit.
func Get(ctx context.Context, s Store, key string, limit int64) ([]byte, error) {
	r, err := s.Reader(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", key, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("failed to read %s: larger than %d bytes", key, limit)
	}
	return data, nil
}

func abortJoin(w ObjectWriter, err error) error {
	if aerr := w.Abort(); aerr != nil {
		return fmt.Errorf("%w (and the abort failed: %v)", err, aerr)
	}
	return err
}
