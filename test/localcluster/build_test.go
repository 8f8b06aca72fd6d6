package localcluster

import (
	"os"
	"os/exec"
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

// TestReplaceLinkNeverLeavesTheLinkMissing: envtest's binaries are links
// in a directory every checkout shares, so a run that refreshes them must
// not leave a moment in which another run finds one missing.
func TestReplaceLinkNeverLeavesTheLinkMissing(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "kube-apiserver")
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, f := range []string{a, b} {
		if err := os.WriteFile(f, []byte(f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := replaceLink(a, link); err != nil {
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
			if _, err := os.Stat(link); err != nil {
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
		if err := replaceLink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-missing; err != nil {
		t.Fatalf("the link was missing while it was replaced: %v", err)
	}
	got, err := os.ReadFile(link)
	if err != nil || string(got) != a {
		t.Fatalf("link holds %q (%v), want the contents of %q", got, err, a)
	}
	left, err := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if err != nil || len(left) != 0 {
		t.Fatalf("temporary links left behind: %v %v", left, err)
	}
}

// TestEnvtestBinariesSurviveTheSweep: a process started from envtest's
// link, or from the build cache by someone else (an integration test's etcd),
// is not one the cluster's sweep of leftovers takes for its own, while one
// started from the build cache by the cluster (it carries the mark) is.
func TestEnvtestBinariesSurviveTheSweep(t *testing.T) {
	shell, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("no shell: %v", err)
	}
	root := t.TempDir()
	l := Layout{StateDir: filepath.Join(root, "state"), CacheDir: filepath.Join(root, "cache")}
	built := filepath.Join(l.CacheDir, "bin", "kubernetes-test", "sh")
	envtest := filepath.Join(l.CacheDir, "envtest", "test", "sh")
	for _, d := range []string{filepath.Dir(built), filepath.Dir(envtest)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := copyExecutable(shell, built); err != nil {
		t.Fatal(err)
	}
	if err := replaceLink(built, envtest); err != nil {
		t.Fatal(err)
	}
	start := func(path string, env ...string) int {
		return startWaiting(t, path, env...)
	}
	mark := ownerEnv + "=" + l.StateDir
	fromEnvtest, fromCache, ofCluster := start(envtest, mark), start(built), start(built, mark)
	swept := map[int]bool{}
	for _, pid := range l.LeftoverProcesses() {
		swept[pid] = true
	}
	if swept[fromEnvtest] {
		t.Errorf("the sweep would kill a process started from envtest's link (pid %d)", fromEnvtest)
	}
	if swept[fromCache] {
		t.Errorf("the sweep would kill a process started from the build cache by another user (pid %d)", fromCache)
	}
	if !swept[ofCluster] {
		t.Errorf("the sweep misses a process of the cluster started from the build cache (pid %d)", ofCluster)
	}
}
