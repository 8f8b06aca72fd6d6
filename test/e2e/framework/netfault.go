package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A partition cuts one Pod off the network with iptables rules in the Pod's
// own network namespace, entered from the host with nsenter: everything but
// loopback is dropped, both ways, so its peers and clients see timeouts, as
// with a pulled cable, and the Pod keeps running.
//
// Nothing may stay behind, even if the process that made the partition dies:
//   - the rules live in the Pod's network namespace, which goes with the Pod
//     (and with every Pod when the local cluster is brought down), never in
//     the host's, where the QLC- chains of the local cluster live;
//   - the drop rule carries its own end: an xt_time --datestop, after which
//     it matches nothing, so a partition whose healer died lifts itself at
//     the planned end;
//   - HealPartition removes the chain, and finding no chain is success.

// PartitionChain is the chain a partition installs in a Pod's network
// namespace. Its prefix is the local cluster's, so it is recognisably ours.
const PartitionChain = "QLC-PARTITION"

// partitionHooks jump to the chain: INPUT sees what reaches the Pod, OUTPUT
// what it sends.
var partitionHooks = []string{"INPUT", "OUTPUT"}

// partitionRules are the iptables commands, without the binary, that make
// the chain: loopback passes (etcd talks to itself through it), everything
// else is dropped until the UTC time until.
func partitionRules(until time.Time, ports ...int) [][]string {
	stop := until.UTC().Format("2006-01-02T15:04:05")
	var match []string
	if len(ports) > 0 {
		var ps []string
		for _, p := range ports {
			ps = append(ps, strconv.Itoa(p))
		}
		// --ports matches the source or the destination port, so both
		// directions of a connection on those ports are dropped.
		match = []string{"-p", "tcp", "-m", "multiport", "--ports", strings.Join(ps, ",")}
	}
	rules := [][]string{
		{"-N", PartitionChain},
		{"-F", PartitionChain},
		{"-A", PartitionChain, "-i", "lo", "-j", "RETURN"},
		{"-A", PartitionChain, "-o", "lo", "-j", "RETURN"},
		append(append([]string{"-A", PartitionChain}, match...), "-m", "time", "--datestop", stop, "--utc",
			"-m", "comment", "--comment", "e2e partition until "+stop+" UTC", "-j", "DROP"),
	}
	for _, hook := range partitionHooks {
		rules = append(rules, []string{"-I", hook, "1", "-j", PartitionChain})
	}
	return rules
}

// podNetns finds a process of the Pod whose network namespace is the Pod's
// own, never the host's: a Pod on the host network shares the host's, and
// rules there would cut off the node, not the Pod. It also checks the Pod's
// address is configured in it.
func podNetns(ctx context.Context, pod *corev1.Pod) (int, error) {
	if pod.Spec.HostNetwork {
		return 0, fmt.Errorf("pod %s/%s uses the host network; refusing to partition the host", pod.Namespace, pod.Name)
	}
	host, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return 0, fmt.Errorf("failed to read this process's network namespace: %w", err)
	}
	pids, err := PodProcesses(pod)
	if err != nil {
		return 0, err
	}
	for _, pid := range pids {
		ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
		if err != nil || ns == host {
			continue
		}
		addrs, err := nsenter(ctx, pid, "ip", "-o", "addr", "show")
		if err != nil {
			continue
		}
		if pod.Status.PodIP != "" && !strings.Contains(addrs, " "+pod.Status.PodIP+"/") {
			return 0, fmt.Errorf("the network namespace of pid %d lacks the address %s of pod %s/%s", pid, pod.Status.PodIP, pod.Namespace, pod.Name)
		}
		return pid, nil
	}
	return 0, fmt.Errorf("no process of pod %s/%s has a network namespace of its own: %w", pod.Namespace, pod.Name, ErrNoPodProcess)
}

func nsenter(ctx context.Context, pid int, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(pid), "-n", "--"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("nsenter -t %d -n %s: %w: %s", pid, strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// PartitionPod cuts the Pod off the network until HealPartition, or until
// the time until at the latest. A partition already in place is replaced.
func PartitionPod(ctx context.Context, pod *corev1.Pod, until time.Time) error {
	pid, err := podNetns(ctx, pod)
	if err != nil {
		return err
	}
	if err := partitionNetns(ctx, pid, until); err != nil {
		return fmt.Errorf("failed to partition pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// PartitionPodPorts is PartitionPod for TCP traffic on the given ports only:
// cut off from its peers (the peer port), a member still answers its
// clients, from its own store and possibly stale, for serializable reads.
func PartitionPodPorts(ctx context.Context, pod *corev1.Pod, until time.Time, ports ...int) error {
	pid, err := podNetns(ctx, pod)
	if err != nil {
		return err
	}
	if err := partitionNetns(ctx, pid, until, ports...); err != nil {
		return fmt.Errorf("failed to partition ports %v of pod %s/%s: %w", ports, pod.Namespace, pod.Name, err)
	}
	return nil
}

// partitionNetns installs the partition in the network namespace of pid and
// checks that both hooks jump to it.
func partitionNetns(ctx context.Context, pid int, until time.Time, ports ...int) error {
	return installChain(ctx, pid, PartitionChain, partitionRules(until, ports...))
}

// installChain replaces the chain in the network namespace of pid with the
// given rules, which create it and hook it into INPUT and OUTPUT, and checks
// that both hooks jump to it.
func installChain(ctx context.Context, pid int, chain string, rules [][]string) error {
	if err := healChain(ctx, pid, chain); err != nil {
		return err
	}
	for _, rule := range rules {
		if _, err := nsenter(ctx, pid, append([]string{"iptables", "-w"}, rule...)...); err != nil {
			return err
		}
	}
	out, err := nsenter(ctx, pid, "iptables", "-w", "-S")
	if err != nil {
		return err
	}
	for _, hook := range partitionHooks {
		if !strings.Contains(out, "-A "+hook+" -j "+chain) {
			return fmt.Errorf("%s is not hooked into %s:\n%s", chain, hook, out)
		}
	}
	return nil
}

// HealPartition removes a partition from the Pod. A Pod without one, or
// without any process left (its network namespace went with it), is healed.
func HealPartition(ctx context.Context, pod *corev1.Pod) error {
	pid, err := podNetns(ctx, pod)
	if errors.Is(err, ErrNoPodProcess) {
		return nil
	}
	if err != nil {
		return err
	}
	return healNetns(ctx, pid)
}

// healNetns removes the partition from the namespace of pid.
func healNetns(ctx context.Context, pid int) error { return healChain(ctx, pid, PartitionChain) }

// healChain deletes the chain's jumps and the chain in the namespace of pid,
// and checks that nothing of it is left.
func healChain(ctx context.Context, pid int, chain string) error {
	ipt := func(args ...string) error {
		_, err := nsenter(ctx, pid, append([]string{"iptables", "-w"}, args...)...)
		return err
	}
	for _, hook := range partitionHooks {
		for ipt("-C", hook, "-j", chain) == nil {
			if err := ipt("-D", hook, "-j", chain); err != nil {
				return err
			}
		}
	}
	if ipt("-L", chain, "-n") == nil {
		if err := ipt("-F", chain); err != nil {
			return err
		}
		if err := ipt("-X", chain); err != nil {
			return err
		}
	}
	rules, err := nsenter(ctx, pid, "iptables", "-w", "-S")
	if err != nil {
		return err
	}
	if strings.Contains(rules, chain) {
		return fmt.Errorf("%s is still in the namespace of pid %d:\n%s", chain, pid, rules)
	}
	return nil
}
