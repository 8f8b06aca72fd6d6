package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/quorumctl/etcd-operator/internal/backup"
)

// partialMarker is in the name of every temporary file, which begins with a
// dot: List never reports one, and a crash leaves nothing under a real key.
const partialMarker = ".partial-"

// FS keeps objects as files under a root directory.
type FS struct {
	root string
}

var _ Store = (*FS)(nil)

// NewFS roots a store at dir. The directory is created by the first write,
// not here: a restore mounts the volume read-only, and a missing directory
// there is a missing snapshot.
func NewFS(dir string) (*FS, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: no snapshot directory", backup.ErrInvalidArguments)
	}
	return &FS{root: dir}, nil
}

// path maps a key to a file under the root, refusing keys that would leave it.
func (s *FS) path(key string) (string, error) {
	clean := path.Clean("/" + key)
	if key == "" || strings.HasSuffix(key, "/") || clean != "/"+key {
		return "", fmt.Errorf("%w: key %q is not a clean relative path", backup.ErrInvalidArguments, key)
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

type fsWriter struct {
	f      *os.File
	target string
	done   bool
}

func (s *FS) Writer(_ context.Context, key string) (ObjectWriter, error) {
	target, err := s.path(key)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(target)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("failed to create %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(target)+partialMarker+"*")
	if err != nil {
		return nil, fmt.Errorf("failed to create a temporary file in %s: %w", dir, err)
	}
	return &fsWriter{f: f, target: target}, nil
}

func (w *fsWriter) Write(p []byte) (int, error) { return w.f.Write(p) }

func (w *fsWriter) Commit() error {
	if w.done {
		return errors.New("the object is already committed or aborted")
	}
	w.done = true
	// Data first, then the name: after a crash the target either does not
	// exist or holds everything.
	if err := w.f.Sync(); err != nil {
		_ = w.f.Close()
		_ = os.Remove(w.f.Name())
		return fmt.Errorf("failed to sync %s: %w", w.f.Name(), err)
	}
	if err := w.f.Close(); err != nil {
		_ = os.Remove(w.f.Name())
		return fmt.Errorf("failed to close %s: %w", w.f.Name(), err)
	}
	if err := os.Rename(w.f.Name(), w.target); err != nil {
		_ = os.Remove(w.f.Name())
		return fmt.Errorf("failed to move the object into place at %s: %w", w.target, err)
	}
	return syncDir(filepath.Dir(w.target))
}

func (w *fsWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	_ = w.f.Close()
	if err := os.Remove(w.f.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("failed to remove %s: %w", w.f.Name(), err)
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("failed to open %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("failed to sync %s: %w", dir, err)
	}
	return nil
}

func notFound(key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", backup.ErrNotFound, key)
	}
	return err
}

func (s *FS) Reader(_ context.Context, key string) (io.ReadCloser, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, notFound(key, err)
	}
	return f, nil
}

func (s *FS) Stat(_ context.Context, key string) (ObjectInfo, error) {
	p, err := s.path(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	st, err := os.Stat(p)
	if err != nil {
		return ObjectInfo{}, notFound(key, err)
	}
	if !st.Mode().IsRegular() {
		return ObjectInfo{}, fmt.Errorf("%w: %s is not a file", backup.ErrNotFound, key)
	}
	return ObjectInfo{Key: key, Size: st.Size(), Modified: st.ModTime()}, nil
}

func (s *FS) Delete(_ context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("failed to delete %s: %w", key, err)
	}
	return nil
}

func (s *FS) List(_ context.Context, prefix string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if p == s.root && errors.Is(err, fs.ErrNotExist) {
			// Nothing was ever written here.
			return filepath.SkipAll
		}
		if err != nil {
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, ObjectInfo{Key: key, Size: info.Size(), Modified: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to list %s: %w", s.root, err)
	}
	return out, nil
}
