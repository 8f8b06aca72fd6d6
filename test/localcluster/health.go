package localcluster

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig is the admin client configuration of the running cluster.
func (l Layout) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", l.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("failed to load %s: %w", l.Kubeconfig(), err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// poll calls check until it reports done, the context ends or timeout passes.
func poll(ctx context.Context, timeout, interval time.Duration, check func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error
	for {
		done, err := check(ctx)
		if done {
			return nil
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("%w (last error: %v)", ctx.Err(), lastErr)
			}
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// waitHealthy waits for the API server, applies the add-ons, then waits for
// every node, CoreDNS, the provisioner and the default StorageClass.
func (l Layout) waitHealthy(ctx context.Context, p *Progress, nodes []Node) error {
	cfg, err := l.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	p.Printf("waiting for kube-apiserver")
	err = poll(ctx, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", err
	})
	if err != nil {
		return l.componentFailure("kube-apiserver did not become ready: "+err.Error(), "kube-apiserver", "etcd")
	}
	p.Printf("applying CoreDNS and the storage provisioner")
	v, err := LoadVersions(l.RepoRoot)
	if err != nil {
		return err
	}
	values := addonValues{
		ClusterDomain:  ClusterDomain,
		DNSServiceIP:   DNSServiceIP,
		CoreDNSImage:   coreDNSRepo + ":" + v.CoreDNS,
		LocalPathImage: localPathRepo + ":" + v.LocalPathProvisioner,
		ToolsImage:     ToolsImage,
		StorageDir:     l.storageDir(),
	}
	// Right after start the API server may still be creating its bootstrap
	// RBAC and namespaces, so the first applies can be refused.
	err = poll(ctx, time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		err := applyAddons(ctx, cfg, values)
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("failed to apply the add-ons: %w", err)
	}
	p.Printf("waiting for %d node(s) to be Ready", len(nodes))
	for _, n := range nodes {
		err := poll(ctx, 2*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
			node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return nodeReady(node), nil
		})
		if err != nil {
			return l.componentFailure(fmt.Sprintf("node %s did not become Ready: %v", n.Name, err),
				componentName("kubelet", n), componentName("containerd", n))
		}
	}
	p.Printf("waiting for CoreDNS and the storage provisioner")
	for _, d := range []struct{ ns, name string }{{"kube-system", "coredns"}, {"local-path-storage", "local-path-provisioner"}} {
		err := poll(ctx, 3*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
			dep, err := cs.AppsV1().Deployments(d.ns).Get(ctx, d.name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return deploymentAvailable(dep), nil
		})
		if err != nil {
			diag := podDiagnostics(ctx, cs, d.ns)
			return l.componentFailure(fmt.Sprintf("%s/%s did not become available: %v\n%s", d.ns, d.name, err, diag),
				componentName("kubelet", nodes[0]), componentName("containerd", nodes[0]))
		}
	}
	err = poll(ctx, time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		scs, err := cs.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, sc := range scs.Items {
			if sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("no default StorageClass: %w", err)
	}
	if err := l.ensureS3(ctx, p, cfg, cs); err != nil {
		return err
	}
	p.Printf("local cluster is ready; export KUBECONFIG=%s", l.Kubeconfig())
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	if d.Status.ObservedGeneration < d.Generation {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			return d.Status.AvailableReplicas >= 1
		}
	}
	return false
}

// podDiagnostics describes the Pods of a namespace: phase, container states
// and recent events, enough to see why something did not start.
func podDiagnostics(ctx context.Context, cs kubernetes.Interface, ns string) string {
	var b strings.Builder
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "cannot list pods: " + err.Error()
	}
	for _, pod := range pods.Items {
		fmt.Fprintf(&b, "pod %s/%s phase=%s node=%s\n", ns, pod.Name, pod.Status.Phase, pod.Spec.NodeName)
		for _, c := range pod.Status.Conditions {
			fmt.Fprintf(&b, "  condition %s=%s %s %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
		for _, cs := range pod.Status.ContainerStatuses {
			fmt.Fprintf(&b, "  container %s ready=%t restarts=%d state=%+v\n", cs.Name, cs.Ready, cs.RestartCount, cs.State)
		}
	}
	events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range events.Items {
			fmt.Fprintf(&b, "event %s %s/%s: %s %s\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	return b.String()
}

// Status prints the state of every component and of the cluster's health
// markers, and returns an error when something is not healthy.
func (l Layout) Status(ctx context.Context, out io.Writer) error {
	pid := l.SupervisorPID()
	if pid == 0 {
		fmt.Fprintln(out, "local cluster: not running")
		if left := l.Leftovers(ctx); len(left) > 0 {
			fmt.Fprintf(out, "leftovers of an earlier run:\n  %s\n", strings.Join(left, "\n  "))
		}
		return fmt.Errorf("not running")
	}
	fmt.Fprintf(out, "local cluster: supervisor pid %d, kubeconfig %s\n", pid, l.Kubeconfig())
	states, err := l.ReadComponentStates()
	if err != nil {
		return fmt.Errorf("cannot read component states: %w", err)
	}
	unhealthy := 0
	for _, s := range states {
		status := "running"
		if !s.Running || !processAlive(s.PID) {
			status = "NOT RUNNING (" + s.LastExit + ")"
			unhealthy++
		}
		fmt.Fprintf(out, "  %-28s pid %-8d restarts %-3d %s\n", s.Name, s.PID, s.Restarts, status)
	}
	cfg, err := l.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("API server unreachable: %w", err)
	}
	for _, n := range nodes.Items {
		fmt.Fprintf(out, "  node %-10s ready=%t\n", n.Name, nodeReady(&n))
		if !nodeReady(&n) {
			unhealthy++
		}
	}
	for _, d := range []struct{ ns, name string }{{"kube-system", "coredns"}, {"local-path-storage", "local-path-provisioner"}} {
		dep, err := cs.AppsV1().Deployments(d.ns).Get(ctx, d.name, metav1.GetOptions{})
		ok := err == nil && deploymentAvailable(dep)
		fmt.Fprintf(out, "  %-38s available=%t\n", d.ns+"/"+d.name, ok)
		if !ok {
			unhealthy++
		}
	}
	if unhealthy > 0 {
		return fmt.Errorf("%d part(s) unhealthy", unhealthy)
	}
	return nil
}
