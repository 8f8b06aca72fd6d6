package framework

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestPodCgroupDirName(t *testing.T) {
	uid := types.UID("3b0c0ece-b006-48dc-b58c-923caf1c834f")
	for name, want := range map[string]bool{
		"pod3b0c0ece-b006-48dc-b58c-923caf1c834f":                             true,
		"kubepods-burstable-pod3b0c0ece_b006_48dc_b58c_923caf1c834f.slice":    true,
		"pod3b0c0ece-b006-48dc-b58c-923caf1c834e":                             false,
		"3b0c0ece-b006-48dc-b58c-923caf1c834f":                                false,
		"kubepods-burstable-pod3b0c0ece-b006-48dc-b58c-923caf1c834f.slice":    false,
		"kubepods-burstable-pod3b0c0ece_b006_48dc_b58c_923caf1c834f.slice.gz": false,
	} {
		if got := podCgroupDirName(name, uid); got != want {
			t.Errorf("podCgroupDirName(%q) = %t, want %t", name, got, want)
		}
	}
}

func TestContainerCgroupDirName(t *testing.T) {
	id := "762b1a60c9df"
	for name, want := range map[string]bool{
		"762b1a60c9df":                         true,
		"cri-containerd-762b1a60c9df.scope":    true,
		"762b1a60c9dfa":                        false,
		"cri-containerd-762b1a60c9df.scope.ok": false,
	} {
		if got := containerCgroupDirName(name, id); got != want {
			t.Errorf("containerCgroupDirName(%q) = %t, want %t", name, got, want)
		}
	}
}

// TestFindPodProcesses lays out a cgroupfs tree as the kubelet does and
// finds a Pod's processes in it, in the container directories under the Pod.
func TestFindPodProcesses(t *testing.T) {
	root := t.TempDir()
	uid := types.UID("aaaa-bbbb")
	write := func(dir, procs string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(procs), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pod := filepath.Join(root, "pids", "qlc-node1", "kubepods", "burstable", "pod"+string(uid))
	write(pod, "")
	write(filepath.Join(pod, "sandbox"), "101\n")
	write(filepath.Join(pod, "etcd"), "202\n203\n")
	write(filepath.Join(root, "pids", "qlc-node1", "kubepods", "burstable", "podother"), "999\n")

	dir := findCgroupDir(root, 6, func(name string) bool { return podCgroupDirName(name, uid) })
	if dir != pod {
		t.Fatalf("found %q, want %q", dir, pod)
	}
	got := cgroupProcesses(dir)
	slices.Sort(got)
	if want := []int{101, 202, 203}; !slices.Equal(got, want) {
		t.Fatalf("processes %v, want %v", got, want)
	}
	if d := findCgroupDir(root, 2, func(name string) bool { return podCgroupDirName(name, uid) }); d != "" {
		t.Fatalf("a walk two levels deep found %q: the Pod is four down", d)
	}
}

func TestIsEtcdOf(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"/usr/local/bin/etcd", "--data-dir=/var/lib/etcd/data", "--name=c3-abcde"}, true},
		{[]string{"etcd", "--name=c3-abcde"}, true},
		{[]string{"/usr/local/bin/etcd", "--name=c3-abcdef"}, false},
		{[]string{"/bin/sh", "-c", "etcd --name=c3-abcde"}, false},
		{nil, false},
	} {
		if got := isEtcdOf(c.args, "c3-abcde"); got != c.want {
			t.Errorf("isEtcdOf(%q) = %t, want %t", c.args, got, c.want)
		}
	}
}

func TestPartitionRules(t *testing.T) {
	until := time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	var lines []string
	for _, r := range partitionRules(until) {
		lines = append(lines, strings.Join(r, " "))
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{
		"-A QLC-PARTITION -i lo -j RETURN",
		"-A QLC-PARTITION -o lo -j RETURN",
		"--datestop 2030-01-02T02:04:05 --utc",
		"-I INPUT 1 -j QLC-PARTITION",
		"-I OUTPUT 1 -j QLC-PARTITION",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the rules lack %q:\n%s", want, all)
		}
	}
	// The loopback exceptions come before the drop, and the jumps after the
	// chain is complete, so no packet meets a half-made partition.
	drop := slices.IndexFunc(lines, func(l string) bool { return strings.HasSuffix(l, "-j DROP") })
	for i, l := range lines {
		if strings.Contains(l, "RETURN") && i > drop {
			t.Errorf("loopback rule %q after the drop", l)
		}
		if strings.HasPrefix(l, "-I ") && i < drop {
			t.Errorf("jump %q before the chain is complete", l)
		}
	}
}

func TestPacketLossRules(t *testing.T) {
	until := time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	rules, err := packetLossRules(until, 35, 2380)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range rules {
		lines = append(lines, strings.Join(r, " "))
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{
		"-A QLC-PACKETLOSS -p tcp -m multiport --ports 2380 -m statistic --mode random --probability 0.35",
		"--datestop 2030-01-02T02:04:05 --utc",
		"-I INPUT 1 -j QLC-PACKETLOSS",
		"-I OUTPUT 1 -j QLC-PACKETLOSS",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the rules lack %q:\n%s", want, all)
		}
	}
	drop := slices.IndexFunc(lines, func(l string) bool { return strings.HasSuffix(l, "-j DROP") })
	for i, l := range lines {
		if strings.HasPrefix(l, "-I ") && i < drop {
			t.Errorf("jump %q before the chain is complete", l)
		}
	}
	for _, bad := range []int{0, -5, 101} {
		if _, err := packetLossRules(until, bad, 2380); err == nil {
			t.Errorf("a loss of %d%% was accepted", bad)
		}
	}
	if _, err := packetLossRules(until, 20); err == nil {
		t.Error("a loss on no port was accepted")
	}
}
