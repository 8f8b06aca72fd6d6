package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// debianPackages are what the node needs from the distribution: the container
// runtime, the CNI plugins, packet filtering (nft only to find and remove
// what the NetworkPolicy enforcer may leave in nftables) and a static
// busybox for the tools and helper images.
var debianPackages = []string{
	"containerd", "runc", "containernetworking-plugins", "iptables", "nftables",
	"busybox-static", "conntrack", "iproute2", "kmod", "util-linux",
}

// EnsurePrerequisites installs whatever Debian packages are missing, with a
// single apt-get update, and loads the kernel modules the node needs.
func EnsurePrerequisites(ctx context.Context, p *Progress) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the local cluster needs root (it runs a kubelet and changes the network)")
	}
	var missing []string
	for _, pkg := range debianPackages {
		out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Status}", pkg).Output()
		if err != nil || !strings.Contains(string(out), "install ok installed") {
			missing = append(missing, pkg)
		}
	}
	if len(missing) > 0 {
		p.Printf("installing Debian packages: %s", strings.Join(missing, " "))
		stop := p.heartbeat("installing packages", 20*time.Second)
		defer stop()
		env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		update := exec.CommandContext(ctx, "apt-get", "update")
		update.Env = env
		if out, err := update.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get update failed: %w\n%s", err, tail(string(out), 20))
		}
		install := exec.CommandContext(ctx, "apt-get", append([]string{"install", "-y", "--no-install-recommends"}, missing...)...)
		install.Env = env
		if out, err := install.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get install failed: %w\n%s", err, tail(string(out), 20))
		}
	}
	for _, mod := range []struct{ name, probe string }{
		{"br_netfilter", "/proc/sys/net/bridge/bridge-nf-call-iptables"},
		{"overlay", ""},
	} {
		if mod.probe != "" {
			if _, err := os.Stat(mod.probe); err == nil {
				continue
			}
		} else if moduleAvailable(mod.name) {
			continue
		}
		if out, err := exec.CommandContext(ctx, "modprobe", mod.name).CombinedOutput(); err != nil {
			return fmt.Errorf("failed to load kernel module %s: %w: %s", mod.name, err, out)
		}
	}
	return nil
}

func moduleAvailable(name string) bool {
	data, err := os.ReadFile("/proc/filesystems")
	return err == nil && strings.Contains(string(data), "\t"+name+"\n")
}
