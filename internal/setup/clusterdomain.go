package setup

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

const (
	// DefaultClusterDomain is used when the domain is neither configured nor
	// found in resolv.conf.
	DefaultClusterDomain = "cluster.local"

	// ResolvConfPath is where a Pod's resolver configuration lives.
	ResolvConfPath = "/etc/resolv.conf"
)

// ResolveClusterDomain returns the configured domain when one is given, else
// the one detected from the resolver configuration at resolvConfPath, else
// DefaultClusterDomain. A resolv.conf that cannot be read is not an error:
// outside a cluster there is usually nothing to detect.
func ResolveClusterDomain(configured, resolvConfPath string) string {
	if d := normalizeDomain(configured); d != "" {
		return d
	}
	data, err := os.ReadFile(resolvConfPath)
	if err != nil {
		return DefaultClusterDomain
	}
	return ClusterDomainFromResolvConf(string(data))
}

// ClusterDomainFromResolvConf finds the cluster domain in the contents of a
// resolv.conf. The kubelet writes a Pod's search list as
// "<namespace>.svc.<domain> svc.<domain> <domain>", so the domain is what
// follows the entry starting with "svc."; an entry of the form
// "<namespace>.svc.<domain>" is accepted as well. As in the resolver, the
// last search line wins. Without a match it returns DefaultClusterDomain.
func ClusterDomainFromResolvConf(content string) string {
	var search []string
	sc := bufio.NewScanner(strings.NewReader(content))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "search" {
			continue
		}
		search = fields[1:]
	}
	for _, entry := range search {
		if d, ok := strings.CutPrefix(normalizeDomain(entry), "svc."); ok && d != "" {
			return d
		}
	}
	for _, entry := range search {
		if _, d, ok := strings.Cut(normalizeDomain(entry), ".svc."); ok && d != "" {
			return d
		}
	}
	return DefaultClusterDomain
}

// normalizeDomain lowercases a domain and drops surrounding spaces and the
// trailing dot of a fully qualified name.
func normalizeDomain(d string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
}

// validateDomain accepts an empty domain (detect it) or a DNS name made of
// RFC 1123 labels.
func validateDomain(d string) error {
	d = normalizeDomain(d)
	if d == "" {
		return nil
	}
	if len(d) > 253 {
		return fmt.Errorf("cluster domain %q is longer than 253 characters", d)
	}
	for _, label := range strings.Split(d, ".") {
		if !isDNSLabel(label) {
			return fmt.Errorf("cluster domain %q is not a DNS name", d)
		}
	}
	return nil
}

func isDNSLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
