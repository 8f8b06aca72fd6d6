package localcluster

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// Addresses and ranges of the local cluster. They are private ranges; the
// network setup routes them into the node bridges so nothing sent to them can
// follow the default route off the machine.
const (
	PodCIDR            = "10.244.0.0/16"
	ServiceCIDR        = "10.96.0.0/16"
	APIServerServiceIP = "10.96.0.1"
	DNSServiceIP       = "10.96.0.10"
	ClusterDomain      = "cluster.local"
	APIServerPort      = 6443

	// etcd for the API server listens on loopback only, away from 2379 so a
	// developer's own etcd on the default port does not collide with it.
	apiserverEtcdClientPort = 23790
	apiserverEtcdPeerPort   = 23800

	// runDir holds sockets; unix socket paths are limited to 108 bytes, so they
	// cannot live under a repository path of arbitrary length.
	runDir = "/run/qlc"

	// chainPrefix marks every iptables chain the tool itself creates.
	chainPrefix = "QLC-"
)

// Layout is where the local cluster keeps its files.
type Layout struct {
	// RepoRoot is the checkout the cluster belongs to.
	RepoRoot string
	// StateDir holds everything one cluster incarnation owns (.cache/localcluster).
	StateDir string
	// CacheDir holds binaries and images cached by version, shared across clones.
	CacheDir string
}

// NewLayout derives the standard layout for a repository checkout.
func NewLayout(repoRoot string) (Layout, error) {
	cache := os.Getenv("LOCALCLUSTER_CACHE_DIR")
	if cache == "" {
		userCache, err := os.UserCacheDir()
		if err != nil {
			return Layout{}, fmt.Errorf("failed to find the user cache dir: %w", err)
		}
		cache = filepath.Join(userCache, "quorumctl-localcluster")
	}
	return Layout{
		RepoRoot: repoRoot,
		StateDir: filepath.Join(repoRoot, ".cache", "localcluster"),
		CacheDir: cache,
	}, nil
}

// Kubeconfig is the admin kubeconfig of the running cluster.
func (l Layout) Kubeconfig() string { return filepath.Join(l.StateDir, "kubeconfig") }

// LogDir holds one log file per component.
func (l Layout) LogDir() string { return filepath.Join(l.StateDir, "logs") }

// LogFile is the log of one component.
func (l Layout) LogFile(component string) string {
	return filepath.Join(l.LogDir(), component+".log")
}

// BinDir holds links to the binaries of the running cluster, for PATH.
func (l Layout) BinDir() string { return filepath.Join(l.StateDir, "bin") }

func (l Layout) pkiDir() string            { return filepath.Join(l.StateDir, "pki") }
func (l Layout) configDir() string         { return filepath.Join(l.StateDir, "config") }
func (l Layout) etcdDataDir() string       { return filepath.Join(l.StateDir, "etcd") }
func (l Layout) supervisorPIDFile() string { return filepath.Join(l.StateDir, "supervisor.pid") }
func (l Layout) planFile() string          { return filepath.Join(l.StateDir, "plan.json") }
func (l Layout) sysctlBackupFile() string  { return filepath.Join(l.StateDir, "sysctl-backup.json") }

// MaxNodes bounds --nodes: every node is a kubelet and a containerd on this
// one machine, and each needs its own zone letter and port offsets.
const MaxNodes = 5

// Node describes one kubelet node. Everything node-specific (containerd state,
// kubelet root, cgroup root, bridge, subnet, zone and local volumes) is
// derived from the index, so more nodes only need a higher index.
type Node struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	// Bridge is the CNI bridge; its address is the node IP.
	Bridge string `json:"bridge"`
	Subnet string `json:"subnet"`
	IP     string `json:"ip"`
	// Zone is the node's topology.kubernetes.io/zone label.
	Zone string `json:"zone"`
}

// NodeAt returns the node with the given index.
func NodeAt(index int) Node {
	return Node{
		Index:  index,
		Name:   fmt.Sprintf("node%d", index),
		Bridge: fmt.Sprintf("qlc%d", index),
		Subnet: fmt.Sprintf("10.244.%d.0/24", index),
		IP:     fmt.Sprintf("10.244.%d.1", index),
		Zone:   fmt.Sprintf("zone-%c", 'a'+index),
	}
}

// podIPRange is every address the node's Pods can get: the subnet without its
// network, gateway (the node IP, which for node0 is the API server's address)
// and broadcast addresses.
func (n Node) podIPRange() string {
	return fmt.Sprintf("10.244.%d.2-10.244.%d.254", n.Index, n.Index)
}

// ControlPlaneIP is where the API server serves: the first node's bridge
// address, which both the host and every pod can reach, unlike loopback.
func ControlPlaneIP() string { return NodeAt(0).IP }

// APIServerURL is the API server's address.
func APIServerURL() string {
	return "https://" + net.JoinHostPort(ControlPlaneIP(), fmt.Sprint(APIServerPort))
}

func (l Layout) nodeDir(n Node) string        { return filepath.Join(l.StateDir, "nodes", n.Name) }
func (l Layout) kubeletRoot(n Node) string    { return filepath.Join(l.nodeDir(n), "kubelet") }
func (l Layout) podLogsDir(n Node) string     { return filepath.Join(l.nodeDir(n), "pod-logs") }
func (l Layout) cniConfDir(n Node) string     { return filepath.Join(l.nodeDir(n), "cni", "net.d") }
func (l Layout) cniIPAMDir(n Node) string     { return filepath.Join(l.nodeDir(n), "cni", "ipam") }
func (l Layout) containerdRoot(n Node) string { return filepath.Join(l.nodeDir(n), "containerd") }

// NodeStorageDir holds the node's local-path volumes, one directory per
// volume: the node's own disk, which node wipe empties.
func (l Layout) NodeStorageDir(n Node) string { return filepath.Join(l.nodeDir(n), "storage") }

// ContainerdSocket is the CRI endpoint of a node.
func ContainerdSocket(n Node) string { return filepath.Join(runDir, n.Name, "containerd.sock") }

func containerdState(n Node) string { return filepath.Join(runDir, n.Name, "containerd") }

// cgroupRoot keeps each node's pods under their own cgroup subtree.
func cgroupRoot(n Node) string { return "/qlc-" + n.Name }

func componentName(base string, n Node) string { return base + "-" + n.Name }
