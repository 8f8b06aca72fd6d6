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
