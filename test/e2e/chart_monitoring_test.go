//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// TestChartMonitoringObjects checks the chart's optional ServiceMonitor,
// PodMonitor and PrometheusRule against the Prometheus Operator's real CRD
// schemas (server-side dry run, strict field validation), and that the two
// monitors select what they are meant to: the operator's metrics Service and
// its port, and every member Pod of a cluster and its metrics port. There is
// no Prometheus Operator here to act on them; this is what keeps them from
// drifting from the objects they describe.
func TestChartMonitoringObjects(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())

	crds := filepath.Join(env.RepoRoot, ".cache", "monitoring-crds", env.Versions.PrometheusOperatorAPIs)
	_, err = os.Stat(filepath.Join(crds, ".complete"))
	g.Expect(err).NotTo(HaveOccurred(), "the Prometheus Operator's CRDs are not generated (make monitoring-crds)")
	apply := env.Kubectl(ctx, "apply", "--server-side", "--field-manager=e2e", "-f", crds)
	g.Expect(apply.Err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if del := env.Kubectl(context.Background(), "delete", "-f", crds, "--ignore-not-found"); del.Err != nil {
			t.Errorf("failed to remove the monitoring CRDs: %v", del.Err)
		}
	})
	for _, kind := range []string{"servicemonitors", "podmonitors", "prometheusrules"} {
		// Polled, not kubectl wait: that fails at once on a CRD whose
		// status has no conditions yet, moments after it is created.
		crd := "crd/" + kind + ".monitoring.coreos.com"
		g.Expect(framework.WaitFor(ctx, time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
			r := env.Kubectl(ctx, "get", crd, "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
			return r.Err == nil && strings.TrimSpace(r.Stdout) == "True", nil
		})).To(Succeed(), "%s is established", crd)
	}

	ns := env.CreateNamespace(t, "monitors")
	const name = "watched"
	g.Expect(c.Create(ctx, &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.EtcdClusterSpec{
			Replicas:       ptr.To[int32](1),
			MemberTemplate: v1alpha1.MemberTemplate{Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("256Mi"))}},
		},
	})).To(Succeed())

	rendered := renderChart(ctx, t,
		"--set", "monitoring.serviceMonitor.enabled=true,monitoring.podMonitor.enabled=true",
		"--set", "monitoring.prometheusRule.enabled=true,monitoring.grafanaDashboard.enabled=true")
	monitors := map[string]*unstructured.Unstructured{}
	var monitoring bytes.Buffer
	for _, obj := range rendered {
		switch obj.GetKind() {
		case "ServiceMonitor", "PodMonitor", "PrometheusRule":
			monitors[obj.GetKind()] = obj
			data, err := obj.MarshalJSON()
			g.Expect(err).NotTo(HaveOccurred())
			monitoring.Write(data)
			monitoring.WriteString("\n")
		}
	}
	g.Expect(monitors).To(HaveLen(3), "the chart renders a ServiceMonitor, a PodMonitor and a PrometheusRule")

	t.Log("the API server accepts them against the real schemas, unknown fields refused")
	file := filepath.Join(t.TempDir(), "monitoring.json")
	g.Expect(os.WriteFile(file, monitoring.Bytes(), 0o600)).To(Succeed())
	dry := env.Kubectl(ctx, "apply", "--server-side", "--dry-run=server", "--validate=strict", "--field-manager=e2e", "-f", file)
	g.Expect(dry.Err).NotTo(HaveOccurred())

	t.Log("the ServiceMonitor selects the operator's metrics Service, by a port it has")
	sm := monitors["ServiceMonitor"]
	var services corev1.ServiceList
	g.Expect(c.List(ctx, &services, client.InNamespace(framework.OperatorNamespace()),
		client.MatchingLabelsSelector{Selector: labelSelector(t, sm, "spec", "selector")})).To(Succeed())
	g.Expect(services.Items).To(HaveLen(1))
	smPort := firstEndpointPort(t, sm, "endpoints")
	g.Expect(servicePortNames(&services.Items[0])).To(ContainElement(smPort))

	t.Log("the PodMonitor selects every member Pod of the cluster, by a port it has")
	_, err = framework.WaitForClusterReady(ctx, c, ns, name, 5*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	pm := monitors["PodMonitor"]
	var pods corev1.PodList
	g.Expect(c.List(ctx, &pods, client.InNamespace(ns),
		client.MatchingLabelsSelector{Selector: labelSelector(t, pm, "spec", "selector")})).To(Succeed())
	members, err := env.MemberPods(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods.Items).To(HaveLen(len(members)))
	pmPort := firstEndpointPort(t, pm, "podMetricsEndpoints")
	for _, p := range pods.Items {
		g.Expect(containerPortNames(&p)).To(ContainElement(pmPort), "Pod %s", p.Name)
	}
}

// renderChart runs the pinned Helm's template on the chart with the given
// extra arguments, as make test-e2e's release, and decodes every object.
func renderChart(ctx context.Context, t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	return renderChartAs(ctx, t, "etcd-operator", framework.OperatorNamespace(), args...)
}

// renderChartAs renders the chart as release in namespace.
func renderChartAs(ctx context.Context, t *testing.T, release, namespace string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	helm := append([]string{"tool", "-modfile=" + filepath.Join(env.RepoRoot, "hack", "tools", "helm", "go.mod"), "helm",
		"template", release, filepath.Join(env.RepoRoot, "charts", "etcd-operator"),
		"--namespace", namespace}, args...)
	cmd := exec.CommandContext(ctx, "go", helm...)
	cmd.Dir = env.RepoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("decoding the rendered chart: %v", err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

func labelSelector(t *testing.T, obj *unstructured.Unstructured, path ...string) labels.Selector {
	t.Helper()
	raw, found, err := unstructured.NestedMap(obj.Object, path...)
	if err != nil || !found {
		t.Fatalf("%s has no %v: %v", obj.GetKind(), path, err)
	}
	var sel metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &sel); err != nil {
		t.Fatalf("%s: bad selector: %v", obj.GetKind(), err)
	}
	s, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil {
		t.Fatalf("%s: bad selector: %v", obj.GetKind(), err)
	}
	return s
}

func firstEndpointPort(t *testing.T, obj *unstructured.Unstructured, field string) string {
	t.Helper()
	endpoints, _, _ := unstructured.NestedSlice(obj.Object, "spec", field)
	if len(endpoints) == 0 {
		t.Fatalf("%s has no spec.%s", obj.GetKind(), field)
	}
	ep, _ := endpoints[0].(map[string]any)
	port, _ := ep["port"].(string)
	if port == "" {
		t.Fatalf("%s: spec.%s[0] names no port", obj.GetKind(), field)
	}
	return port
}

func servicePortNames(s *corev1.Service) []string {
	var out []string
	for _, p := range s.Spec.Ports {
		out = append(out, p.Name)
	}
	return out
}

func containerPortNames(p *corev1.Pod) []string {
	var out []string
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			out = append(out, port.Name)
		}
	}
	return out
}
