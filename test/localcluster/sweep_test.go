package localcluster

import (
	"bufio"
	"os/exec"
	"testing"
)

func TestOwnsProcess(t *testing.T) {
	markers := []string{"/repo/.cache/localcluster/", "/run/qlc/"}
	cacheBin := "/root/.cache/quorumctl-localcluster/bin/"
	cases := []struct {
		name   string
		text   string
		marked bool
		want   bool
	}{
		{"names the state dir", "kubelet --root-dir /repo/.cache/localcluster/node0 /root/.cache/quorumctl-localcluster/bin/k8s/kubelet", false, true},
		{"names the run dir", "containerd-shim -address /run/qlc/node0.sock", false, true},
		{"a cached binary started by the cluster", "/root/.cache/quorumctl-localcluster/bin/versitygw --port 127.0.0.1:7070", true, true},
		{"a cached binary started by a benchmark", "/root/.cache/quorumctl-localcluster/bin/versitygw --port 127.0.0.1:25942 posix /tmp/Bench/s3", false, false},
		{"anything else", "/usr/bin/sleep 100", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			asked := false
			got := ownsProcess(c.text, markers, cacheBin, func() bool { asked = true; return c.marked })
			if got != c.want {
				t.Fatalf("ownsProcess(%q) = %v, want %v", c.text, got, c.want)
			}
			if asked && c.text == "/usr/bin/sleep 100" {
				t.Fatalf("the environment was read for a process that runs no cached binary")
			}
		})
	}
}

func TestHasEnv(t *testing.T) {
	pid := startWaiting(t, "sh", ownerEnv+"=/repo/.cache/localcluster")
	if !hasEnv(pid, ownerEnv+"=/repo/.cache/localcluster") {
		t.Fatalf("the mark in the child's environment was not found")
	}
	if hasEnv(pid, ownerEnv+"=/other/.cache/localcluster") {
		t.Fatalf("the mark of another state dir was taken for this one")
	}
}

// startWaiting starts the shell at path, which waits on its input until the
// test ends, and returns once it runs: its command line and environment are
// read back empty while its exec is under way.
func startWaiting(t *testing.T, path string, env ...string) int {
	t.Helper()
	cmd := exec.Command(path, "-c", "echo started; read -r _")
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "started\n" {
		t.Fatalf("%s did not start: %q, %v", path, line, err)
	}
	return cmd.Process.Pid
}
