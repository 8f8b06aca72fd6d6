package setup

import (
	"os"
	"path/filepath"
	"testing"
)

func TestClusterDomainFromResolvConf(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string
	}{
		{
			name:    "empty file",
			content: "",
			want:    DefaultClusterDomain,
		},
		{
			name: "pod with the default domain",
			content: "search etcd-system.svc.cluster.local svc.cluster.local cluster.local\n" +
				"nameserver 10.96.0.10\noptions ndots:5\n",
			want: "cluster.local",
		},
		{
			name:    "custom domain",
			content: "nameserver 10.0.0.10\nsearch team-a.svc.k8s.example.com svc.k8s.example.com k8s.example.com\n",
			want:    "k8s.example.com",
		},
		{
			name:    "host search domains appended by the kubelet",
			content: "search default.svc.prod.internal svc.prod.internal prod.internal corp.example.com\n",
			want:    "prod.internal",
		},
		{
			name:    "fully qualified entries and upper case",
			content: "search NS.svc.Cluster.Local. SVC.Cluster.Local. Cluster.Local.\n",
			want:    "cluster.local",
		},
		{
			name:    "tabs and comments",
			content: "# written by the kubelet\nsearch\tns.svc.my.domain\tsvc.my.domain ; trailing comment\n",
			want:    "my.domain",
		},
		{
			name:    "only the namespace entry",
			content: "search kube-system.svc.edge.local\n",
			want:    "edge.local",
		},
		{
			name:    "last search line wins",
			content: "search svc.first.local\nsearch svc.second.local\n",
			want:    "second.local",
		},
		{
			name:    "commented out search line is ignored",
			content: "#search svc.commented.local\nnameserver 1.1.1.1\n",
			want:    DefaultClusterDomain,
		},
		{
			name:    "host resolv.conf without cluster entries",
			content: "search example.com lan\nnameserver 192.168.1.1\n",
			want:    DefaultClusterDomain,
		},
		{
			name:    "entry that merely starts with svc",
			content: "search svcfoo.example.com\n",
			want:    DefaultClusterDomain,
		},
		{
			name:    "bare svc entry has no domain",
			content: "search svc. svc\n",
			want:    DefaultClusterDomain,
		},
		{
			name:    "domain keyword is not a search line",
			content: "domain svc.cluster.example\n",
			want:    DefaultClusterDomain,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClusterDomainFromResolvConf(tt.content); got != tt.want {
				t.Errorf("ClusterDomainFromResolvConf() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestResolveClusterDomain(t *testing.T) {
	dir := t.TempDir()
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("search a.svc.detected.local svc.detected.local detected.local\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		configured string
		path       string
		want       string
	}{
		{name: "configured wins", configured: "given.local", path: resolv, want: "given.local"},
		{name: "configured is normalized", configured: " Given.Local. ", path: resolv, want: "given.local"},
		{name: "detected", configured: "", path: resolv, want: "detected.local"},
		{name: "missing file falls back", configured: "", path: filepath.Join(dir, "missing"), want: DefaultClusterDomain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ResolveClusterDomain(tt.configured, tt.path); got != tt.want {
				t.Errorf("ResolveClusterDomain(%q) = %q, want %q", tt.configured, got, tt.want)
			}
		})
	}
}
