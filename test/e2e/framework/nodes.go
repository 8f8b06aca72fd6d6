package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/test/localcluster"
)

// Nodes are the local cluster's nodes. A cluster with fewer than minimum
// fails the test: make test-e2e brings up three, and a test about several
// nodes proves nothing on one.
func (e *Env) Nodes(t testing.TB, minimum int) []localcluster.Node {
	t.Helper()
	nodes, err := e.Layout.RunningNodes()
	if err != nil {
		t.Fatalf("cannot read the local cluster's nodes: %v", err)
	}
	if len(nodes) < minimum {
		t.Fatalf("the local cluster has %d node(s), this test needs %d (bring it up with --nodes %d)", len(nodes), minimum, minimum)
	}
	return nodes
}

// LocalCluster runs the local cluster tool, as a developer would, and
// returns its combined output.
func (e *Env) LocalCluster(ctx context.Context, args ...string) (string, error) {
	tool := filepath.Join(e.RepoRoot, "bin", "localcluster")
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Dir = e.RepoRoot
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("localcluster %s: %w: %s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// NodeReady reports the Node's Ready condition.
func (e *Env) NodeReady(ctx context.Context, name string) (bool, error) {
	n, err := e.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}

// WaitForNodeReady waits until the Node's Ready condition is ready.
func (e *Env) WaitForNodeReady(ctx context.Context, name string, ready bool, timeout time.Duration) error {
	err := WaitFor(ctx, timeout, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		got, err := e.NodeReady(ctx, name)
		return err == nil && got == ready, err
	})
	if err != nil {
		return fmt.Errorf("node %s did not become Ready=%t: %w", name, ready, err)
	}
	return nil
}

// StopNode stops a node (a hard loss, see localcluster.Layout.StopNode) and
// makes sure the test starts it again when it ends, whatever happens. Only a
// Serial test may: every other test has members on that node.
func (e *Env) StopNode(ctx context.Context, t testing.TB, name string) error {
	t.Helper()
	Serial(t)
	e.StartNodeAtCleanup(t, name)
	return e.Layout.StopNode(ctx, name)
}

// StartNodeAtCleanup starts the node when the test ends, should the test
// have left it stopped; starting a running node does nothing.
func (e *Env) StartNodeAtCleanup(t testing.TB, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := e.StartNode(ctx, name); err != nil {
			t.Errorf("failed to start node %s again after the test: %v", name, err)
		}
	})
}

// StartNode starts a stopped node and waits until it is Ready.
func (e *Env) StartNode(ctx context.Context, name string) error {
	if err := e.Layout.StartNode(ctx, name); err != nil {
		return err
	}
	return e.WaitForNodeReady(ctx, name, true, 2*time.Minute)
}

// PodsOn lists the Pods of a namespace that are bound to a node.
func (e *Env) PodsOn(ctx context.Context, ns, node string) ([]corev1.Pod, error) {
	pods, err := e.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// OperatorReplicas is the operator Deployment's replica count.
func (e *Env) OperatorReplicas(ctx context.Context) (int, error) {
	deps, err := e.Clientset.AppsV1().Deployments(OperatorNamespace()).List(ctx, metav1.ListOptions{LabelSelector: OperatorSelector})
	if err != nil {
		return 0, err
	}
	if len(deps.Items) != 1 || deps.Items[0].Spec.Replicas == nil {
		return 0, fmt.Errorf("want one operator Deployment in %s, found %d", OperatorNamespace(), len(deps.Items))
	}
	return int(*deps.Items[0].Spec.Replicas), nil
}

// NodeVolumes lists the volume directories on a node's disk.
func (e *Env) NodeVolumes(n localcluster.Node) ([]string, error) {
	entries, err := os.ReadDir(e.Layout.NodeStorageDir(n))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
	}
	return names, nil
}

// Drain runs kubectl drain on a node, as an administrator would, and
// uncordons it when the test ends, whatever happened. It first waits for the
// node's Pods that no controller owns to finish: the local-path
// provisioner's one-shot helper Pods, which drain refuses to evict without
// --force, and which a test that deleted volumes moments before may leave.
func (e *Env) Drain(ctx context.Context, t testing.TB, node string) KubectlResult {
	t.Helper()
	Serial(t)
	t.Cleanup(func() {
		if r := e.Kubectl(context.Background(), "uncordon", node); r.Err != nil {
			t.Errorf("failed to uncordon %s after the test: %v", node, r.Err)
		}
	})
	if err := WaitFor(ctx, 2*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		pods, err := e.Clientset.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			done := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
			if metav1.GetControllerOf(&p) == nil && p.Annotations[corev1.MirrorPodAnnotationKey] == "" && !done {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Logf("Pods without a controller are still on %s; drain may refuse them: %v", node, err)
	}
	return e.Kubectl(ctx, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=5m")
}
