package localcluster

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
)

// flagValues maps --name=value arguments to their values.
func flagValues(t *testing.T, args []string) map[string]string {
	t.Helper()
	values := map[string]string{}
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok || !strings.HasPrefix(a, "--") {
			t.Fatalf("argument %q is not --name=value", a)
		}
		values[name] = value
	}
	return values
}

// TestNetworkPolicyArgs: the enforcer takes verdicts for the queue the
// divert fills, fails open, serves metrics where the tests read them, and
// believes itself on a node that no node of the cluster is, so its own
// nftables divert never covers Pods that the divert here covers already.
func TestNetworkPolicyArgs(t *testing.T) {
	t.Parallel()
	got := flagValues(t, networkPolicyArgs("/state/pki/kube-network-policies.kubeconfig"))
	want := map[string]string{
		"kubeconfig":           "/state/pki/kube-network-policies.kubeconfig",
		"nfqueue-id":           strconv.Itoa(networkPolicyQueue),
		"fail-open":            "true",
		"metrics-bind-address": networkPolicyMetricsAddr,
		"nftables-table":       networkPolicyTable,
	}
	for name, value := range want {
		if got[name] != value {
			t.Errorf("--%s=%q, want %q", name, got[name], value)
		}
	}
	for i := range MaxNodes {
		if got["node-name"] == NodeAt(i).Name {
			t.Errorf("--node-name=%s is a node of the cluster", got["node-name"])
		}
	}
	if got["node-name"] == "" {
		t.Error("--node-name is empty: the controller would take the host name")
	}
	if NetworkPolicyMetricsURL() != "http://"+got["metrics-bind-address"]+"/metrics" {
		t.Errorf("tests read metrics at %s, the enforcer serves on %s", NetworkPolicyMetricsURL(), got["metrics-bind-address"])
	}
}

// TestNetworkPolicyDivertRules: packets of judged connections pass, the
// first packet of any other connection to or from a Pod address goes to the
// enforcer's queue, and passes while nothing listens there.
func TestNetworkPolicyDivertRules(t *testing.T) {
	t.Parallel()
	rules := networkPolicyDivertRules()
	if len(rules) != 3 {
		t.Fatalf("%d rules, want 3: %v", len(rules), rules)
	}
	first := strings.Join(rules[0], " ")
	if first != "-m conntrack --ctstate ESTABLISHED,RELATED -j RETURN" {
		t.Errorf("the first rule is %q; judged connections must pass before anything is queued", first)
	}
	queue := "-j NFQUEUE --queue-num " + strconv.Itoa(networkPolicyQueue) + " --queue-bypass"
	for i, match := range []string{"-s " + PodCIDR, "-d " + PodCIDR} {
		rule := strings.Join(rules[i+1], " ")
		if !strings.HasPrefix(rule, match+" ") || !strings.HasSuffix(rule, queue) {
			t.Errorf("rule %d is %q, want %q ... %q", i+1, rule, match, queue)
		}
	}
	if !isOurChain(networkPolicyChain) {
		t.Errorf("chain %s does not carry the prefix cluster-down removes", networkPolicyChain)
	}
}

func TestParseNFQueues(t *testing.T) {
	t.Parallel()
	// The kernel prints the listener's netlink port unsigned; an
	// autobound port is a negative number, so it can be this large.
	content := "    0 4294963173     0 2 65531     0     0        0  1\n" +
		"  100  31337     2 2   128     5     7     1234  1\n"
	queues, err := parseNFQueues(content)
	if err != nil {
		t.Fatal(err)
	}
	want := []nfQueue{
		{Number: 0},
		{Number: 100, Waiting: 2, KernelDropped: 5, UserDropped: 7},
	}
	if !slices.Equal(queues, want) {
		t.Errorf("parsed %+v, want %+v", queues, want)
	}
	for _, bad := range []string{"  100  12 0 2\n", "  100  12 x 2   128     5     7     1234  1\n"} {
		if _, err := parseNFQueues(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
	if _, err := parseNFQueues(""); err != nil {
		t.Errorf("no queue bound is not an error of the file: %v", err)
	}
}

// TestOurNFTables: the sweep removes the enforcer's table and nothing else.
func TestOurNFTables(t *testing.T) {
	t.Parallel()
	listing := "table ip mangle\ntable ip filter\n" +
		"table inet kube-network-policies\n" +
		"table ip " + networkPolicyTable + "\n" +
		"table inet " + networkPolicyTable + "\n"
	got := ourNFTables(listing)
	if !slices.Equal(got, []string{"inet " + networkPolicyTable}) {
		t.Errorf("picked %q", got)
	}
	if got := ourNFTables(""); len(got) != 0 {
		t.Errorf("picked %q from nothing", got)
	}
}

// TestNetworkPolicyBuild: the binary is built from the pinned module with
// our main, cached under a name that carries the version and the main.
func TestNetworkPolicyBuild(t *testing.T) {
	t.Parallel()
	b := networkPolicyBuild(Versions{KubeNetworkPolicies: "v0.8.0"})
	if !slices.Equal(b.require, []string{"sigs.k8s.io/kube-network-policies@v0.8.0"}) {
		t.Errorf("requires %v", b.require)
	}
	if !strings.HasPrefix(b.name, "kube-network-policies-v0.8.0-") {
		t.Errorf("cache name %q does not carry the version", b.name)
	}
	if b.binaries[networkPolicyProcessName] != b.modulePath() || b.mainDir != "" {
		t.Errorf("binaries %v, main dir %q: the main must be the tools module's root package", b.binaries, b.mainDir)
	}
	if !strings.Contains(b.mainSource, `"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"`) {
		t.Error("the main does not run upstream's controller package")
	}
	other := networkPolicyBuild(Versions{KubeNetworkPolicies: "v0.9.0"})
	if other.name == b.name {
		t.Error("two versions share a cache name")
	}
}

// TestNetworkPolicyAccess: the enforcer's kubeconfig authenticates as the
// user addons/network-policy.yaml grants what the controller watches.
func TestNetworkPolicyAccess(t *testing.T) {
	t.Parallel()
	l := Layout{StateDir: t.TempDir()}
	if err := l.ensurePKI([]Node{NodeAt(0)}); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(l.networkPolicyKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	auth := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	block, _ := pem.Decode(auth.ClientCertificateData)
	if block == nil {
		t.Fatal("the kubeconfig has no client certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != networkPolicyUser {
		t.Errorf("the enforcer authenticates as %q, the binding names %q", cert.Subject.CommonName, networkPolicyUser)
	}
	if _, err := os.Stat(filepath.Join(l.pkiDir(), networkPolicyProcessName+".key")); err != nil {
		t.Errorf("no key beside the certificate: %v", err)
	}

	objs, err := renderManifest("addons/network-policy.yaml", addonValues{NetworkPolicyUser: networkPolicyUser})
	if err != nil {
		t.Fatal(err)
	}
	var granted []string
	var subjects []any
	for _, obj := range objs {
		switch obj.GetKind() {
		case "ClusterRole":
			rules, _, _ := unstructured.NestedSlice(obj.Object, "rules")
			for _, r := range rules {
				rule := r.(map[string]any)
				verbs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
				groups, _, _ := unstructured.NestedStringSlice(rule, "apiGroups")
				resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
				slices.Sort(verbs)
				for _, g := range groups {
					for _, res := range resources {
						granted = append(granted, g+"/"+res+":"+strings.Join(verbs, ","))
					}
				}
			}
		case "ClusterRoleBinding":
			subjects, _, _ = unstructured.NestedSlice(obj.Object, "subjects")
		}
	}
	slices.Sort(granted)
	want := []string{"/namespaces:list,watch", "/pods:list,watch", "networking.k8s.io/networkpolicies:list,watch"}
	if !slices.Equal(granted, want) {
		t.Errorf("granted %v, want %v", granted, want)
	}
	if len(subjects) != 1 || subjects[0].(map[string]any)["kind"] != "User" || subjects[0].(map[string]any)["name"] != networkPolicyUser {
		t.Errorf("bound to %v, want the user %s", subjects, networkPolicyUser)
	}
}

// TestNetworkPolicyProcess: the enforcer starts with the API server's
// clients, belongs to no node (node faults leave it alone), and runs from
// the binary cache, where the sweep looks for survivors.
func TestNetworkPolicyProcess(t *testing.T) {
	t.Parallel()
	l := Layout{StateDir: "/repo/.cache/localcluster", CacheDir: "/cache"}
	v := Versions{KubeNetworkPolicies: "v0.8.0"}
	p := l.networkPolicyProcess(Binaries{NetworkPolicy: l.binCacheDir(networkPolicyBuild(v).name)})
	if p.Stage != stageClients || p.Node != "" || p.Runtime {
		t.Errorf("stage %d, node %q, runtime %t", p.Stage, p.Node, p.Runtime)
	}
	if !strings.HasPrefix(p.Path, filepath.Join(l.CacheDir, "bin")+"/") {
		t.Errorf("runs %s, outside the binary cache the sweep searches", p.Path)
	}
	if p.ReadyTCP != networkPolicyMetricsAddr {
		t.Errorf("ready at %q, serves metrics at %q", p.ReadyTCP, networkPolicyMetricsAddr)
	}
	if flagValues(t, p.Args)["kubeconfig"] != l.networkPolicyKubeconfig() {
		t.Errorf("args %v do not name the kubeconfig ensurePKI writes", p.Args)
	}
}
