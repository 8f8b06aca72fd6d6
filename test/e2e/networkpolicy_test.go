//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/test/e2e/framework"
	"github.com/quorumctl/etcd-operator/test/localcluster"
)

// TestNetworkPolicyIsEnforced proves the local cluster enforces
// NetworkPolicy, with no etcd involved: a deny-all policy cuts a server off
// from Pods on its own node (bridged traffic) and on another node (routed
// traffic), the enforcer counts the drops, the host (kubelet probes, this
// test process) still reaches the server, as NetworkPolicy always allows a
// Pod's own node and every node is this host, and a policy that allows one
// namespace lets exactly that namespace in again.
func TestNetworkPolicyIsEnforced(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	nodes := env.Nodes(t, 2)
	serverNode, otherNode := nodes[0].Name, nodes[1].Name
	serverNS := env.CreateNamespace(t, "netpol-server")
	clientNS := env.CreateNamespace(t, "netpol-client")
	cs := env.Clientset

	server := webPod("server", serverNode)
	server.Labels = map[string]string{"app": "netpol-server"}
	_, err := cs.CoreV1().Pods(serverNS).Create(ctx, server, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	// Clients idle; each probe is a new connection made by kubectl exec.
	clients := []struct{ ns, name, node string }{
		{clientNS, "near", serverNode},    // the server's node: bridged
		{clientNS, "far", otherNode},      // another node: routed
		{serverNS, "outsider", otherNode}, // not in the namespace allowed at the end
	}
	for _, c := range clients {
		_, err := cs.CoreV1().Pods(c.ns).Create(ctx, scriptPod(c.name, c.node, "", "exec sleep 3600"), metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	for _, c := range clients {
		_, err := env.WaitForPodReady(ctx, c.ns, c.name, 3*time.Minute)
		g.Expect(err).NotTo(HaveOccurred(), "client %s", c.name)
	}
	ready, err := env.WaitForPodReady(ctx, serverNS, "server", 3*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	addr := net.JoinHostPort(ready.Status.PodIP, strconv.Itoa(webPort))
	readySince := readyTransition(ready)

	t.Log("without a policy every client reaches the server")
	for _, c := range clients {
		g.Expect(waitForProbe(ctx, c.ns, c.name, addr, probeAnswered, serverNode)).To(Succeed(), "client %s", c.name)
	}
	dropsBefore, err := enforcerDrops(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "the enforcer's metrics")

	t.Log("deny all ingress to the server: new connections from Pods go unanswered")
	_, err = cs.NetworkingV1().NetworkPolicies(serverNS).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-all-ingress"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: server.Labels},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	// A dropped SYN times out; a refusal would mean the server is gone, not
	// that a policy stopped the client.
	for _, c := range clients {
		g.Expect(waitForProbe(ctx, c.ns, c.name, addr, probeTimedOut, "")).To(Succeed(), "client %s", c.name)
	}
	dropsAfter, err := enforcerDrops(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dropsAfter).To(BeNumerically(">", dropsBefore), "the enforcer, not something else, dropped the connections")

	t.Log("the host still reaches the server: this test process, and the kubelet's probes")
	g.Expect(framework.WaitFor(ctx, 30*time.Second, time.Second, func(ctx context.Context) (bool, error) {
		body, err := httpGet(ctx, addr)
		return err == nil && body == serverNode, err
	})).To(Succeed(), "the host reaches %s under deny-all", addr)
	// Each timed-out probe above took 3 s, so the policy has stood for
	// longer than the three failed 1 s probes that would make the server
	// unready.
	now, err := cs.CoreV1().Pods(serverNS).Get(ctx, "server", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(framework.PodReady(now)).To(BeTrue(), "the kubelet's readiness probe passes under deny-all")
	g.Expect(readyTransition(now)).To(Equal(readySince), "the server never turned unready")

	t.Log("allow the client namespace: its Pods get in again, Pods elsewhere do not")
	_, err = cs.NetworkingV1().NetworkPolicies(serverNS).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "allow-client-namespace"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: server.Labels},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{corev1.LabelMetadataName: clientNS},
				}}},
				Ports: []networkingv1.NetworkPolicyPort{{
					Protocol: ptr.To(corev1.ProtocolTCP),
					Port:     ptr.To(intstr.FromInt32(webPort)),
				}},
			}},
		},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range clients[:2] {
		g.Expect(waitForProbe(ctx, c.ns, c.name, addr, probeAnswered, serverNode)).To(Succeed(), "client %s", c.name)
	}
	// Both policies are in force by now (the clients above got in through
	// the second), so one probe tells.
	outcome, detail, err := probe(ctx, serverNS, "outsider", addr)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(outcome).To(Equal(probeTimedOut), "a Pod outside the allowed namespace stays cut off: %s", detail)
}

// readyTransition is when the Pod's Ready condition last changed.
func readyTransition(p *corev1.Pod) metav1.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime
		}
	}
	return metav1.Time{}
}

type probeOutcome string

const (
	probeAnswered probeOutcome = "answered"
	// probeTimedOut: no answer within probeTimeout, as when the SYN is
	// dropped.
	probeTimedOut probeOutcome = "timed out"
	// probeFailed: wget gave up at once, as when the connection is refused.
	probeFailed probeOutcome = "failed"
)

const probeTimeout = 3 * time.Second

// probe fetches http://addr/ from a Pod over a new connection. busybox's
// wget -T crashes, so timeout bounds it; busybox's timeout runs the command
// in its own process and kills it, so a timed-out wget exits by SIGTERM
// (143; GNU timeout exits 124). The detail is wget's output.
func probe(ctx context.Context, ns, pod, addr string) (probeOutcome, string, error) {
	return probeURL(ctx, ns, pod, "http://"+addr+"/")
}

// probeURL is probe for any http URL.
func probeURL(ctx context.Context, ns, pod, url string) (probeOutcome, string, error) {
	script := fmt.Sprintf(`out=$(timeout %d wget -q -O - "%s" 2>&1); echo "rc=$?"; echo "$out"`,
		int(probeTimeout.Seconds()), url)
	res := env.Kubectl(ctx, "exec", "-n", ns, pod, "--", "sh", "-c", script)
	if res.Err != nil {
		return "", "", res.Err
	}
	first, rest, _ := strings.Cut(res.Stdout, "\n")
	rc, err := strconv.Atoi(strings.TrimPrefix(first, "rc="))
	if !strings.HasPrefix(first, "rc=") || err != nil {
		return "", "", fmt.Errorf("unexpected probe output %q", res.Stdout)
	}
	detail := strings.TrimSpace(rest)
	switch {
	case rc == 0:
		return probeAnswered, detail, nil
	case rc == 124 || rc >= 128:
		return probeTimedOut, detail, nil
	default:
		return probeFailed, detail, nil
	}
}

// waitForProbe waits until a probe from the Pod has the outcome (and, if
// answered and body is set, that body).
func waitForProbe(ctx context.Context, ns, pod, addr string, want probeOutcome, body string) error {
	return waitForProbeURL(ctx, ns, pod, "http://"+addr+"/", want, body)
}

// waitForProbeURL is waitForProbe for any http URL.
func waitForProbeURL(ctx context.Context, ns, pod, addr string, want probeOutcome, body string) error {
	var last string
	err := framework.WaitFor(ctx, time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		got, detail, err := probeURL(ctx, ns, pod, addr)
		if err != nil {
			return false, err
		}
		last = fmt.Sprintf("%s: %q", got, detail)
		return got == want && (want != probeAnswered || body == "" || detail == body), nil
	})
	if err != nil {
		return fmt.Errorf("%s/%s to %s never %s (last: %s): %w", ns, pod, addr, want, last, err)
	}
	return nil
}

// enforcerDrops is the number of packets the NetworkPolicy enforcer has
// dropped, from its metrics on the host.
func enforcerDrops(ctx context.Context) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, localcluster.NetworkPolicyMetricsURL(), nil)
	if err != nil {
		return 0, err
	}
	resp, err := hostHTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, fmt.Errorf("%s: %s: %s", localcluster.NetworkPolicyMetricsURL(), resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, err
	}
	var drops float64
	// The counter has no series until the first packet is judged.
	for _, m := range families["kube_network_policies_packet_count"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "verdict" && l.GetValue() == "drop" {
				drops += m.GetCounter().GetValue()
			}
		}
	}
	return drops, nil
}
