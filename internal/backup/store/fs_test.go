package store

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/quorumctl/etcd-operator/internal/backup"
)

func TestFSCommitMakesTheObjectAppearWhole(t *testing.T) {
	ctx := context.Background()
	s, err := NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Writer(ctx, "ns/c/snap.db")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("half")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "ns/c/snap.db"); !errors.Is(err, backup.ErrNotFound) {
		t.Fatalf("before Commit the object is visible: %v", err)
	}
	if objs, _ := s.List(ctx, ""); len(objs) != 0 {
		t.Fatalf("List shows the object being written: %v", objs)
	}
	if _, err := w.Write([]byte(" and the rest")); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	data, err := Get(ctx, s, "ns/c/snap.db", 1024)
	if err != nil || string(data) != "half and the rest" {
		t.Fatalf("read back %q, %v", data, err)
	}
	objs, err := s.List(ctx, "ns/")
	if err != nil || len(objs) != 1 || objs[0].Key != "ns/c/snap.db" || objs[0].Size != 17 {
		t.Fatalf("List = %+v, %v", objs, err)
	}
}

func TestFSAbortLeavesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Writer(ctx, "a/b.db")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 1<<16)); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("an aborted write left %v", entries)
	}
	if _, err := s.Reader(ctx, "a/b.db"); !errors.Is(err, backup.ErrNotFound) {
		t.Fatalf("Reader after abort: %v", err)
	}
}

func TestFSCommitReplacesOnlyWhenDone(t *testing.T) {
	ctx := context.Background()
	s, err := NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := Put(ctx, s, "k", []byte("old")); err != nil {
		t.Fatal(err)
	}
	w, err := s.Writer(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("new"))
	if data, _ := Get(ctx, s, "k", 10); string(data) != "old" {
		t.Fatalf("mid-write the key reads %q", data)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if data, _ := Get(ctx, s, "k", 10); string(data) != "new" {
		t.Fatalf("after commit the key reads %q", data)
	}
}

func TestFSRefusesKeysOutsideItsRoot(t *testing.T) {
	ctx := context.Background()
	s, err := NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"", "../escape", "a/../../b", "/abs", "dir/"} {
		if _, err := s.Writer(ctx, key); !errors.Is(err, backup.ErrInvalidArguments) {
			t.Errorf("Writer(%q) = %v, want ErrInvalidArguments", key, err)
		}
	}
}

func TestFSDeleteAndGetLimits(t *testing.T) {
	ctx := context.Background()
	s, err := NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "missing"); err != nil {
		t.Fatalf("deleting a missing object: %v", err)
	}
	if err := Put(ctx, s, "big", make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := Get(ctx, s, "big", 99); err == nil {
		t.Fatal("Get read past its limit")
	}
	if err := s.Delete(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "big"); !errors.Is(err, backup.ErrNotFound) {
		t.Fatalf("Stat after Delete: %v", err)
	}
	r, err := s.Reader(ctx, "big")
	if err == nil {
		_, _ = io.Copy(io.Discard, r)
		t.Fatal("Reader after Delete succeeded")
	}
}

func TestFSOnAMissingDirectoryIsEmpty(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "never", "written")
	s, err := NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	if objs, err := s.List(ctx, ""); err != nil || len(objs) != 0 {
		t.Fatalf("List = %v, %v", objs, err)
	}
	if _, err := s.Stat(ctx, "x.db"); !errors.Is(err, backup.ErrNotFound) {
		t.Fatalf("Stat = %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("opening the store created its directory")
	}
	if err := Put(ctx, s, "a/b.db", []byte("x")); err != nil {
		t.Fatalf("the first write creates it: %v", err)
	}
}
