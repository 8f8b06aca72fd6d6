package framework

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Packet loss drops a share of one Pod's TCP packets on some ports, both
// ways, at random: iptables' statistic match in the Pod's own network
// namespace, entered from the host as for a partition. The peer port's
// traffic then sees retransmissions and stalls, as on a lossy link, while
// the Pod keeps its clients. tc netem would do it too, and add latency, but
// the kernel of the machines this runs on has no sch_netem ("Specified
// qdisc kind is unknown"); the statistic match is in every iptables.
//
// As with a partition, nothing may stay behind: the chain is in the Pod's
// namespace, its drop rule stops matching at the planned end on its own
// (xt_time --datestop), and HealPacketLoss removes it.

// PacketLossChain is the chain a packet loss installs in a Pod's network
// namespace.
const PacketLossChain = "QLC-PACKETLOSS"

// packetLossRules are the iptables commands, without the binary, that drop
// percent of the TCP packets on ports (as source or destination) until the
// UTC time until.
func packetLossRules(until time.Time, percent int, ports ...int) ([][]string, error) {
	if percent <= 0 || percent > 100 {
		return nil, fmt.Errorf("a packet loss of %d%% is not a share of packets", percent)
	}
	if len(ports) == 0 {
		return nil, errors.New("a packet loss needs at least one port")
	}
	stop := until.UTC().Format("2006-01-02T15:04:05")
	ps := ""
	for i, p := range ports {
		if i > 0 {
			ps += ","
		}
		ps += strconv.Itoa(p)
	}
	rules := [][]string{
		{"-N", PacketLossChain},
		{"-F", PacketLossChain},
		{"-A", PacketLossChain, "-p", "tcp", "-m", "multiport", "--ports", ps,
			"-m", "statistic", "--mode", "random", "--probability", strconv.FormatFloat(float64(percent)/100, 'f', 2, 64),
			"-m", "time", "--datestop", stop, "--utc",
			"-m", "comment", "--comment", fmt.Sprintf("e2e packet loss %d%% until %s UTC", percent, stop), "-j", "DROP"},
	}
	for _, hook := range partitionHooks {
		rules = append(rules, []string{"-I", hook, "1", "-j", PacketLossChain})
	}
	return rules, nil
}

// LosePackets drops percent of the Pod's TCP packets on the given ports
// until HealPacketLoss, or until the time until at the latest. A loss
// already in place is replaced.
func LosePackets(ctx context.Context, pod *corev1.Pod, until time.Time, percent int, ports ...int) error {
	rules, err := packetLossRules(until, percent, ports...)
	if err != nil {
		return err
	}
	pid, err := podNetns(ctx, pod)
	if err != nil {
		return err
	}
	if err := installChain(ctx, pid, PacketLossChain, rules); err != nil {
		return fmt.Errorf("failed to make pod %s/%s lose %d%% of its packets on %v: %w", pod.Namespace, pod.Name, percent, ports, err)
	}
	return nil
}

// HealPacketLoss removes a packet loss from the Pod. A Pod without one, or
// without any process left, is healed.
func HealPacketLoss(ctx context.Context, pod *corev1.Pod) error {
	pid, err := podNetns(ctx, pod)
	if errors.Is(err, ErrNoPodProcess) {
		return nil
	}
	if err != nil {
		return err
	}
	return healChain(ctx, pid, PacketLossChain)
}
