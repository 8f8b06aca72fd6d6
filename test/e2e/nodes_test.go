//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
	"github.com/quorumctl/etcd-operator/test/localcluster"
)

// e2eNodes is what make test-e2e brings up.
const e2eNodes = 3

// webPort is where the test's web Pods serve their node's name.
const webPort = 8080

// webPod serves its node's name over HTTP from the tools image (busybox
// httpd), pinned to one node.
func webPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{corev1.LabelHostname: node},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			SecurityContext:               framework.RestrictedPodSecurity(),
			Containers: []corev1.Container{{
				Name: "web", Image: localcluster.ToolsImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/bin/sh", "-c", fmt.Sprintf(
					`mkdir -p /tmp/www && echo "$NODE" > /tmp/www/index.html && exec httpd -f -p %d -h /tmp/www`, webPort)},
				Env: []corev1.EnvVar{{Name: "NODE", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"},
				}}},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: webPort}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(webPort)}},
					PeriodSeconds: 1,
				},
				SecurityContext: framework.RestrictedContainerSecurity(),
			}},
		},
	}
}

// scriptPod runs a shell script to completion with the tools image, on the
// given node unless node is empty, with the claim (if any) at /data.
func scriptPod(name, node, claim, script string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			SecurityContext:               framework.RestrictedPodSecurity(),
			Containers: []corev1.Container{{
				Name: "script", Image: localcluster.ToolsImage, ImagePullPolicy: corev1.PullNever,
				Command:         []string{"/bin/sh", "-c", script},
				SecurityContext: framework.RestrictedContainerSecurity(),
			}},
		},
	}
	if node != "" {
		p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	}
	if claim != "" {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
		}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	}
	return p
}

// runScript runs a script Pod to success and returns it and its output.
func runScript(ctx context.Context, t *testing.T, ns string, p *corev1.Pod) (*corev1.Pod, string) {
	t.Helper()
	g := NewWithT(t)
	_, err := env.Clientset.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "create pod %s", p.Name)
	g.Expect(env.WaitForPodSucceeded(ctx, ns, p.Name, 3*time.Minute)).To(Succeed(), "pod %s", p.Name)
	got, err := env.Clientset.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	logs := env.Kubectl(ctx, "logs", "-n", ns, p.Name)
	g.Expect(logs.Err).NotTo(HaveOccurred())
	return got, strings.TrimSpace(logs.Stdout)
}

func createClaim(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	_, err := env.Clientset.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("failed to create claim %s: %v", name, err)
	}
}

// claimVolume returns the PersistentVolume bound to a claim.
func claimVolume(ctx context.Context, t *testing.T, ns, claim string) *corev1.PersistentVolume {
	t.Helper()
	g := NewWithT(t)
	pvc, err := env.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pvc.Spec.VolumeName).NotTo(BeEmpty(), "claim %s is bound", claim)
	pv, err := env.Clientset.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return pv
}

// volumeNode is the one node a volume's node affinity allows.
func volumeNode(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	var nodes []string
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn {
				nodes = append(nodes, e.Values...)
			}
		}
	}
	if len(nodes) != 1 {
		return ""
	}
	return nodes[0]
}

// TestNodesSmoke proves what the operator relies on across nodes: every node
// reaches the Pods of every node and a Service, DNS answers on every node,
// and a local volume is made on, and stays bound to, the node its first Pod
// was scheduled to.
func TestNodesSmoke(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	nodes := env.Nodes(t, e2eNodes)
	ns := env.CreateNamespace(t, "nodes")
	cs := env.Clientset

	for _, n := range nodes {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, webPod("web-"+n.Name, n.Name), metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(webPort)}},
		},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var targets []string
	for _, n := range nodes {
		p, err := env.WaitForPodReady(ctx, ns, "web-"+n.Name, 3*time.Minute)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Spec.NodeName).To(Equal(n.Name))
		g.Expect(p.Status.PodIP).To(HavePrefix(strings.TrimSuffix(n.Subnet, "0/24")), "a Pod on %s gets an address of its node's subnet", n.Name)
		targets = append(targets, n.Name+"="+p.Status.PodIP)
	}

	t.Log("from a Pod on each node: the web Pod of every node, the Service by its DNS name")
	fqdn := fmt.Sprintf("web.%s.svc.%s", ns, localcluster.ClusterDomain)
	// busybox's wget -T crashes; timeout bounds each request instead.
	script := fmt.Sprintf(`set -e
for target in %s; do
  node=${target%%%%=*}; ip=${target#*=}
  got=$(timeout 10 wget -O - "http://$ip:%d/" 2>/dev/null)
  [ "$got" = "$node" ] || { echo "the Pod of $node at $ip answered '$got'"; exit 1; }
done
nslookup %s | grep -q "Address: %s" || { echo "no answer for %s"; nslookup %s; exit 1; }
got=$(timeout 10 wget -O - "http://%s/" 2>/dev/null)
case " %s " in *" $got "*) ;; *) echo "the Service answered '$got'"; exit 1 ;; esac
echo reached all`, strings.Join(targets, " "), webPort, fqdn, svc.Spec.ClusterIP, fqdn, fqdn, fqdn, nodeNames(nodes))
	for _, n := range nodes {
		p, out := runScript(ctx, t, ns, scriptPod("client-"+n.Name, n.Name, "", script))
		g.Expect(p.Spec.NodeName).To(Equal(n.Name))
		g.Expect(out).To(HaveSuffix("reached all"), "client on %s", n.Name)
	}

	t.Log("a volume is made on the node of its first Pod and brings a re-created Pod back there, data and all")
	for _, n := range nodes {
		claim := "data-" + n.Name
		createClaim(ctx, t, ns, claim)
		marker := n.Name + "-" + rand.String(8)
		runScript(ctx, t, ns, scriptPod("writer-"+n.Name, n.Name, claim, "echo "+marker+" > /data/marker"))
		pv := claimVolume(ctx, t, ns, claim)
		g.Expect(volumeNode(pv)).To(Equal(n.Name), "volume %s is bound to its Pod's node by node affinity", pv.Name)
		g.Expect(pv.Spec.HostPath).NotTo(BeNil())
		g.Expect(pv.Spec.HostPath.Path).To(HavePrefix(env.Layout.NodeStorageDir(n)+"/"), "volume %s lives on %s's disk", pv.Name, n.Name)
		g.Expect(cs.CoreV1().Pods(ns).Delete(ctx, "writer-"+n.Name, metav1.DeleteOptions{})).To(Succeed())
		// No node selector: the volume's node affinity alone places it.
		p, out := runScript(ctx, t, ns, scriptPod("reader-"+n.Name, "", claim, "cat /data/marker"))
		g.Expect(p.Spec.NodeName).To(Equal(n.Name))
		g.Expect(out).To(Equal(marker))
	}
}

func nodeNames(nodes []localcluster.Node) string {
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	return strings.Join(names, " ")
}

// TestMembersSpreadOverNodesAndZones: with default scheduling the scheduler
// puts one member of a 3-member cluster on each node, each in its own zone.
func TestMembersSpreadOverNodesAndZones(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	env.Nodes(t, e2eNodes)
	g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "spread")
	g.Expect(c.Create(ctx, &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "spread", Namespace: ns},
		Spec: v1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3),
			MemberTemplate: v1alpha1.MemberTemplate{Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("256Mi"))}}},
	})).To(Succeed())
	_, err = framework.WaitForClusterReady(ctx, c, ns, "spread", 5*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	pods, err := env.MemberPods(ctx, ns, "spread")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(3))
	nodes, zones := map[string]string{}, map[string]string{}
	for member, p := range pods {
		node, err := env.Clientset.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		zone := node.Labels[corev1.LabelTopologyZone]
		g.Expect(zone).NotTo(BeEmpty(), "node %s has a zone", node.Name)
		g.Expect(nodes).NotTo(HaveKey(node.Name), "%s shares node %s with %s", member, node.Name, nodes[node.Name])
		g.Expect(zones).NotTo(HaveKey(zone), "%s shares zone %s with %s", member, zone, zones[zone])
		nodes[node.Name], zones[zone] = member, member
		t.Logf("%s on %s in %s", member, node.Name, zone)
	}
}

// TestNodeStopStartWipe: node stop is a hard node loss — every process of the
// node is gone, its Pod addresses time out, the Node goes NotReady while the
// API server and DNS on the other nodes carry on — and node start brings the
// node back Ready with its disk; node wipe refuses a running node and gives
// a stopped one a blank disk. The node is node0, whose bridge carries the
// API server's address.
func TestNodeStopStartWipe(t *testing.T) {
	framework.Serial(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	nodes := env.Nodes(t, e2eNodes)
	victim, other := nodes[0], nodes[1]
	ns := env.CreateNamespace(t, "nodefault")
	cs := env.Clientset
	env.StartNodeAtCleanup(t, victim.Name)

	// The web Pod tolerates its node's loss for good, like a DaemonSet's, so
	// it is still there to restart when the node comes back.
	web := webPod("web", victim.Name)
	web.Spec.Tolerations = []corev1.Toleration{
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	}
	_, err := cs.CoreV1().Pods(ns).Create(ctx, web, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	createClaim(ctx, t, ns, "disk")
	marker := "written-before-the-stop-" + rand.String(6)
	runScript(ctx, t, ns, scriptPod("writer", victim.Name, "disk", "echo "+marker+" > /data/marker"))
	g.Expect(cs.CoreV1().Pods(ns).Delete(ctx, "writer", metav1.DeleteOptions{})).To(Succeed())
	pod, err := env.WaitForPodReady(ctx, ns, "web", 3*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	addr := fmt.Sprintf("%s:%d", pod.Status.PodIP, webPort)
	g.Expect(httpGet(ctx, addr)).To(Equal(victim.Name))

	t.Log("node wipe refuses a running node")
	out, err := env.LocalCluster(ctx, "node", "wipe", victim.Name)
	g.Expect(err).To(HaveOccurred(), "wipe of a running node: %s", out)
	g.Expect(out).To(ContainSubstring(localcluster.ErrNodeNotStopped.Error()))
	g.Expect(env.NodeVolumes(victim)).NotTo(BeEmpty())

	t.Logf("node stop %s: nothing of the node runs, its Pod's address times out", victim.Name)
	_, err = env.LocalCluster(ctx, "node", "stop", victim.Name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Layout.NodeProcesses(victim)).To(BeEmpty(), "no kubelet, containerd, shim or container process of %s survives", victim.Name)
	err = dialWeb(addr)
	g.Expect(err).To(HaveOccurred(), "%s must not answer", addr)
	g.Expect(isTimeout(err)).To(BeTrue(), "a lost node's Pod times out rather than refusing: %v", err)
	stopped := time.Now()
	g.Expect(env.WaitForNodeReady(ctx, victim.Name, false, 2*time.Minute)).To(Succeed())
	t.Logf("%s NotReady %s after the stop", victim.Name, time.Since(stopped).Round(time.Second))

	t.Logf("the API server and DNS serve on %s", other.Name)
	g.Expect(framework.WaitFor(ctx, time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		return dnsOnlyOutside(ctx, victim.Name)
	})).To(Succeed(), "the lost node's CoreDNS leaves the Service")
	_, out = runScript(ctx, t, ns, scriptPod("dns", other.Name, "", "nslookup kubernetes.default.svc."+localcluster.ClusterDomain))
	g.Expect(out).To(ContainSubstring(localcluster.APIServerServiceIP))

	t.Logf("node start %s: Ready again, its Pod serves again, its disk kept the data", victim.Name)
	_, err = env.LocalCluster(ctx, "node", "start", victim.Name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.WaitForNodeReady(ctx, victim.Name, true, 2*time.Minute)).To(Succeed())
	expectWebBack(ctx, t, ns, pod, victim.Name)
	p, out := runScript(ctx, t, ns, scriptPod("reader", "", "disk", "cat /data/marker"))
	g.Expect(p.Spec.NodeName).To(Equal(victim.Name))
	g.Expect(out).To(Equal(marker))
	g.Expect(cs.CoreV1().Pods(ns).Delete(ctx, "reader", metav1.DeleteOptions{})).To(Succeed())

	t.Logf("node stop, node wipe, node start %s: the volume comes back empty", victim.Name)
	g.Expect(env.StopNode(ctx, t, victim.Name)).To(Succeed())
	g.Expect(env.Layout.WipeNode(ctx, victim.Name)).To(Succeed())
	g.Expect(env.NodeVolumes(victim)).To(BeEmpty())
	g.Expect(env.StartNode(ctx, victim.Name)).To(Succeed())
	p, out = runScript(ctx, t, ns, scriptPod("reader-after-wipe", "", "disk", "cat /data/marker 2>/dev/null || echo no marker"))
	g.Expect(p.Spec.NodeName).To(Equal(victim.Name))
	g.Expect(out).To(Equal("no marker"))
}

// expectWebBack waits for the web Pod to run again on its node, in a new
// sandbox, and to answer at its (possibly new) address.
func expectWebBack(ctx context.Context, t *testing.T, ns string, before *corev1.Pod, node string) {
	t.Helper()
	g := NewWithT(t)
	var addr string
	g.Expect(framework.WaitFor(ctx, 3*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		p, err := env.Clientset.CoreV1().Pods(ns).Get(ctx, before.Name, metav1.GetOptions{})
		if err != nil || !framework.PodReady(p) || p.Status.PodIP == "" {
			return false, err
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.RestartCount == 0 {
				return false, nil
			}
		}
		addr = fmt.Sprintf("%s:%d", p.Status.PodIP, webPort)
		return true, nil
	})).To(Succeed(), "the web Pod restarts when its node is back")
	g.Expect(framework.WaitFor(ctx, time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		got, err := httpGet(ctx, addr)
		return got == node, err
	})).To(Succeed())
}

// dnsOnlyOutside reports whether every ready endpoint of the DNS Service is
// on another node than the lost one.
func dnsOnlyOutside(ctx context.Context, lost string) (bool, error) {
	slices, err := env.Clientset.DiscoveryV1().EndpointSlices("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=kube-dns"})
	if err != nil {
		return false, err
	}
	ready := 0
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || !*e.Conditions.Ready {
				continue
			}
			if e.NodeName != nil && *e.NodeName == lost {
				return false, nil
			}
			ready++
		}
	}
	return ready > 0, nil
}

// hostHTTP reaches Pod addresses from the host directly, never through a
// proxy from the environment.
var hostHTTP = &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 5 * time.Second}

// httpGet fetches / from addr and returns the body, trimmed.
func httpGet(ctx context.Context, addr string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		return "", err
	}
	resp, err := hostHTTP.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return strings.TrimSpace(string(body)), err
}

// dialWeb opens (and closes) one TCP connection to addr.
func dialWeb(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err == nil {
		conn.Close()
	}
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
