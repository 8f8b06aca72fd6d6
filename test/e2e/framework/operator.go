package framework

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// OperatorNamespace is where make test-e2e installs the operator's chart.
func OperatorNamespace() string {
	if ns := os.Getenv("E2E_OPERATOR_NAMESPACE"); ns != "" {
		return ns
	}
	return "etcd-operator-system"
}

// OperatorSelector selects the operator's Pods.
const OperatorSelector = "app.kubernetes.io/name=etcd-operator"

// Client returns a controller-runtime client that knows the operator's types.
func (e *Env) Client() (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	// The TLS tests make cert-manager Issuers and Certificates.
	if err := cmapi.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(e.Config, client.Options{Scheme: scheme})
}

// CheckOperatorRunning fails unless the operator's Deployment is available.
func (e *Env) CheckOperatorRunning(ctx context.Context) error {
	// An earlier serial test may have drained the operator's node or
	// restarted it moments ago; its Deployment brings a Pod back.
	err := WaitFor(ctx, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		pods, err := e.Clientset.CoreV1().Pods(OperatorNamespace()).List(ctx, metav1.ListOptions{LabelSelector: OperatorSelector})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if PodReady(&p) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("no ready operator Pod in %s (install it with make deploy): %w", OperatorNamespace(), err)
	}
	return nil
}

// WaitForClusterReady waits until the cluster's status describes its current
// generation and its current members, and Ready is True. Checking the
// generation matters: right after a spec edit, Ready can still be True for
// the previous spec.
func WaitForClusterReady(ctx context.Context, c client.Client, ns, name string, timeout time.Duration) (*v1alpha1.EtcdCluster, error) {
	var cluster *v1alpha1.EtcdCluster
	err := WaitFor(ctx, timeout, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		cl := &v1alpha1.EtcdCluster{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cl); err != nil {
			return false, err
		}
		cluster = cl
		cond := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ReadyCondition)
		if cl.Status.ObservedGeneration != cl.Generation || cond == nil ||
			cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != cl.Generation {
			return false, nil
		}
		if listed, err := statusListsLiveMembers(ctx, c, cl); err != nil || !listed {
			return false, err
		}
		return memberPodsReady(ctx, c, cl)
	})
	if err != nil && cluster != nil {
		return cluster, fmt.Errorf("%w; conditions: %s", err, describeConditions(cluster.Status.Conditions))
	}
	return cluster, err
}

// statusListsLiveMembers reports whether the status names exactly the
// EtcdMembers that exist and are not being deleted. The generation does not
// move when the operator replaces a member, so for a moment after a member is
// deleted the previous pass's status, Ready and all, still lists it; a test
// that waits for recovery must not mistake that for the recovered state.
// A paused cluster lists no running members and is not checked.
func statusListsLiveMembers(ctx context.Context, c client.Client, cl *v1alpha1.EtcdCluster) (bool, error) {
	if cl.Spec.Replicas != nil && *cl.Spec.Replicas == 0 {
		return true, nil
	}
	live, err := liveMembers(ctx, c, cl.Namespace, cl.Name)
	if err != nil {
		return false, err
	}
	if len(live) != len(cl.Status.Members) {
		return false, nil
	}
	for _, m := range cl.Status.Members {
		if !live[m.Name] {
			return false, nil
		}
	}
	return true, nil
}

// memberPodsReady reports whether every live member has a ready Pod that is
// not being deleted. A disruption that keeps the members (a drain evicts a
// Pod, the operator re-creates it) moves neither the generation nor the
// member list, so until the operator's next pass the status still says
// Ready from before it; the Pods, which the kubelet reports, do not lag so.
func memberPodsReady(ctx context.Context, c client.Client, cl *v1alpha1.EtcdCluster) (bool, error) {
	if cl.Spec.Replicas != nil && *cl.Spec.Replicas == 0 {
		return true, nil
	}
	live, err := liveMembers(ctx, c, cl.Namespace, cl.Name)
	if err != nil {
		return false, err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(cl.Namespace), client.MatchingLabels{v1alpha1.ClusterLabel: cl.Name}); err != nil {
		return false, err
	}
	ready := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				ready[p.Labels[v1alpha1.MemberLabel]] = true
			}
		}
	}
	for name := range live {
		if !ready[name] {
			return false, nil
		}
	}
	return true, nil
}

// liveMembers names the cluster's EtcdMembers that exist and are not being
// deleted.
func liveMembers(ctx context.Context, c client.Client, ns, cluster string) (map[string]bool, error) {
	var list v1alpha1.EtcdMemberList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ClusterLabel: cluster}); err != nil {
		return nil, err
	}
	live := map[string]bool{}
	for _, m := range list.Items {
		if m.DeletionTimestamp.IsZero() {
			live[m.Name] = true
		}
	}
	return live, nil
}

func describeConditions(conds []metav1.Condition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, fmt.Sprintf("%s=%s/%s(%s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ")
}

// MemberPods returns the cluster's member Pods by member name.
func (e *Env) MemberPods(ctx context.Context, ns, cluster string) (map[string]*corev1.Pod, error) {
	pods, err := e.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.ClusterLabel + "=" + cluster})
	if err != nil {
		return nil, err
	}
	out := map[string]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		out[p.Labels[v1alpha1.MemberLabel]] = p
	}
	return out, nil
}

// MemberEndpoints are the members' own client URLs by Pod address, sorted.
// Only Pods of EtcdMembers that exist and are not being deleted count: a
// replaced member's Pod is removed by the garbage collector after the member
// is gone, and until then it is a leftover, not a member to read from.
func (e *Env) MemberEndpoints(ctx context.Context, ns, cluster string) ([]string, error) {
	pods, err := e.MemberPods(ctx, ns, cluster)
	if err != nil {
		return nil, err
	}
	c, err := e.Client()
	if err != nil {
		return nil, err
	}
	live, err := liveMembers(ctx, c, ns, cluster)
	if err != nil {
		return nil, err
	}
	var eps []string
	for name, p := range pods {
		if !live[name] || p.DeletionTimestamp != nil {
			continue
		}
		if p.Status.PodIP == "" {
			return nil, fmt.Errorf("pod %s has no address", p.Name)
		}
		eps = append(eps, fmt.Sprintf("http://%s:%d", p.Status.PodIP, v1alpha1.ClientPort))
	}
	sort.Strings(eps)
	return eps, nil
}

// ClientServiceEndpoint is the client Service's ClusterIP URL.
func (e *Env) ClientServiceEndpoint(ctx context.Context, ns, cluster string) (string, error) {
	svc, err := e.Clientset.CoreV1().Services(ns).Get(ctx, v1alpha1.ClientServiceName(cluster), metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, v1alpha1.ClientPort), nil
}

// ScaleOperator sets the operator Deployment's replicas and waits until
// that many operator Pods are ready (or none remain). Only a Serial test may:
// without the operator every other test stalls.
func (e *Env) ScaleOperator(ctx context.Context, t testing.TB, replicas int) error {
	t.Helper()
	Serial(t)
	return e.ScaleOperatorTo(ctx, replicas)
}

// ScaleOperatorTo is ScaleOperator for a program that is not a test, such as
// the long chaos run, which owns the whole cluster; a test calls
// ScaleOperator, so that it is also held to running alone.
func (e *Env) ScaleOperatorTo(ctx context.Context, replicas int) error {
	r := e.Kubectl(ctx, "scale", "deployment", "-n", OperatorNamespace(), "-l", OperatorSelector, fmt.Sprintf("--replicas=%d", replicas))
	if r.Err != nil {
		return r.Err
	}
	return WaitFor(ctx, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		pods, err := e.Clientset.CoreV1().Pods(OperatorNamespace()).List(ctx, metav1.ListOptions{LabelSelector: OperatorSelector})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, p := range pods.Items {
			if PodReady(&p) && p.DeletionTimestamp.IsZero() {
				ready++
			}
		}
		if replicas == 0 {
			return len(pods.Items) == 0, nil
		}
		return ready == replicas, nil
	})
}

// SetOperatorEnv sets one environment variable of the operator Deployment,
// the way its chart passes settings, and waits for the rollout. Only a
// Serial test may: the setting and the restart reach every other test.
func (e *Env) SetOperatorEnv(ctx context.Context, t testing.TB, name, value string) error {
	t.Helper()
	Serial(t)
	deps, err := e.Clientset.AppsV1().Deployments(OperatorNamespace()).List(ctx, metav1.ListOptions{LabelSelector: OperatorSelector})
	if err != nil {
		return err
	}
	if len(deps.Items) != 1 {
		return fmt.Errorf("want one operator Deployment in %s, found %d", OperatorNamespace(), len(deps.Items))
	}
	dep := "deployment/" + deps.Items[0].Name
	if r := e.Kubectl(ctx, "set", "env", "-n", OperatorNamespace(), dep, name+"="+value); r.Err != nil {
		return r.Err
	}
	if r := e.Kubectl(ctx, "rollout", "status", "-n", OperatorNamespace(), dep, "--timeout=3m"); r.Err != nil {
		return r.Err
	}
	// The rollout is complete once the old ReplicaSet is scaled to zero, but
	// its Pods are then only being deleted: one that has not yet been sent
	// its SIGTERM still leads and reconciles with the old setting. Only once
	// every Pod left runs with the new setting is the operator that acts
	// on the test's next object one that has it.
	err = WaitFor(ctx, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		pods, err := e.Clientset.CoreV1().Pods(OperatorNamespace()).List(ctx, metav1.ListOptions{LabelSelector: OperatorSelector})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if !podHasEnv(&p, name, value) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("operator Pods without %s=%s remain after the rollout: %w", name, value, err)
	}
	return e.CheckOperatorRunning(ctx)
}

// podHasEnv: one of the Pod's containers sets the variable to the value.
func podHasEnv(p *corev1.Pod, name, value string) bool {
	for _, c := range p.Spec.Containers {
		for _, v := range c.Env {
			if v.Name == name && v.Value == value {
				return true
			}
		}
	}
	return false
}
