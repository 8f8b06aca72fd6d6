package localcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// NetworkPolicy is enforced by the controller of
// sigs.k8s.io/kube-network-policies, SIG Network's implementation and the one
// kind runs. It judges the first packet of each connection in user space
// through NFQUEUE. One process serves every node, as one kube-proxy does
// (docs/design/0014-networkpolicy-enforcer.md says why, and what differs
// from a real cluster).
const (
	networkPolicyProcessName = "kube-network-policies"
	// networkPolicyQueue is the NFQUEUE the enforcer takes verdicts for.
	networkPolicyQueue = 100
	// networkPolicyChain sends the first packet of every new forwarded Pod
	// connection to the queue. Its prefix makes cluster-down remove it with
	// the tool's other chains.
	networkPolicyChain = chainPrefix + "NETPOL"
	// networkPolicyTable is the nftables table the controller programs its
	// own divert in. The kernels this project runs on lack the nftables
	// queue expression (CONFIG_NFT_QUEUE), so the table is never made; on a
	// kernel that has it the table diverts nothing, as networkPolicyNodeName
	// has no Pods. The sweep removes it all the same.
	networkPolicyTable = "qlc-kube-network-policies"
	// networkPolicyNodeName is the node the controller believes it runs on.
	// It decides only which Pods the controller's own nftables divert
	// covers; verdicts look Pods up by address across the whole cluster. No
	// node has this name, so that divert stays empty and the one in
	// networkPolicyChain, which covers every node, is the only one.
	networkPolicyNodeName = "localcluster"
	// networkPolicyUser is the enforcer's identity: its client certificate's
	// common name, bound to the read access it needs by
	// addons/network-policy.yaml.
	networkPolicyUser = "localcluster:kube-network-policies"
	// networkPolicyMetricsAddr serves the controller's packet counters
	// (kube_network_policies_packet_count by verdict) on loopback; the
	// supervisor takes an answer there for started.
	networkPolicyMetricsAddr = "127.0.0.1:10280"
)

// NetworkPolicyMetricsURL is where the enforcer's Prometheus metrics are
// served, for tests that check a verdict was the enforcer's.
func NetworkPolicyMetricsURL() string { return "http://" + networkPolicyMetricsAddr + "/metrics" }

func (l Layout) networkPolicyKubeconfig() string {
	return filepath.Join(l.pkiDir(), networkPolicyProcessName+".kubeconfig")
}

// networkPolicyBuild builds the controller with a main of our own; see
// networkPolicyMain. The cache name carries a digest of that main so that a
// change to it is built, not served from the cache under the same version.
func networkPolicyBuild(v Versions) goBuild {
	digest := sha256.Sum256([]byte(networkPolicyMain))
	b := goBuild{
		name:       networkPolicyProcessName + "-" + v.KubeNetworkPolicies + "-" + hex.EncodeToString(digest[:4]),
		require:    []string{"sigs.k8s.io/kube-network-policies@" + v.KubeNetworkPolicies},
		mainSource: networkPolicyMain,
	}
	b.binaries = map[string]string{networkPolicyProcessName: b.modulePath()}
	return b
}

// networkPolicyMain runs upstream's controller package
// (sigs.k8s.io/kube-network-policies/pkg/networkpolicy). Upstream's own main
// cannot run here: it reads only the in-cluster service account (a host
// process has none), it fixes the nftables table name, and it stops on
// SIGINT alone where the supervisor sends SIGTERM. It also ignores an error
// of the controller and runs on without enforcing; this one exits, so the
// supervisor restarts it. NRI stays enabled: with it disabled, v0.8.0
// dereferences a nil plugin for any address that is no Pod's. Without an NRI
// socket (containerd 1.6 has none) the plugin only logs that it cannot
// connect.
const networkPolicyMain = `// Command kube-network-policies runs the NetworkPolicy controller of
// sigs.k8s.io/kube-network-policies as a host process of the local cluster.
package main

import (
	"context"
	"errors"
	"flag"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster (required)")
	nodeName := flag.String("node-name", "", "node whose Pods the controller's own nftables divert covers (required)")
	table := flag.String("nftables-table", "", "the controller's own nftables table (required)")
	queueID := flag.Int("nfqueue-id", 100, "NFQUEUE to take verdicts for")
	failOpen := flag.Bool("fail-open", false, "accept packets that cannot be judged")
	metricsAddr := flag.String("metrics-bind-address", "127.0.0.1:9080", "address of /metrics")
	klog.InitFlags(nil)
	flag.Parse()
	if *kubeconfig == "" || *nodeName == "" || *table == "" {
		klog.Error("--kubeconfig, --node-name and --nftables-table are required")
		os.Exit(2)
	}
	// The controller removes its nftables table when Run returns.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.ErrorS(err, "failed to load the kubeconfig")
		os.Exit(1)
	}
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		klog.ErrorS(err, "failed to create a client")
		os.Exit(1)
	}

	listener, err := net.Listen("tcp", *metricsAddr)
	if err != nil {
		klog.ErrorS(err, "failed to listen for metrics")
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.Handler())
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := server.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "metrics server failed")
		}
	}()
	defer server.Close()

	// Its access is an add-on applied once the API server answers; were the
	// informers refused meanwhile, their backoff would grow to half a minute.
	for first := true; ; first = false {
		_, err := client.NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			break
		}
		if first {
			klog.InfoS("Waiting for read access to NetworkPolicies, Pods and namespaces", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}

	factory := informers.NewSharedInformerFactory(client, 0)
	controller, err := networkpolicy.NewController(
		client,
		factory.Networking().V1().NetworkPolicies(),
		factory.Core().V1().Namespaces(),
		factory.Core().V1().Pods(),
		nil, nil, nil, nil, // no AdminNetworkPolicy
		networkpolicy.Config{
			FailOpen:            *failOpen,
			QueueID:             *queueID,
			NodeName:            *nodeName,
			NFTableName:         *table,
			NetfilterBug1766Fix: true,
		},
	)
	if err != nil {
		klog.ErrorS(err, "failed to create the controller")
		os.Exit(1)
	}
	factory.Start(ctx.Done())
	err = controller.Run(ctx)
	factory.Shutdown()
	if err != nil && ctx.Err() == nil {
		klog.ErrorS(err, "the controller stopped")
		os.Exit(1)
	}
}
`

// networkPolicyArgs is the enforcer's command line. It fails open: every
// new Pod connection of the machine passes through its queue (see
// networkPolicyDivertRules), so failing closed would cut every Pod off
// whenever it restarts, where upstream's divert would cut off only the Pods
// a policy selects.
func networkPolicyArgs(kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--node-name=" + networkPolicyNodeName,
		"--nftables-table=" + networkPolicyTable,
		"--nfqueue-id=" + strconv.Itoa(networkPolicyQueue),
		"--fail-open=true",
		"--metrics-bind-address=" + networkPolicyMetricsAddr,
		"--v=1",
	}
}

// networkPolicyProcess is the machine's one enforcer. Like kube-proxy it
// belongs to no node: node faults cut a node's Pods off by address and
// leave the enforcer of the others alone.
func (l Layout) networkPolicyProcess(bins Binaries) Process {
	return Process{
		Name:     networkPolicyProcessName,
		Path:     filepath.Join(bins.NetworkPolicy, networkPolicyProcessName),
		Args:     networkPolicyArgs(l.networkPolicyKubeconfig()),
		ReadyTCP: networkPolicyMetricsAddr,
		Stage:    stageClients,
	}
}

// networkPolicyDivertRules are the rules of networkPolicyChain, jumped to
// from mangle FORWARD after the forward guard. They play the part of the
// nftables rules upstream installs, which cannot load here: a packet of a
// connection already judged passes; the first packet of any other to or
// from a Pod address goes to the enforcer. Upstream queues only the Pods a
// policy selects, which it keeps in an nftables set inside its process; here
// every Pod's first packets are judged, and a Pod no policy selects gets the
// verdict accept.
//
// Only forwarded packets are diverted. What the host itself sends to a Pod
// (kubelet probes, the API server, a test process) leaves through OUTPUT and
// is never judged, and replies reach the host through INPUT. Upstream
// accepts the same traffic with "meta skuid 0 accept", since every such
// process runs as root, and NetworkPolicy always allows a Pod's own node;
// every node is this host. --queue-bypass lets traffic pass while no
// enforcer listens, in keeping with --fail-open.
func networkPolicyDivertRules() [][]string {
	queue := []string{"-j", "NFQUEUE", "--queue-num", strconv.Itoa(networkPolicyQueue), "--queue-bypass"}
	comment := []string{"-m", "comment", "--comment", "localcluster: kube-network-policies judges new Pod connections"}
	return [][]string{
		{"-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"},
		append(append([]string{"-s", PodCIDR}, comment...), queue...),
		append(append([]string{"-d", PodCIDR}, comment...), queue...),
	}
}

// ensureNetworkPolicyDivert installs networkPolicyChain. Before the
// enforcer binds its queue the divert lets everything through.
func ensureNetworkPolicyDivert(ctx context.Context) error {
	ipt := func(args ...string) error {
		return run(ctx, "iptables", append([]string{"-w", "-t", "mangle"}, args...)...)
	}
	_ = ipt("-N", networkPolicyChain)
	if err := ipt("-F", networkPolicyChain); err != nil {
		return err
	}
	for _, rule := range networkPolicyDivertRules() {
		if err := ipt(append([]string{"-A", networkPolicyChain}, rule...)...); err != nil {
			return err
		}
	}
	if ipt("-C", "FORWARD", "-j", networkPolicyChain) != nil {
		return ipt("-A", "FORWARD", "-j", networkPolicyChain)
	}
	return nil
}

// nfQueue is one bound NFQUEUE as /proc/net/netfilter/nfnetlink_queue lists
// it.
type nfQueue struct {
	Number uint64
	// Waiting packets have not had a verdict yet.
	Waiting uint64
	// KernelDropped overflowed the queue; UserDropped overflowed the
	// listener's socket.
	KernelDropped, UserDropped uint64
}

const nfQueueProcFile = "/proc/net/netfilter/nfnetlink_queue"

// parseNFQueues reads the kernel's list of bound queues: one line per queue
// with its number, the listener's netlink port, waiting packets, copy mode,
// copy range, kernel drops, user drops, the last packet id and a constant.
func parseNFQueues(content string) ([]nfQueue, error) {
	var queues []nfQueue
	for _, line := range strings.Split(content, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) < 7 {
			return nil, fmt.Errorf("malformed line %q in %s", line, nfQueueProcFile)
		}
		var q nfQueue
		for i, dst := range map[int]*uint64{0: &q.Number, 2: &q.Waiting, 5: &q.KernelDropped, 6: &q.UserDropped} {
			n, err := strconv.ParseUint(fields[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("malformed line %q in %s: %w", line, nfQueueProcFile, err)
			}
			*dst = n
		}
		queues = append(queues, q)
	}
	return queues, nil
}

// errQueueNotBound says the enforcer is not (yet) taking verdicts: it binds
// its queue only once its caches of Pods, namespaces and policies are
// synced, so a bound queue means policies are being enforced.
var errQueueNotBound = errors.New("the NetworkPolicy enforcer has not bound its NFQUEUE")

// networkPolicyQueueState returns the enforcer's queue, or errQueueNotBound.
func networkPolicyQueueState() (nfQueue, error) {
	data, err := os.ReadFile(nfQueueProcFile)
	if errors.Is(err, os.ErrNotExist) {
		// The kernel creates the file with the first bound queue.
		return nfQueue{}, fmt.Errorf("%w (no %s)", errQueueNotBound, nfQueueProcFile)
	}
	if err != nil {
		return nfQueue{}, err
	}
	queues, err := parseNFQueues(string(data))
	if err != nil {
		return nfQueue{}, err
	}
	for _, q := range queues {
		if q.Number == networkPolicyQueue {
			return q, nil
		}
	}
	return nfQueue{}, fmt.Errorf("%w %d", errQueueNotBound, networkPolicyQueue)
}

// ourNFTables picks the enforcer's table out of "nft list tables" output
// ("table <family> <name>" per line), as "<family> <name>".
func ourNFTables(listing string) []string {
	var ours []string
	for _, line := range strings.Split(listing, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 3 && fields[0] == "table" && fields[1] == "inet" && fields[2] == networkPolicyTable {
			ours = append(ours, fields[1]+" "+fields[2])
		}
	}
	return ours
}

// LeftoverNFTables lists the enforcer's nftables table if it is still
// there. Without the nft command (installed with the prerequisites) there
// is nothing to look with, and nothing is reported.
func LeftoverNFTables(ctx context.Context) ([]string, error) {
	if _, err := exec.LookPath("nft"); err != nil {
		return nil, nil
	}
	out, err := exec.CommandContext(ctx, "nft", "list", "tables").Output()
	if err != nil {
		return nil, fmt.Errorf("failed to list nftables tables: %w", err)
	}
	return ourNFTables(string(out)), nil
}

// removeNFTables deletes the enforcer's table, which it removes itself on
// SIGTERM but not when killed.
func removeNFTables(ctx context.Context) error {
	tables, err := LeftoverNFTables(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range tables {
		if err := run(ctx, "nft", append([]string{"delete", "table"}, strings.Fields(t)...)...); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
