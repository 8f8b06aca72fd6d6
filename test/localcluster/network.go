package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// sysctls the cluster needs. Their previous values are saved before they are
// changed and restored by cluster-down.
var clusterSysctls = map[string]string{
	"net/ipv4/ip_forward":                 "1",
	"net/bridge/bridge-nf-call-iptables":  "1",
	"net/bridge/bridge-nf-call-ip6tables": "1",
}

const forwardGuardChain = chainPrefix + "FORWARD"

// setupNetwork creates each node's bridge, routes the private ranges into it,
// installs a guard that rejects pod traffic headed off the machine and the
// divert that hands new Pod connections to the NetworkPolicy enforcer.
func (l Layout) setupNetwork(ctx context.Context, nodes []Node) error {
	if err := l.applySysctls(); err != nil {
		return err
	}
	for _, n := range nodes {
		if !linkExists(n.Bridge) {
			if err := run(ctx, "ip", "link", "add", n.Bridge, "type", "bridge"); err != nil {
				return err
			}
		}
		if !strings.Contains(output(ctx, "ip", "-o", "-4", "addr", "show", "dev", n.Bridge), n.IP+"/") {
			if err := run(ctx, "ip", "addr", "add", n.IP+"/24", "dev", n.Bridge); err != nil {
				return err
			}
		}
		if err := run(ctx, "ip", "link", "set", n.Bridge, "up"); err != nil {
			return err
		}
	}
	// The Service range goes to the first bridge: without a route of its own a
	// packet to a ClusterIP that kube-proxy has not programmed yet would follow
	// the default route off the machine. A blackhole would not do, because the
	// route lookup fails before kube-proxy's DNAT in OUTPUT can run.
	if err := run(ctx, "ip", "route", "replace", ServiceCIDR, "dev", nodes[0].Bridge); err != nil {
		return err
	}
	// Any pod address that no node's bridge covers is unreachable, never routed.
	if err := run(ctx, "ip", "route", "replace", "unreachable", PodCIDR); err != nil {
		return err
	}
	if err := ensureForwardGuard(ctx); err != nil {
		return err
	}
	return ensureNetworkPolicyDivert(ctx)
}

// ensureForwardGuard drops forwarded pod traffic that would leave through any
// interface other than a node bridge. It lives in the mangle table, which
// runs before filter, so no ACCEPT that kube-proxy inserts into filter's
// FORWARD chain can let a packet past it.
func ensureForwardGuard(ctx context.Context) error {
	ipt := func(args ...string) error {
		return run(ctx, "iptables", append([]string{"-w", "-t", "mangle"}, args...)...)
	}
	_ = ipt("-N", forwardGuardChain)
	if err := ipt("-F", forwardGuardChain); err != nil {
		return err
	}
	if err := ipt("-A", forwardGuardChain, "-s", PodCIDR, "!", "-o", "qlc+",
		"-m", "comment", "--comment", "localcluster: pod traffic stays on this machine", "-j", "DROP"); err != nil {
		return err
	}
	if ipt("-C", "FORWARD", "-j", forwardGuardChain) != nil {
		return ipt("-I", "FORWARD", "1", "-j", forwardGuardChain)
	}
	return nil
}

func (l Layout) applySysctls() error {
	backup := map[string]string{}
	if data, err := os.ReadFile(l.sysctlBackupFile()); err == nil {
		if err := json.Unmarshal(data, &backup); err != nil {
			return err
		}
	}
	for key, want := range clusterSysctls {
		path := filepath.Join("/proc/sys", key)
		cur, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("failed to read sysctl %s (is br_netfilter loaded?): %w", key, err)
		}
		if _, saved := backup[key]; !saved {
			backup[key] = strings.TrimSpace(string(cur))
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			return fmt.Errorf("failed to set sysctl %s: %w", key, err)
		}
	}
	data, _ := json.Marshal(backup)
	return os.WriteFile(l.sysctlBackupFile(), data, 0o644)
}

func (l Layout) restoreSysctls() error {
	data, err := os.ReadFile(l.sysctlBackupFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	backup := map[string]string{}
	if err := json.Unmarshal(data, &backup); err != nil {
		return err
	}
	var errs []error
	for key, val := range backup {
		if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(val), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		_ = os.Remove(l.sysctlBackupFile())
	}
	return errors.Join(errs...)
}

// teardownNetwork removes every interface, route and chain the cluster made.
func teardownNetwork(ctx context.Context) error {
	var errs []error
	for _, link := range ourLinks(ctx) {
		// Host ends of pod veths first; deleting one deletes its peer too.
		for _, port := range linkNames(output(ctx, "ip", "-o", "link", "show", "master", link)) {
			if err := deleteLink(ctx, port); err != nil {
				errs = append(errs, err)
			}
		}
		if err := deleteLink(ctx, link); err != nil {
			errs = append(errs, err)
		}
	}
	for _, prefix := range []string{ServiceCIDR, PodCIDR} {
		if strings.TrimSpace(output(ctx, "ip", "route", "show", "exact", prefix)) != "" {
			if err := run(ctx, "ip", "route", "flush", "exact", prefix); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, family := range []string{"iptables", "ip6tables"} {
		if err := removeChains(ctx, family); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteLink removes an interface. One that is already gone counts as removed:
// a veth disappears with its peer, or with the network namespace a dying
// sandbox is tearing down while the sweep runs.
func deleteLink(ctx context.Context, name string) error {
	err := run(ctx, "ip", "link", "del", name)
	if err != nil && strings.TrimSpace(output(ctx, "ip", "-o", "link", "show", "dev", name)) == "" {
		return nil
	}
	return err
}

// ourLinks lists the node bridges.
func ourLinks(ctx context.Context) []string {
	var out []string
	for _, name := range linkNames(output(ctx, "ip", "-o", "link", "show", "type", "bridge")) {
		if strings.HasPrefix(name, "qlc") {
			out = append(out, name)
		}
	}
	return out
}

func linkNames(ipOutput string) []string {
	var names []string
	for _, line := range strings.Split(ipOutput, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		name := strings.TrimSuffix(fields[1], ":")
		if i := strings.Index(name, "@"); i >= 0 {
			name = name[:i]
		}
		names = append(names, name)
	}
	return names
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// ourChainPrefixes are the chains Kubernetes (KUBE-), the CNI plugins (CNI-)
// and this tool (QLC-) create. Nothing else on these machines uses them.
var ourChainPrefixes = []string{"KUBE-", "CNI-", chainPrefix}

func isOurChain(name string) bool {
	for _, p := range ourChainPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// LeftoverChains lists chains of ours still present in a family's ruleset.
func LeftoverChains(ctx context.Context, family string) ([]string, error) {
	dump, err := exec.CommandContext(ctx, family+"-save").Output()
	if err != nil {
		return nil, fmt.Errorf("failed to run %s-save: %w", family, err)
	}
	var left []string
	table := ""
	for _, line := range strings.Split(string(dump), "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":"):
			name := strings.Fields(line[1:])[0]
			if isOurChain(name) {
				left = append(left, table+"/"+name)
			}
		}
	}
	return left, nil
}

// removeChains deletes, in one iptables-restore transaction per family, every
// jump into our chains from other chains, then flushes and deletes our chains.
func removeChains(ctx context.Context, family string) error {
	dump, err := exec.CommandContext(ctx, family+"-save").Output()
	if err != nil {
		if _, lookErr := exec.LookPath(family + "-save"); lookErr != nil {
			return nil
		}
		return fmt.Errorf("failed to run %s-save: %w", family, err)
	}
	var script bytes.Buffer
	var table string
	var ours []string
	var deletes []string
	flushTable := func() {
		if table != "" && len(ours) > 0 {
			fmt.Fprintf(&script, "*%s\n", table)
			for _, d := range deletes {
				script.WriteString(d + "\n")
			}
			for _, c := range ours {
				fmt.Fprintf(&script, "-F %s\n", c)
			}
			for _, c := range ours {
				fmt.Fprintf(&script, "-X %s\n", c)
			}
			script.WriteString("COMMIT\n")
		}
		ours, deletes = nil, nil
	}
	for _, line := range strings.Split(string(dump), "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			flushTable()
			table = line[1:]
		case strings.HasPrefix(line, ":"):
			if name := strings.Fields(line[1:])[0]; isOurChain(name) {
				ours = append(ours, name)
			}
		case strings.HasPrefix(line, "-A "):
			fields := strings.Fields(line)
			if len(fields) < 2 || isOurChain(fields[1]) {
				continue
			}
			if target := jumpTarget(fields); target != "" && isOurChain(target) {
				deletes = append(deletes, "-D"+strings.TrimPrefix(line, "-A"))
			}
		}
	}
	flushTable()
	if script.Len() == 0 {
		return nil
	}
	cmd := exec.CommandContext(ctx, family+"-restore", "--noflush", "-w")
	cmd.Stdin = &script
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("failed to remove %s chains: %w: %s", family, err, out)
	}
	return nil
}

func jumpTarget(fields []string) string {
	for i := 0; i+1 < len(fields); i++ {
		if fields[i] == "-j" || fields[i] == "-g" {
			return fields[i+1]
		}
	}
	return ""
}

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func output(ctx context.Context, name string, args ...string) string {
	out, _ := exec.CommandContext(ctx, name, args...).Output()
	return string(out)
}
