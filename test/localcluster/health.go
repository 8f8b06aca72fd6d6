package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
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
	pathMap, err := l.storagePathMap(nodes)
	if err != nil {
		return err
	}
	values := addonValues{
		ClusterDomain:  ClusterDomain,
		DNSServiceIP:   DNSServiceIP,
		CoreDNSImage:   coreDNSRepo + ":" + v.CoreDNS,
		LocalPathImage: localPathRepo + ":" + v.LocalPathProvisioner,
		ToolsImage:     ToolsImage,
		StoragePathMap: pathMap,
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
	var notReady []string
	err = poll(ctx, 2*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		notReady = nil
		for _, n := range nodes {
			node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil || !nodeReady(node) {
				notReady = append(notReady, n.Name)
			}
		}
		return len(notReady) == 0, nil
	})
	if err != nil {
		var logs []string
		for _, name := range notReady {
			logs = append(logs, "kubelet-"+name, "containerd-"+name)
		}
		return l.componentFailure(fmt.Sprintf("node(s) %s did not become Ready: %v", strings.Join(notReady, ", "), err), logs...)
	}
	p.Printf("waiting for CoreDNS and the storage provisioner")
	err = poll(ctx, 3*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		problems := addonProblems(ctx, cs, len(nodes))
		return len(problems) == 0, errors.New(strings.Join(problems, "; "))
	})
	if err != nil {
		diag := podDiagnostics(ctx, cs, "kube-system") + podDiagnostics(ctx, cs, "local-path-storage")
		var logs []string
		for _, n := range nodes {
			logs = append(logs, componentName("kubelet", n))
		}
		return l.componentFailure(fmt.Sprintf("the add-ons did not become available: %v\n%s", err, diag), logs...)
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
	p.Printf("waiting for the NetworkPolicy enforcer")
	err = poll(ctx, 2*time.Minute, 500*time.Millisecond, func(context.Context) (bool, error) {
		_, err := networkPolicyQueueState()
		return err == nil, err
	})
	if err != nil {
		return l.componentFailure("the NetworkPolicy enforcer did not start: "+err.Error(), networkPolicyProcessName)
	}
	// The S3 server and cert-manager each wait on a Pod of their own; side
	// by side, up waits for the slower of the two rather than for both.
	var s3Err, certManagerErr error
	var wg sync.WaitGroup
	wg.Go(func() { s3Err = l.ensureS3(ctx, p, cfg, cs) })
	wg.Go(func() { certManagerErr = l.ensureCertManager(ctx, p, cfg, cs, v) })
	wg.Wait()
	if err := errors.Join(s3Err, certManagerErr); err != nil {
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

// daemonSetReady reports a DaemonSet rolled out and ready on the given
// number of nodes.
func daemonSetReady(d *appsv1.DaemonSet, nodes int) bool {
	st := d.Status
	return st.ObservedGeneration >= d.Generation && int(st.DesiredNumberScheduled) == nodes &&
		st.NumberReady == st.DesiredNumberScheduled && st.UpdatedNumberScheduled == st.DesiredNumberScheduled
}

// addonProblems says what is not yet serving: CoreDNS on every node, the
// provisioner.
func addonProblems(ctx context.Context, cs kubernetes.Interface, nodes int) []string {
	var problems []string
	ds, err := cs.AppsV1().DaemonSets("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	switch {
	case err != nil:
		problems = append(problems, err.Error())
	case !daemonSetReady(ds, nodes):
		problems = append(problems, fmt.Sprintf("kube-system/coredns ready on %d of %d nodes", ds.Status.NumberReady, nodes))
	}
	dep, err := cs.AppsV1().Deployments("local-path-storage").Get(ctx, "local-path-provisioner", metav1.GetOptions{})
	switch {
	case err != nil:
		problems = append(problems, err.Error())
	case !deploymentAvailable(dep):
		problems = append(problems, "local-path-storage/local-path-provisioner is not available")
	}
	return problems
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
// markers, and returns an error when something is not healthy. A node that
// node stop took down is reported as stopped, and is unhealthy too.
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
	status, err := l.ReadSupervisorStatus()
	if err != nil {
		return fmt.Errorf("cannot read component states: %w", err)
	}
	nodes, err := l.RunningNodes()
	if err != nil {
		return err
	}
	var problems []string
	for _, s := range status.Components {
		state := "running"
		switch {
		case s.Held:
			state = "stopped by node stop"
		case !s.Running || !processAlive(s.PID):
			state = "NOT RUNNING (" + s.LastExit + ")"
			problems = append(problems, s.Name+" is not running")
		}
		fmt.Fprintf(out, "  %-28s pid %-8d restarts %-3d %s\n", s.Name, s.PID, s.Restarts, state)
	}
	for _, name := range status.StoppedNodes {
		problems = append(problems, "node "+name+" is stopped (localcluster node start "+name+")")
	}
	cfg, err := l.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("API server unreachable or node %s missing: %w", n.Name, err)
		}
		fmt.Fprintf(out, "  node %-8s %-8s ready=%t\n", n.Name, node.Labels[corev1.LabelTopologyZone], nodeReady(node))
		if !nodeReady(node) {
			problems = append(problems, "node "+n.Name+" is not Ready")
		}
	}
	addons := addonProblems(ctx, cs, len(nodes))
	fmt.Fprintf(out, "  add-ons (CoreDNS on every node, storage provisioner) available=%t\n", len(addons) == 0)
	problems = append(problems, addons...)
	certManager := certManagerProblems(ctx, cs)
	fmt.Fprintf(out, "  cert-manager ready=%t\n", len(certManager) == 0)
	problems = append(problems, certManager...)
	if q, err := networkPolicyQueueState(); err != nil {
		fmt.Fprintf(out, "  NetworkPolicy enforcer enforcing=false (%v)\n", err)
		problems = append(problems, err.Error())
	} else {
		fmt.Fprintf(out, "  NetworkPolicy enforcer enforcing=true (NFQUEUE %d: %d waiting, %d dropped by the kernel, %d by the socket)\n",
			q.Number, q.Waiting, q.KernelDropped, q.UserDropped)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problem(s): %s", len(problems), strings.Join(problems, "; "))
	}
	return nil
}
