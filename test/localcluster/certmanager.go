package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cert-manager in the local cluster, so the operator's cert-manager
// certificate sources meet the real thing: its controllers built from its own
// packages by the small main in hack/tools/cert-manager (the released
// cmd/controller is a module the proxy cannot serve), run as a Deployment,
// with the CRDs of the same module version. cluster-up installs it; it lives
// only in the cluster's API and its Pods, so cluster-down's sweep of the
// nodes' processes and cgroups removes it with everything else.
const (
	certManagerModule    = "github.com/cert-manager/cert-manager"
	certManagerToolsDir  = "hack/tools/cert-manager"
	certManagerBinary    = "cert-manager-controller"
	certManagerImageRepo = "localhost/localcluster/cert-manager"
	// CertManagerNamespace holds the controller, and the Secrets that
	// ClusterIssuers read.
	CertManagerNamespace  = "cert-manager"
	certManagerDeployment = "cert-manager"
	certManagerHealthPort = 9403
	// CertManagerVersionKey pins cert-manager in versions.env.
	CertManagerVersionKey = "CERT_MANAGER_VERSION"
)

// certManagerValues fill in addons/cert-manager.yaml.
type certManagerValues struct {
	Namespace string
	Image     string
	// HealthPort serves /readyz, ready once the informer caches synced.
	HealthPort int
	// AvoidNode is where the controller does not run when it has a choice.
	AvoidNode string
}

func certManagerImage(v Versions) string { return certManagerImageRepo + ":" + v.CertManager }

// certManagerBuild builds the repository's cert-manager tools module as it is.
// The cache name carries the pinned version and a hash of the module, and the
// module must require exactly the pinned version: a bump of one without the
// other fails here, before minutes of building the wrong thing.
func certManagerBuild(repoRoot, version string) (goBuild, error) {
	dir := filepath.Join(repoRoot, certManagerToolsDir)
	required, err := requiredVersion(filepath.Join(dir, "go.mod"), certManagerModule)
	if err != nil {
		return goBuild{}, err
	}
	if required != version {
		return goBuild{}, fmt.Errorf("%s/go.mod requires %s %s but %s pins %s=%s; bump both together",
			certManagerToolsDir, certManagerModule, required, VersionsFile, CertManagerVersionKey, version)
	}
	key, err := moduleKey(dir)
	if err != nil {
		return goBuild{}, err
	}
	return goBuild{
		name:      "cert-manager-" + version + "-" + key,
		moduleDir: dir,
		binaries:  map[string]string{certManagerBinary: "."},
	}, nil
}

// requiredVersion is the version of module that the go.mod at path requires.
func requiredVersion(path, module string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		return "", err
	}
	for _, r := range f.Require {
		if r.Mod.Path == module {
			return r.Mod.Version, nil
		}
	}
	return "", fmt.Errorf("%s does not require %s", path, module)
}

// CertManagerBinary returns the directory holding the cert-manager
// controller, building it once into the binary cache.
func (l Layout) CertManagerBinary(ctx context.Context, p *Progress) (string, error) {
	v, err := LoadVersions(l.RepoRoot)
	if err != nil {
		return "", err
	}
	b, err := certManagerBuild(l.RepoRoot, v.CertManager)
	if err != nil {
		return "", err
	}
	return l.ensureBuilt(ctx, p, b)
}

// certManagerImageSpec is the controller's image, built with the others.
func certManagerImageSpec(v Versions, bins Binaries) ImageSpec {
	return StaticBinaryImageSpec(certManagerImage(v), filepath.Join(bins.CertManager, certManagerBinary), "/"+certManagerBinary)
}

// CertManagerCRDDir is deploy/crds of the module version the tools module
// requires, in the module cache (downloaded if need be).
func (l Layout) CertManagerCRDDir(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", certManagerModule)
	cmd.Dir, cmd.Env = filepath.Join(l.RepoRoot, certManagerToolsDir), pinnedGoEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("failed to download %s: %w: %s", certManagerModule, err, stderr.String())
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("failed to locate %s in the module cache: %v", certManagerModule, err)
	}
	return filepath.Join(mod.Dir, "deploy", "crds"), nil
}

// certManagerCRDs reads the CRDs of CertManagerCRDDir.
func (l Layout) certManagerCRDs(ctx context.Context) ([]*unstructured.Unstructured, error) {
	dir, err := l.CertManagerCRDDir(ctx)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", dir)
	}
	sort.Strings(files)
	var crds []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		objs, err := DecodeManifests(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		crds = append(crds, onlyCRDs(objs)...)
	}
	return crds, nil
}

func onlyCRDs(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var crds []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		}
	}
	return crds
}

// InstallCertManager applies cert-manager's CRDs and controller to the
// running cluster and waits until it is ready. cluster-up already does; this
// is for callers that must be sure, and it changes nothing on a cluster that
// has it. The controller's image comes with cluster-up's images.
func (l Layout) InstallCertManager(ctx context.Context, p *Progress, cfg *rest.Config) error {
	v, err := LoadVersions(l.RepoRoot)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return l.ensureCertManager(ctx, p, cfg, cs, v)
}

// ensureCertManager applies the CRDs, waits for the API server to serve
// them, applies the controller and waits for its readiness, which needs
// every informer cache synced: from then on Certificates are issued.
func (l Layout) ensureCertManager(ctx context.Context, p *Progress, cfg *rest.Config, cs kubernetes.Interface, v Versions) error {
	p.Printf("applying cert-manager %s", v.CertManager)
	crds, err := l.certManagerCRDs(ctx)
	if err != nil {
		return err
	}
	objs, err := renderManifest("addons/cert-manager.yaml", certManagerValues{
		Namespace: CertManagerNamespace, Image: certManagerImage(v),
		HealthPort: certManagerHealthPort, AvoidNode: NodeAt(0).Name,
	})
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("failed to create a client: %w", err)
	}
	if err := applyAll(ctx, c, crds, "cert-manager's CRDs"); err != nil {
		return err
	}
	// Informers of a CRD not yet established fail their lists and retry
	// with backoff; waiting here keeps that delay out of cluster-up.
	if err := waitEstablished(ctx, c, crds); err != nil {
		return fmt.Errorf("cert-manager's CRDs: %w", err)
	}
	if err := applyAll(ctx, c, objs, "addons/cert-manager.yaml"); err != nil {
		return err
	}
	err = poll(ctx, 3*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		problems := certManagerProblems(ctx, cs)
		return len(problems) == 0, errors.New(strings.Join(problems, "; "))
	})
	if err != nil {
		return fmt.Errorf("cert-manager did not become ready: %w\n%s%s", err,
			podDiagnostics(ctx, cs, CertManagerNamespace), podLogTails(ctx, cs, CertManagerNamespace, 40))
	}
	p.Printf("cert-manager %s ready", v.CertManager)
	return nil
}

func applyAll(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, from string) error {
	for _, obj := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("localcluster"), client.ForceOwnership); err != nil {
			return fmt.Errorf("failed to apply %s %s from %s: %w", obj.GetKind(), obj.GetName(), from, err)
		}
	}
	return nil
}

// waitEstablished waits until the API server serves every one of the CRDs.
func waitEstablished(ctx context.Context, c client.Client, crds []*unstructured.Unstructured) error {
	return poll(ctx, time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		for _, crd := range crds {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
			if err := c.Get(ctx, client.ObjectKey{Name: crd.GetName()}, live); err != nil {
				return false, err
			}
			if !crdEstablished(live) {
				return false, fmt.Errorf("%s is not established", crd.GetName())
			}
		}
		return true, nil
	})
}

func crdEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// certManagerProblems says why cert-manager is not serving, if it is not.
func certManagerProblems(ctx context.Context, cs kubernetes.Interface) []string {
	dep, err := cs.AppsV1().Deployments(CertManagerNamespace).Get(ctx, certManagerDeployment, metav1.GetOptions{})
	switch {
	case err != nil:
		return []string{err.Error()}
	case !deploymentAvailable(dep):
		return []string{CertManagerNamespace + "/" + certManagerDeployment + " is not available"}
	}
	return nil
}

// podLogTails are the last lines of each container of a namespace's Pods.
func podLogTails(ctx context.Context, cs kubernetes.Interface, ns string, lines int64) string {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, pod := range pods.Items {
		for _, c := range pod.Spec.Containers {
			raw, err := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: &lines}).DoRaw(ctx)
			if err != nil {
				continue
			}
			fmt.Fprintf(&b, "--- last lines of %s/%s %s ---\n%s\n", ns, pod.Name, c.Name, raw)
		}
	}
	return b.String()
}
