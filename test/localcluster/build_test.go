package localcluster

import (
	"os"
	"path/filepath"
	"testing"
)

// A repository tools module builds anew when any of its files changes or a
// file is added: the key is part of the cache name.
func TestModuleKeyFollowsTheModulesFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	key := func() string {
		t.Helper()
		k, err := moduleKey(dir)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write("go.mod", "module example\n")
	write("main.go", "package main\n")
	first := key()
	if again := key(); again != first {
		t.Fatalf("the same files gave keys %s and %s", first, again)
	}
	write("main.go", "package main\n\nfunc main() {}\n")
	edited := key()
	if edited == first {
		t.Fatal("an edited main.go kept the key")
	}
	write("extra.go", "package main\n")
	if key() == edited {
		t.Fatal("an added file kept the key")
	}
}

// TestReplaceSymlinkNeverLeavesTheLinkMissing: envtest's binaries are links
// in a directory every checkout shares, so a run that refreshes them must
// not leave a moment in which another run finds one missing.
func TestReplaceSymlinkNeverLeavesTheLinkMissing(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "kube-apiserver")
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := replaceSymlink(a, link); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	missing := make(chan error, 1)
	go func() {
		defer close(missing)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := os.Readlink(link); err != nil {
				missing <- err
				return
			}
		}
	}()
	for i := 0; i < 2000; i++ {
		target := a
		if i%2 == 0 {
			target = b
		}
		if err := replaceSymlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-missing; err != nil {
		t.Fatalf("the link was missing while it was replaced: %v", err)
	}
	if got, err := os.Readlink(link); err != nil || got != a {
		t.Fatalf("link points at %q (%v), want %q", got, err, a)
	}
	left, err := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if err != nil || len(left) != 0 {
		t.Fatalf("temporary links left behind: %v %v", left, err)
	}
}
