// Command demo takes a fresh clone to a healthy 3-member etcd cluster: it uses
// the current kubeconfig's cluster if one answers and otherwise brings up the
// local cluster, builds and loads the operator image, installs the chart,
// creates the sample EtcdCluster, waits for it to be Available, and prints how
// to connect and how to tear everything down. Every step reuses what is
// already there, so a second run changes nothing. make demo runs it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/localcluster"
)

const (
	demoNamespace     = "etcd-demo"
	operatorNamespace = "etcd-operator-system"
	sampleFile        = "config/samples/etcdcluster.yaml"
)

func main() {
	image := flag.String("image", "localhost/quorumctl/etcd-operator:dev", "operator image to build and install")
	tool := flag.String("localcluster", "bin/localcluster", "the local cluster tool")
	nodes := flag.Int("nodes", 1, "nodes of the local cluster, if the demo brings one up")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *image, *tool, *nodes); err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo failed: %v\n", err)
		os.Exit(1)
	}
}

type demo struct {
	root       string
	layout     localcluster.Layout
	p          *localcluster.Progress
	kubeconfig string
	local      bool
	image      string
}

func run(ctx context.Context, image, tool string, nodes int) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := localcluster.FindRepoRoot(wd)
	if err != nil {
		return err
	}
	layout, err := localcluster.NewLayout(root)
	if err != nil {
		return err
	}
	d := &demo{root: root, layout: layout, p: localcluster.NewProgress(os.Stdout), image: image}
	if err := d.cluster(ctx, tool, nodes); err != nil {
		return err
	}
	if err := d.operator(ctx); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", d.kubeconfig)
	if err != nil {
		return err
	}
	c, err := newClient(cfg)
	if err != nil {
		return err
	}
	name, err := d.sample(ctx, c)
	if err != nil {
		return err
	}
	if err := d.waitAvailable(ctx, c, name); err != nil {
		return err
	}
	return d.summary(ctx, c, name)
}

// cluster picks the current kubeconfig's cluster when it answers, and the
// local cluster otherwise, bringing that up if needed.
func (d *demo) cluster(ctx context.Context, tool string, nodes int) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig(); err == nil && answers(ctx, cfg) {
		d.kubeconfig = firstKubeconfig(rules)
		d.local = cfg.Host == localcluster.APIServerURL()
		d.p.Printf("using the cluster of the current kubeconfig (%s)", cfg.Host)
		return nil
	}
	d.p.Printf("no cluster answers for the current kubeconfig; bringing up the local cluster (%d node(s))", nodes)
	if err := d.stream(ctx, nil, filepath.Join(d.root, tool), "up", "--nodes", strconv.Itoa(nodes)); err != nil {
		return fmt.Errorf("the local cluster did not come up: %w", err)
	}
	d.kubeconfig, d.local = d.layout.Kubeconfig(), true
	return nil
}

func answers(ctx context.Context, cfg *rest.Config) bool {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 5 * time.Second
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return false
	}
	req, err := rest.RESTClientForConfigAndClient(withDefaults(cfg), c)
	if err != nil {
		return false
	}
	body, err := req.Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil && string(body) == "ok"
}

func withDefaults(cfg *rest.Config) *rest.Config {
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	return cfg
}

func firstKubeconfig(rules *clientcmd.ClientConfigLoadingRules) string {
	if p := rules.GetExplicitFile(); p != "" {
		return p
	}
	for _, p := range rules.GetLoadingPrecedence() {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// operator builds and loads the image (local cluster only: nothing else
// can receive an image without a registry) and installs the chart, unless
// the release is already deployed with that image.
func (d *demo) operator(ctx context.Context) error {
	env := []string{"KUBECONFIG=" + d.kubeconfig, "IMG=" + d.image}
	if d.local {
		d.p.Printf("building and loading the operator image %s", d.image)
		if err := d.stream(ctx, env, "make", "--no-print-directory", "image"); err != nil {
			return err
		}
	} else {
		d.p.Printf("not the local cluster: %s must be pullable by it (set IMG)", d.image)
	}
	if d.deployed(ctx) {
		d.p.Printf("the operator chart is already installed with %s", d.image)
		return nil
	}
	d.p.Printf("installing the operator chart into %s (helm waits for the operator to be ready)", operatorNamespace)
	if err := d.stream(ctx, env, "make", "--no-print-directory", "deploy"); err != nil {
		// helm only says it timed out; the operator's own Pods say why.
		_ = d.stream(ctx, env, d.kubectl(), "get", "pods", "-n", operatorNamespace, "-o", "wide")
		_ = d.stream(ctx, env, d.kubectl(), "logs", "-n", operatorNamespace, "-l", "app.kubernetes.io/name=etcd-operator", "--tail=40", "--all-containers")
		return fmt.Errorf("failed to install the operator chart: %w", err)
	}
	return nil
}

func (d *demo) deployed(ctx context.Context) bool {
	cmd := exec.CommandContext(ctx, "go", "tool", "-modfile=hack/tools/helm/go.mod", "helm",
		"get", "values", "etcd-operator", "-n", operatorNamespace, "-o", "json")
	cmd.Dir = d.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.kubeconfig)
	out, err := cmd.Output()
	if err != nil {
		return false
	}
	var values struct {
		Image struct{ Repository, Tag string } `json:"image"`
	}
	if json.Unmarshal(out, &values) != nil {
		return false
	}
	return values.Image.Repository+":"+values.Image.Tag == d.image
}

// sample server-side applies the sample EtcdCluster into the demo namespace.
func (d *demo) sample(ctx context.Context, c client.Client) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNamespace}}
	if err := c.Get(ctx, client.ObjectKeyFromObject(ns), ns); err != nil {
		ns.Labels = map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}
		if err := c.Create(ctx, ns); err != nil {
			return "", fmt.Errorf("failed to create namespace %s: %w", demoNamespace, err)
		}
	}
	data, err := os.ReadFile(filepath.Join(d.root, sampleFile))
	if err != nil {
		return "", err
	}
	cluster := &v1alpha1.EtcdCluster{}
	if err := yaml.UnmarshalStrict(data, cluster); err != nil {
		return "", fmt.Errorf("failed to read %s: %w", sampleFile, err)
	}
	existing := &v1alpha1.EtcdCluster{}
	if c.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: cluster.Name}, existing) == nil {
		d.p.Printf("EtcdCluster %s/%s already exists", demoNamespace, cluster.Name)
		return cluster.Name, nil
	}
	cluster.Namespace = demoNamespace
	d.p.Printf("creating EtcdCluster %s/%s from %s", demoNamespace, cluster.Name, sampleFile)
	if err := c.Create(ctx, cluster); err != nil {
		return "", fmt.Errorf("failed to create the sample EtcdCluster: %w", err)
	}
	return cluster.Name, nil
}

func (d *demo) waitAvailable(ctx context.Context, c client.Client, name string) error {
	deadline := time.Now().Add(5 * time.Minute)
	last := ""
	for {
		cl := &v1alpha1.EtcdCluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: name}, cl); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ReadyCondition)
		if meta.IsStatusConditionTrue(cl.Status.Conditions, v1alpha1.AvailableCondition) && ready != nil && ready.Status == metav1.ConditionTrue {
			d.p.Printf("EtcdCluster %s is Available with %d ready members", name, cl.Status.ReadyMembers)
			return nil
		}
		line := fmt.Sprintf("waiting for %s: %d of %d members ready", name, cl.Status.ReadyMembers, cl.DesiredReplicas())
		if ready != nil {
			line += fmt.Sprintf(" (%s: %s)", ready.Reason, ready.Message)
		}
		if line != last {
			d.p.Printf("%s", line)
			last = line
		}
		if time.Now().After(deadline) {
			d.printLogs(ctx, name)
			return errors.New("the EtcdCluster did not become Available within 5 minutes")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// printLogs shows what a person would look at first when the demo fails.
func (d *demo) printLogs(ctx context.Context, name string) {
	env := []string{"KUBECONFIG=" + d.kubeconfig}
	_ = d.stream(ctx, env, d.kubectl(), "describe", "etcdcluster", "-n", demoNamespace, name)
	_ = d.stream(ctx, env, d.kubectl(), "logs", "-n", operatorNamespace, "-l", "app.kubernetes.io/name=etcd-operator", "--tail=40")
}

func (d *demo) summary(ctx context.Context, c client.Client, name string) error {
	env := []string{"KUBECONFIG=" + d.kubeconfig}
	fmt.Println()
	if err := d.stream(ctx, env, d.kubectl(), "get", "etcdmembers", "-n", demoNamespace, "-l", v1alpha1.ClusterLabel+"="+name); err != nil {
		return err
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: v1alpha1.ClientServiceName(name)}, svc); err != nil {
		return err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(demoNamespace), client.MatchingLabels{v1alpha1.ClusterLabel: name}); err != nil || len(pods.Items) == 0 {
		return fmt.Errorf("no member Pods found: %v", err)
	}
	fmt.Printf(`
Connect with etcdctl:
  export KUBECONFIG=%[1]s
  %[5]s exec -n %[2]s %[3]s -c etcd -- etcdctl --endpoints=http://%[4]s:2379 member list -w table
`, d.kubeconfig, demoNamespace, pods.Items[0].Name, v1alpha1.ClientServiceName(name), d.kubectl())
	if d.local {
		fmt.Printf("  %s/etcdctl --endpoints=http://%s:2379 endpoint status -w table   # from this machine\n",
			d.layout.BinDir(), svc.Spec.ClusterIP)
	}
	fmt.Printf(`
Tear everything down:
  %[3]s delete etcdcluster -n %[1]s %[2]s && %[3]s delete namespace %[1]s
  make undeploy
`, demoNamespace, name, d.kubectl())
	if d.local {
		fmt.Println("  make cluster-down")
	}
	return nil
}

func (d *demo) kubectl() string {
	if d.local {
		return filepath.Join(d.layout.BinDir(), "kubectl")
	}
	return "kubectl"
}

// stream runs a command with its output shown as it happens.
func (d *demo) stream(ctx context.Context, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = d.root
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %v: %w", name, args, err)
	}
	return nil
}

func newClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}
