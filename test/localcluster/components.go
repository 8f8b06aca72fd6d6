package localcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Process is one supervised component: how to start it and how to tell that
// it is up, so the supervisor can start the next one.
type Process struct {
	Name string   `json:"name"`
	Path string   `json:"path"`
	Args []string `json:"args"`
	Env  []string `json:"env,omitempty"`
	// ReadyUnix and ReadyTCP name a socket or host:port that answers once
	// the process is serving. ReadyURL is an HTTPS URL (verified against
	// ReadyCA) that must answer 200: an open port is not enough for the API
	// server, whose clients fail until its bootstrap RBAC exists.
	ReadyUnix string `json:"readyUnix,omitempty"`
	ReadyTCP  string `json:"readyTCP,omitempty"`
	ReadyURL  string `json:"readyURL,omitempty"`
	ReadyCA   string `json:"readyCA,omitempty"`
	// Stage orders the start: every process of a stage starts together once
	// all of the previous stage are ready.
	Stage int `json:"stage"`
	// Node marks node components; containerd must outlive the kubelet so Pods
	// can be torn down through CRI. A node fault stops exactly these.
	Node string `json:"node,omitempty"`
	// Runtime marks a node's container runtime.
	Runtime bool `json:"runtime,omitempty"`
}

// Start stages: the runtimes need nothing, etcd needs nothing but is the API
// server's store, and everything else needs the API server.
const (
	stageRuntime = iota
	stageStore
	stageAPIServer
	stageClients
)

// Plan is everything the supervisor runs, in start order.
type Plan struct {
	Nodes     []Node    `json:"nodes"`
	Processes []Process `json:"processes"`
}

// Node returns the plan's node of that name.
func (p Plan) Node(name string) (Node, error) {
	for _, n := range p.Nodes {
		if n.Name == name {
			return n, nil
		}
	}
	names := make([]string, 0, len(p.Nodes))
	for _, n := range p.Nodes {
		names = append(names, n.Name)
	}
	return Node{}, fmt.Errorf("the local cluster has no node %q (its nodes: %s)", name, strings.Join(names, ", "))
}

// RunningNodes lists the nodes of the cluster this layout set up, from its
// plan; it fails when no cluster was set up.
func (l Layout) RunningNodes() ([]Node, error) {
	plan, err := l.readPlan()
	if err != nil {
		return nil, fmt.Errorf("the local cluster is not set up (no plan): %w", err)
	}
	return plan.Nodes, nil
}

func (l Layout) writePlan(plan Plan) error {
	data, err := json.MarshalIndent(plan, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(l.planFile(), data, 0o644)
}

func (l Layout) readPlan() (Plan, error) {
	var plan Plan
	data, err := os.ReadFile(l.planFile())
	if err != nil {
		return plan, err
	}
	return plan, json.Unmarshal(data, &plan)
}

// buildPlan renders every component's configuration and command line.
func (l Layout) buildPlan(v Versions, bins Binaries, nodes []Node) (Plan, error) {
	plan := Plan{Nodes: nodes}
	pki := l.pkiDir()
	cfgDir := l.configDir()
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		return plan, err
	}
	for _, n := range nodes {
		p, err := l.containerdProcess(n)
		if err != nil {
			return plan, err
		}
		plan.Processes = append(plan.Processes, p)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "audit-policy.yaml"), []byte(auditPolicy), 0o644); err != nil {
		return plan, err
	}
	etcdDir := bins.etcdDefault(v)
	if etcdDir == "" {
		return plan, fmt.Errorf("ETCD_DEFAULT_VERSION %s is not among ETCD_VERSIONS", v.EtcdDefault)
	}
	etcdClient := fmt.Sprintf("http://127.0.0.1:%d", apiserverEtcdClientPort)
	etcdPeer := fmt.Sprintf("http://127.0.0.1:%d", apiserverEtcdPeerPort)
	plan.Processes = append(plan.Processes, Process{
		Name: "etcd",
		Path: filepath.Join(etcdDir, "etcd"),
		Args: []string{
			"--name=localcluster",
			"--data-dir=" + l.etcdDataDir(),
			"--listen-client-urls=" + etcdClient,
			"--advertise-client-urls=" + etcdClient,
			"--listen-peer-urls=" + etcdPeer,
			"--initial-advertise-peer-urls=" + etcdPeer,
			"--initial-cluster=localcluster=" + etcdPeer,
			"--listen-metrics-urls=http://127.0.0.1:23810",
			// A throwaway test cluster: fsync latency on a shared disk is
			// the largest cost of every API write, and nothing here needs
			// durability across a power cut.
			"--unsafe-no-fsync",
			"--quota-backend-bytes=4294967296",
			"--log-level=warn",
		},
		ReadyTCP: fmt.Sprintf("127.0.0.1:%d", apiserverEtcdClientPort),
		Stage:    stageStore,
	})
	plan.Processes = append(plan.Processes, Process{
		Name: "kube-apiserver",
		Path: bins.KubernetesBinary("kube-apiserver"),
		Args: []string{
			"--advertise-address=" + ControlPlaneIP(),
			"--bind-address=" + ControlPlaneIP(),
			fmt.Sprintf("--secure-port=%d", APIServerPort),
			"--etcd-servers=" + etcdClient,
			"--service-cluster-ip-range=" + ServiceCIDR,
			"--client-ca-file=" + filepath.Join(pki, "ca.crt"),
			"--tls-cert-file=" + filepath.Join(pki, "apiserver.crt"),
			"--tls-private-key-file=" + filepath.Join(pki, "apiserver.key"),
			"--kubelet-client-certificate=" + filepath.Join(pki, "apiserver-kubelet-client.crt"),
			"--kubelet-client-key=" + filepath.Join(pki, "apiserver-kubelet-client.key"),
			"--kubelet-certificate-authority=" + filepath.Join(pki, "ca.crt"),
			"--kubelet-preferred-address-types=InternalIP",
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
			"--service-account-issuer=https://kubernetes.default.svc." + ClusterDomain,
			"--service-account-key-file=" + filepath.Join(pki, "sa.pub"),
			"--service-account-signing-key-file=" + filepath.Join(pki, "sa.key"),
			"--allow-privileged=true",
			// Pods without tolerations of their own leave a lost node after
			// this long rather than five minutes (see README, node faults).
			fmt.Sprintf("--default-not-ready-toleration-seconds=%d", int(podEvictionToleration.Seconds())),
			fmt.Sprintf("--default-unreachable-toleration-seconds=%d", int(podEvictionToleration.Seconds())),
			// Writes only, at Metadata level: enough to count what a
			// controller writes (the operator must write nothing while idle)
			// without slowing the API server down.
			"--audit-policy-file=" + filepath.Join(cfgDir, "audit-policy.yaml"),
			"--audit-log-path=" + l.AuditLog(),
			"--audit-log-maxsize=200",
			"--audit-log-maxbackup=1",
			"--profiling=false",
			"--v=1",
		},
		ReadyURL: APIServerURL() + "/readyz",
		ReadyCA:  filepath.Join(pki, "ca.crt"),
		Stage:    stageAPIServer,
	})
	cm := filepath.Join(pki, "controller-manager.kubeconfig")
	plan.Processes = append(plan.Processes, Process{
		Name: "kube-controller-manager",
		Path: bins.KubernetesBinary("kube-controller-manager"),
		Args: []string{
			"--kubeconfig=" + cm,
			"--authentication-kubeconfig=" + cm,
			"--authorization-kubeconfig=" + cm,
			"--bind-address=127.0.0.1",
			"--secure-port=10257",
			"--service-account-private-key-file=" + filepath.Join(pki, "sa.key"),
			"--root-ca-file=" + filepath.Join(pki, "ca.crt"),
			"--cluster-signing-cert-file=" + filepath.Join(pki, "ca.crt"),
			"--cluster-signing-key-file=" + filepath.Join(pki, "ca.key"),
			"--use-service-account-credentials=true",
			"--controllers=*,bootstrapsigner,tokencleaner",
			"--leader-elect=false",
			// A lost node is noticed in tens of seconds, not 40 s to 5 min,
			// so node-fault tests finish; see the kubelet's lease below.
			"--node-monitor-period=" + nodeMonitorPeriod.String(),
			"--node-monitor-grace-period=" + nodeMonitorGracePeriod.String(),
			"--profiling=false",
			"--v=1",
		},
		ReadyTCP: "127.0.0.1:10257",
		Stage:    stageClients,
	})
	sched := filepath.Join(pki, "scheduler.kubeconfig")
	plan.Processes = append(plan.Processes, Process{
		Name: "kube-scheduler",
		Path: bins.KubernetesBinary("kube-scheduler"),
		Args: []string{
			"--kubeconfig=" + sched,
			"--authentication-kubeconfig=" + sched,
			"--authorization-kubeconfig=" + sched,
			"--bind-address=127.0.0.1",
			"--secure-port=10259",
			"--leader-elect=false",
			"--profiling=false",
			"--v=1",
		},
		ReadyTCP: "127.0.0.1:10259",
		Stage:    stageClients,
	})
	proxy, err := l.kubeProxyProcess(bins)
	if err != nil {
		return plan, err
	}
	plan.Processes = append(plan.Processes, proxy, l.networkPolicyProcess(bins))
	for _, n := range nodes {
		kubelet, err := l.kubeletProcess(n, bins)
		if err != nil {
			return plan, err
		}
		plan.Processes = append(plan.Processes, kubelet)
	}
	return plan, nil
}

// Node failure detection. The kubelet renews its Lease every quarter of the
// lease duration (5 s); the node lifecycle controller calls a node
// unreachable once the grace period passes without a renewal, and Pods
// without tolerations of their own are evicted from it after
// podEvictionToleration more. The operator must not depend on any of these.
const (
	nodeLeaseDuration      = 20 * time.Second
	nodeMonitorPeriod      = 2 * time.Second
	nodeMonitorGracePeriod = 20 * time.Second
	podEvictionToleration  = 30 * time.Second
)

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// AuditLog is the API server's audit log of write requests.
func (l Layout) AuditLog() string { return filepath.Join(l.LogDir(), "audit.log") }

func (l Layout) containerdProcess(n Node) (Process, error) {
	root := l.containerdRoot(n)
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
oom_score = 0

[grpc]
  address = %q

[ttrpc]
  address = %q

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # The machine lacks CAP_SYS_RESOURCE, so the negative oom_score_adj the
  # kubelet asks for cannot be set and runc would fail every sandbox.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "%d"
  enable_selinux = false
  max_container_log_line_size = 16384

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    # Debian installs the CNI plugins here, not in /opt/cni/bin.
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
    max_conf_num = 1
`, root, containerdState(n), ContainerdSocket(n), ContainerdSocket(n)+".ttrpc",
		filepath.Join(root, "opt"), PauseImage, 10010+n.Index*100, l.cniConfDir(n))
	path := filepath.Join(l.configDir(), componentName("containerd", n)+".toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return Process{}, err
	}
	if err := l.writeCNIConfig(n); err != nil {
		return Process{}, err
	}
	return Process{
		Name:      componentName("containerd", n),
		Path:      "/usr/bin/containerd",
		Args:      []string{"--config", path, "--log-level", "warn"},
		ReadyUnix: ContainerdSocket(n),
		Stage:     stageRuntime,
		Node:      n.Name,
		Runtime:   true,
	}, nil
}

func (l Layout) writeCNIConfig(n Node) error {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "localcluster-" + n.Name,
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      n.Bridge,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": l.cniIPAMDir(n),
					"ranges":  [][]map[string]string{{{"subnet": n.Subnet, "gateway": n.IP}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(l.cniConfDir(n), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(l.cniConfDir(n), "10-localcluster.conflist"), data, 0o644)
}

func (l Layout) kubeletProcess(n Node, bins Binaries) (Process, error) {
	pki := l.pkiDir()
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
# The machine runs cgroup v1 (hybrid) without systemd as init.
cgroupDriver: cgroupfs
failCgroupV1: false
cgroupRoot: %s
failSwapOn: false
clusterDomain: %s
clusterDNS:
- %s
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
resolvConf: /etc/resolv.conf
# Images are imported, never pulled: garbage-collecting one would break every
# Pod that needs it, and nothing could fetch it again.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 10s
nodeStatusUpdateFrequency: 5s
nodeLeaseDurationSeconds: %d
rotateCertificates: false
serverTLSBootstrap: false
`, n.IP, 10248+n.Index*100, filepath.Join(pki, "kubelet-serving-"+n.Name+".crt"),
		filepath.Join(pki, "kubelet-serving-"+n.Name+".key"), filepath.Join(pki, "ca.crt"),
		cgroupRoot(n), ClusterDomain, DNSServiceIP, ContainerdSocket(n), l.podLogsDir(n),
		int(nodeLeaseDuration.Seconds()))
	path := filepath.Join(l.configDir(), componentName("kubelet", n)+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return Process{}, err
	}
	return Process{
		Name: componentName("kubelet", n),
		Path: bins.KubernetesBinary("kubelet"),
		Args: []string{
			"--config=" + path,
			"--kubeconfig=" + filepath.Join(pki, "kubelet-"+n.Name+".kubeconfig"),
			"--root-dir=" + l.kubeletRoot(n),
			"--cert-dir=" + filepath.Join(l.kubeletRoot(n), "pki"),
			"--node-ip=" + n.IP,
			"--hostname-override=" + n.Name,
			// NodeRestriction lets a kubelet set this label on its own
			// Node; kubernetes.io/hostname comes from the override above.
			"--node-labels=" + corev1.LabelTopologyZone + "=" + n.Zone,
			"--v=1",
		},
		ReadyTCP: fmt.Sprintf("127.0.0.1:%d", 10248+n.Index*100),
		Stage:    stageClients,
		Node:     n.Name,
	}, nil
}

// kubeProxyProcess is the one kube-proxy of the machine. All nodes share the
// host's network namespace, so one set of iptables rules serves the Pods of
// every node; a second kube-proxy would rewrite the same chains. It belongs to
// no node, so node faults leave Service routing alone. Its hostnameOverride
// only decides which endpoints count as local for the Local traffic policies
// (docs/design/0009-one-kube-proxy-for-all-nodes.md).
func (l Layout) kubeProxyProcess(bins Binaries) (Process, error) {
	cfg := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
bindAddress: %s
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Leave the machine's conntrack sysctls alone; the defaults are ample here.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  syncPeriod: 30s
  minSyncPeriod: 0s
`, filepath.Join(l.pkiDir(), "kube-proxy.kubeconfig"), NodeAt(0).Name, ControlPlaneIP(), PodCIDR)
	path := filepath.Join(l.configDir(), "kube-proxy.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return Process{}, err
	}
	return Process{
		Name:     "kube-proxy",
		Path:     bins.KubernetesBinary("kube-proxy"),
		Args:     []string{"--config=" + path, "--v=1"},
		ReadyTCP: "127.0.0.1:10256",
		Stage:    stageClients,
	}, nil
}

func (p Process) String() string { return p.Name + " " + strings.Join(p.Args, " ") }
