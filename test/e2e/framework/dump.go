package framework

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// dumpMessageTail is how much of a termination message the dump keeps: etcd's
// fatal line is at the end, and whole stack traces would push the failure
// itself out of a CI log's visible tail.
const dumpMessageTail = 400

// DumpNamespace logs, for a failed test, what explains most failures in a
// few lines each: the clusters' and members' conditions, every container's
// state and last termination, and the namespace's objects and Events.
func (e *Env) DumpNamespace(t testing.TB, ns string) {
	t.Helper()
	var b strings.Builder
	e.DumpNamespaceTo(&b, ns)
	t.Log(b.String())
}

// DumpNamespaceTo writes what DumpNamespace logs, for a caller that is not a
// test, such as the chaos runner keeping the objects of a failed run.
func (e *Env) DumpNamespaceTo(w io.Writer, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	if c, err := e.Client(); err == nil {
		dumpEtcdObjects(ctx, c, ns, &b)
	}
	if pods, err := e.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range pods.Items {
			dumpPod(&pods.Items[i], &b)
		}
	}
	fmt.Fprintf(w, "namespace %s at the failure:\n%s", ns, b.String())
	args := []string{"get", "all,pvc,events", "-n", ns, "-o", "wide"}
	r := e.Kubectl(ctx, args...)
	fmt.Fprintf(w, "kubectl %s:\n%s%s", strings.Join(args, " "), r.Stdout, r.Stderr)
}

func dumpEtcdObjects(ctx context.Context, c client.Client, ns string, b *strings.Builder) {
	var clusters v1alpha1.EtcdClusterList
	if err := c.List(ctx, &clusters, client.InNamespace(ns)); err == nil {
		for _, cl := range clusters.Items {
			fmt.Fprintf(b, "EtcdCluster %s (generation %d, observed %d): %s\n", cl.Name, cl.Generation,
				cl.Status.ObservedGeneration, describeConditions(cl.Status.Conditions))
		}
	}
	var members v1alpha1.EtcdMemberList
	if err := c.List(ctx, &members, client.InNamespace(ns)); err == nil {
		for _, m := range members.Items {
			fmt.Fprintf(b, "EtcdMember %s (id %q, deleting %t): %s\n", m.Name, m.Status.MemberID,
				m.DeletionTimestamp != nil, describeConditions(m.Status.Conditions))
		}
	}
}

func dumpPod(p *corev1.Pod, b *strings.Builder) {
	fmt.Fprintf(b, "Pod %s: %s, ip %s, deleting %t\n", p.Name, p.Status.Phase, p.Status.PodIP, p.DeletionTimestamp != nil)
	for _, cs := range p.Status.ContainerStatuses {
		fmt.Fprintf(b, "  container %s: ready %t, restarts %d, %s\n", cs.Name, cs.Ready, cs.RestartCount, containerState(cs.State))
		if t := cs.LastTerminationState.Terminated; t != nil {
			msg := strings.ReplaceAll(t.Message, "\n", " ")
			if len(msg) > dumpMessageTail {
				msg = "…" + msg[len(msg)-dumpMessageTail:]
			}
			fmt.Fprintf(b, "    last terminated: %s, exit %d: %s\n", t.Reason, t.ExitCode, msg)
		}
	}
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running since " + s.Running.StartedAt.UTC().Format(time.RFC3339)
	case s.Waiting != nil:
		return "waiting: " + s.Waiting.Reason
	case s.Terminated != nil:
		return fmt.Sprintf("terminated: %s, exit %d", s.Terminated.Reason, s.Terminated.ExitCode)
	}
	return "unknown"
}
