// Package framework holds what the e2e tests share: the clients of the local
// cluster, kubectl, and helpers that wait for conditions instead of sleeping.
package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/quorumctl/etcd-operator/test/localcluster"
)

// Env is the cluster under test.
type Env struct {
	RepoRoot    string
	Kubeconfig  string
	KubectlPath string
	Config      *rest.Config
	Clientset   kubernetes.Interface
	Versions    localcluster.Versions
	Layout      localcluster.Layout
	// kubectlCache is this run's own discovery cache: kubectl's shared one
	// (~/.kube/cache) outlives clusters at the same address and would serve
	// resource names and categories of CRDs as an earlier run installed them.
	kubectlCache string
}

// Close removes what Setup made on the host.
func (e *Env) Close() {
	if e.kubectlCache != "" {
		_ = os.RemoveAll(e.kubectlCache)
	}
}

// Setup connects to the local cluster. A missing cluster is a failure, never
// a skip: in CI the e2e tests must run.
func Setup() (*Env, error) {
	// The suite and the benches report through their own output; without a
	// logger controller-runtime prints a warning with a stack trace instead.
	ctrllog.SetLogger(logr.Discard())
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	root, err := localcluster.FindRepoRoot(wd)
	if err != nil {
		return nil, err
	}
	layout, err := localcluster.NewLayout(root)
	if err != nil {
		return nil, err
	}
	versions, err := localcluster.LoadVersions(root)
	if err != nil {
		return nil, err
	}
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		kubeconfig = layout.Kubeconfig()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("no cluster to test against (run make cluster-up): %w", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return nil, fmt.Errorf("the cluster in %s does not answer (run make cluster-up): %w", kubeconfig, err)
	}
	kubectl := filepath.Join(layout.BinDir(), "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		return nil, fmt.Errorf("kubectl of the local cluster is missing: %w", err)
	}
	cache, err := os.MkdirTemp("", "e2e-kubectl-cache-")
	if err != nil {
		return nil, err
	}
	return &Env{
		RepoRoot: root, Kubeconfig: kubeconfig, KubectlPath: kubectl, Config: cfg,
		Clientset: cs, Versions: versions, Layout: layout, kubectlCache: cache,
	}, nil
}

// KubectlResult is the outcome of one kubectl run.
type KubectlResult struct {
	Stdout, Stderr string
	Err            error
}

// Kubectl runs kubectl against the cluster under test.
func (e *Env) Kubectl(ctx context.Context, args ...string) KubectlResult {
	if e.kubectlCache != "" {
		args = append([]string{"--cache-dir=" + e.kubectlCache}, args...)
	}
	cmd := exec.CommandContext(ctx, e.KubectlPath, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return KubectlResult{Stdout: stdout.String(), Stderr: stderr.String(), Err: err}
}

// CreateNamespace makes a namespace for one test, labelled for the restricted
// Pod Security level, and deletes it when the test ends.
func (e *Env) CreateNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: prefix + "-",
		Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted",
			"pod-security.kubernetes.io/warn":    "restricted",
		},
	}}
	created, err := e.Clientset.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("failed to create a namespace: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			e.DumpNamespace(t, created.Name)
		}
		_ = e.Clientset.CoreV1().Namespaces().Delete(context.Background(), created.Name, metav1.DeleteOptions{})
	})
	return created.Name
}

// Final marks an error of a WaitFor condition as the end of the wait: what
// it reports cannot turn into what is waited for (a Pod that failed will not
// succeed), so waiting on would only turn a reason into a timeout. Any other
// error of a condition is taken as transient and retried.
func Final(err error) error { return finalError{err} }

type finalError struct{ err error }

func (f finalError) Error() string { return f.err.Error() }
func (f finalError) Unwrap() error { return f.err }

// WaitFor polls cond every interval until it returns true or timeout passes,
// or until cond returns an error made by Final.
func WaitFor(ctx context.Context, timeout, interval time.Duration, cond func(context.Context) (bool, error)) error {
	var last error
	var final finalError
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if errors.As(err, &final) {
			return false, final.err
		}
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	if final.err != nil {
		return final.err
	}
	if err != nil && last != nil {
		return fmt.Errorf("%w (last error: %v)", err, last)
	}
	return err
}

// WaitForPodReady waits until the named Pod is Ready and returns it.
func (e *Env) WaitForPodReady(ctx context.Context, ns, name string, timeout time.Duration) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := WaitFor(ctx, timeout, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		p, err := e.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return PodReady(p), nil
	})
	return pod, err
}

// WaitForPodSucceeded waits until a run-to-completion Pod succeeds; it fails
// at once if the Pod fails.
func (e *Env) WaitForPodSucceeded(ctx context.Context, ns, name string, timeout time.Duration) error {
	return WaitFor(ctx, timeout, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		p, err := e.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == corev1.PodFailed {
			return false, Final(fmt.Errorf("pod %s/%s failed: %s", ns, name, e.Kubectl(ctx, "logs", "-n", ns, name, "--all-containers").Stdout))
		}
		return p.Status.Phase == corev1.PodSucceeded, nil
	})
}

// PodReady reports the Pod's Ready condition.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// RestrictedPodSecurity is a Pod security context that passes the restricted level.
func RestrictedPodSecurity() *corev1.PodSecurityContext {
	nonRoot := true
	uid := int64(65532)
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   &nonRoot,
		RunAsUser:      &uid,
		RunAsGroup:     &uid,
		FSGroup:        &uid,
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// RestrictedContainerSecurity is the container half of the restricted level.
func RestrictedContainerSecurity() *corev1.SecurityContext {
	no := false
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: &no,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}
