//go:build integration

package framework

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPartitionInANetworkNamespace builds two network namespaces joined by
// a veth pair, none of it in the host's, and partitions one: pings across
// stop both ways while loopback still answers; the drop lifts by itself at
// its end; and HealPartition leaves no chain behind.
func TestPartitionInANetworkNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test enters network namespaces and needs root, as the local cluster does")
	}
	// A missing busybox would read as "no reply" below; name it instead.
	if _, err := exec.LookPath("busybox"); err != nil {
		t.Fatalf("busybox is missing (bin/localcluster prepare installs it): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := sandbox(t), sandbox(t)
	run := func(pid int, args ...string) string {
		t.Helper()
		out, err := nsenter(ctx, pid, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	run(a, "ip", "link", "add", "qlcpa", "type", "veth", "peer", "name", "qlcpb", "netns", strconv.Itoa(b))
	for pid, addr := range map[int]string{a: "10.254.254.1/30", b: "10.254.254.2/30"} {
		link := map[int]string{a: "qlcpa", b: "qlcpb"}[pid]
		run(pid, "ip", "addr", "add", addr, "dev", link)
		run(pid, "ip", "link", "set", link, "up")
		run(pid, "ip", "link", "set", "lo", "up")
	}
	ping := func(from int, to string) bool {
		_, err := nsenter(ctx, from, "busybox", "ping", "-c", "1", "-W", "1", to)
		return err == nil
	}
	if !ping(b, "10.254.254.1") || !ping(a, "10.254.254.2") {
		t.Fatal("the namespaces do not reach each other before the partition")
	}

	if err := partitionNetns(ctx, a, time.Now().Add(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	if ping(b, "10.254.254.1") || ping(a, "10.254.254.2") {
		t.Fatal("a ping crossed the partition")
	}
	if !ping(a, "127.0.0.1") {
		t.Fatal("loopback is cut off inside the partition")
	}
	if err := WaitFor(ctx, 15*time.Second, 500*time.Millisecond, func(context.Context) (bool, error) {
		return ping(b, "10.254.254.1"), nil
	}); err != nil {
		t.Fatalf("the partition did not lift by itself at its end: %v", err)
	}

	if err := partitionNetns(ctx, a, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ping(b, "10.254.254.1") {
		t.Fatal("a ping crossed the second partition")
	}
	if err := healNetns(ctx, a); err != nil {
		t.Fatal(err)
	}
	if !ping(b, "10.254.254.1") {
		t.Fatal("the namespaces do not reach each other after the heal")
	}
	if rules := run(a, "iptables", "-w", "-S"); strings.Contains(rules, PartitionChain) {
		t.Fatalf("the chain is left after the heal:\n%s", rules)
	}
	if err := healNetns(ctx, a); err != nil {
		t.Fatalf("healing a healed namespace: %v", err)
	}
}

// sandbox starts a process in a network namespace of its own and returns its
// PID; the namespace, and the veth in it, go when the test kills it.
func sandbox(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("unshare", "--net", "--", "sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatalf("failed to start a process in a network namespace of its own: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	host, _ := os.Readlink("/proc/self/ns/net")
	pid := cmd.Process.Pid
	if err := WaitFor(context.Background(), 5*time.Second, 20*time.Millisecond, func(context.Context) (bool, error) {
		ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
		return err == nil && ns != host, nil
	}); err != nil {
		t.Fatalf("process %d never entered a network namespace of its own: %v", pid, err)
	}
	return pid
}

// TestPacketLossInANetworkNamespace drops every packet on one TCP port
// between two namespaces (a loss of 100%, so the result does not depend on
// chance): a connection to that port fails while one to another port
// succeeds, and after HealPacketLoss the first succeeds too.
func TestPacketLossInANetworkNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test enters network namespaces and needs root, as the local cluster does")
	}
	if _, err := exec.LookPath("busybox"); err != nil {
		t.Fatalf("busybox is missing (bin/localcluster prepare installs it): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := sandbox(t), sandbox(t)
	run := func(pid int, args ...string) string {
		t.Helper()
		out, err := nsenter(ctx, pid, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	run(a, "ip", "link", "add", "qlcla", "type", "veth", "peer", "name", "qlclb", "netns", strconv.Itoa(b))
	for pid, addr := range map[int]string{a: "10.254.253.1/30", b: "10.254.253.2/30"} {
		link := map[int]string{a: "qlcla", b: "qlclb"}[pid]
		run(pid, "ip", "addr", "add", addr, "dev", link)
		run(pid, "ip", "link", "set", link, "up")
		run(pid, "ip", "link", "set", "lo", "up")
	}
	// A listener in b on each port, answering every connection.
	for _, port := range []string{"2380", "2381"} {
		cmd := exec.Command("nsenter", "-t", strconv.Itoa(b), "-n", "--", "busybox", "nc", "-ll", "-p", port, "-e", "/bin/echo", "hello")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	connects := func(port string) bool {
		out, err := nsenter(ctx, a, "busybox", "nc", "-w", "2", "10.254.253.2", port)
		return err == nil && strings.Contains(out, "hello")
	}
	if err := WaitFor(ctx, 10*time.Second, 100*time.Millisecond, func(context.Context) (bool, error) {
		return connects("2380") && connects("2381"), nil
	}); err != nil {
		t.Fatalf("the listeners do not answer before the loss: %v", err)
	}
	rules, err := packetLossRules(time.Now().Add(time.Hour), 100, 2380)
	if err != nil {
		t.Fatal(err)
	}
	if err := installChain(ctx, a, PacketLossChain, rules); err != nil {
		t.Fatal(err)
	}
	if connects("2380") {
		t.Fatal("a connection on the lossy port got through a loss of 100%")
	}
	if !connects("2381") {
		t.Fatal("a connection on another port was cut")
	}
	if err := healChain(ctx, a, PacketLossChain); err != nil {
		t.Fatal(err)
	}
	if !connects("2380") {
		t.Fatal("the lossy port is still cut after the heal")
	}
}

// TestPacketDelayInANetworkNamespace holds every packet on one TCP port of a
// namespace through the netfilter queue: connections on that port still
// succeed, their packets having been held and let go, while another port's
// are not held; after Lift nothing is held any more and both ports answer.
func TestPacketDelayInANetworkNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test enters network namespaces and needs root, as the local cluster does")
	}
	if _, err := exec.LookPath("busybox"); err != nil {
		t.Fatalf("busybox is missing (bin/localcluster prepare installs it): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := sandbox(t), sandbox(t)
	run := func(pid int, args ...string) string {
		t.Helper()
		out, err := nsenter(ctx, pid, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	run(a, "ip", "link", "add", "qlcda", "type", "veth", "peer", "name", "qlcdb", "netns", strconv.Itoa(b))
	for pid, addr := range map[int]string{a: "10.254.252.1/30", b: "10.254.252.2/30"} {
		link := map[int]string{a: "qlcda", b: "qlcdb"}[pid]
		run(pid, "ip", "addr", "add", addr, "dev", link)
		run(pid, "ip", "link", "set", link, "up")
		run(pid, "ip", "link", "set", "lo", "up")
	}
	for _, port := range []string{"2380", "2381"} {
		cmd := exec.Command("nsenter", "-t", strconv.Itoa(b), "-n", "--", "busybox", "nc", "-ll", "-p", port, "-e", "/bin/echo", "hello")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	connects := func(port string) bool {
		out, err := nsenter(ctx, a, "busybox", "nc", "-w", "5", "10.254.252.2", port)
		return err == nil && strings.Contains(out, "hello")
	}
	if err := WaitFor(ctx, 10*time.Second, 100*time.Millisecond, func(context.Context) (bool, error) {
		return connects("2380") && connects("2381"), nil
	}); err != nil {
		t.Fatalf("the listeners do not answer before the delay: %v", err)
	}
	d, err := delayNetns(ctx, a, time.Now().Add(time.Hour), DelaySpan{Mean: 75 * time.Millisecond, Jitter: 50 * time.Millisecond}, 1, 2380)
	if err != nil {
		t.Fatal(err)
	}
	if !connects("2381") {
		t.Fatal("a connection on another port failed")
	}
	if held, _ := d.Held(); held != 0 {
		t.Fatalf("%d packets of another port were held", held)
	}
	if !connects("2380") {
		t.Fatal("a connection on the delayed port failed")
	}
	// A TCP connection that carried data is at least a handshake, the data
	// and its end, each way: every one of them went through the queue.
	held, _ := d.Held()
	if held < 4 {
		t.Fatalf("only %d packets of a connection on the delayed port were held", held)
	}
	// The connection's last packets may still come after the count above.
	lifted, err := d.Lift(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lifted < held {
		t.Fatalf("Lift counts %d packets held, fewer than the %d before", lifted, held)
	}
	if rules := run(a, "iptables", "-w", "-S"); strings.Contains(rules, PacketDelayChain) {
		t.Fatalf("the chain is left after the lift:\n%s", rules)
	}
	if !connects("2380") || !connects("2381") {
		t.Fatal("the ports do not answer after the lift")
	}
	if after, _ := d.Held(); after != lifted {
		t.Fatalf("packets were held after the lift: %d, then %d", lifted, after)
	}
}
