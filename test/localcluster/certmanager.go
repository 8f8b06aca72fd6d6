package localcluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CertManager is cert-manager for the local cluster: a controller built from
// cert-manager's own packages by the small main in hack/tools/cert-manager
// (its released cmd/controller is a module the proxy cannot serve), the
// CRDs of the same module version, and a Deployment. It is an add-on the
// e2e suite installs when a test needs it, not part of cluster-up.
const (
	certManagerModule    = "github.com/cert-manager/cert-manager"
	certManagerToolsDir  = "hack/tools/cert-manager"
	certManagerBinary    = "cert-manager-controller"
	certManagerImageRepo = "localhost/localcluster/cert-manager"
	certManagerNamespace = "cert-manager"
	// CertManagerVersionKey pins it in versions.env.
	CertManagerVersionKey = "CERT_MANAGER_VERSION"
)

// certManagerValues fill in addons/cert-manager.yaml.
type certManagerValues struct {
	Image string
	// AvoidNode is where the controller does not run when it has a choice.
	AvoidNode string
}

// CertManagerVersion is the pinned cert-manager version.
func (l Layout) CertManagerVersion() (string, error) {
	values, err := readEnvFile(filepath.Join(l.RepoRoot, VersionsFile))
	if err != nil {
		return "", err
	}
	v := values[CertManagerVersionKey]
	if v == "" {
		return "", fmt.Errorf("%s lacks %s", VersionsFile, CertManagerVersionKey)
	}
	return v, nil
}

// CertManagerBinary returns the directory holding the controller, building
// it once per version and tools-module content into the binary cache.
func (l Layout) CertManagerBinary(ctx context.Context, p *Progress) (string, error) {
	version, err := l.CertManagerVersion()
	if err != nil {
		return "", err
	}
	src := filepath.Join(l.RepoRoot, certManagerToolsDir)
	key, err := dirKey(src, "go.mod", "go.sum", "main.go")
	if err != nil {
		return "", err
	}
	dir := l.binCacheDir("cert-manager-" + version + "-" + key)
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return dir, nil
	}
	p.Printf("building the cert-manager %s controller (cached afterwards in %s)", version, dir)
	began := time.Now()
	stop := p.heartbeat("building cert-manager", 30*time.Second)
	defer stop()
	tmp := dir + ".partial"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	if err := runToolsGo(ctx, src, "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(tmp, certManagerBinary), "."); err != nil {
		return "", fmt.Errorf("failed to build cert-manager: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return "", err
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	p.Printf("built cert-manager in %s", time.Since(began).Round(time.Second))
	return dir, nil
}

// InstallCertManager builds the controller, imports its image into every
// node, applies cert-manager's CRDs and the Deployment, and waits until it
// is available. It is idempotent.
func (l Layout) InstallCertManager(ctx context.Context, p *Progress, cfg *rest.Config) error {
	version, err := l.CertManagerVersion()
	if err != nil {
		return err
	}
	bin, err := l.CertManagerBinary(ctx, p)
	if err != nil {
		return err
	}
	image := certManagerImageRepo + ":" + version
	if _, err := l.ImportImage(ctx, StaticBinaryImageSpec(image, filepath.Join(bin, certManagerBinary), "/"+certManagerBinary)); err != nil {
		return fmt.Errorf("failed to import the cert-manager image: %w", err)
	}
	crds, err := l.certManagerCRDs(ctx)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("failed to create a client: %w", err)
	}
	objs, err := renderManifest("addons/cert-manager.yaml", certManagerValues{Image: image, AvoidNode: NodeAt(0).Name})
	if err != nil {
		return err
	}
	for _, obj := range append(crds, objs...) {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("localcluster"), client.ForceOwnership); err != nil {
			return fmt.Errorf("failed to apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	p.Printf("waiting for cert-manager")
	return poll(ctx, 3*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		dep, err := cs.AppsV1().Deployments(certManagerNamespace).Get(ctx, "cert-manager", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return dep.Status.ObservedGeneration >= dep.Generation && dep.Status.AvailableReplicas >= 1, nil
	})
}

// CertManagerCRDDir is deploy/crds of the module version the tools module
// requires, in the module cache.
func (l Layout) CertManagerCRDDir(ctx context.Context) (string, error) {
	src := filepath.Join(l.RepoRoot, certManagerToolsDir)
	if err := runToolsGo(ctx, src, "mod", "download", certManagerModule); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-json", certManagerModule)
	cmd.Dir, cmd.Env = src, toolsGoEnv()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("failed to locate %s: %w", certManagerModule, err)
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
	var objs []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		decoded, err := DecodeManifests(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, o := range decoded {
			if o.GetKind() == "CustomResourceDefinition" {
				objs = append(objs, o)
			}
		}
	}
	return objs, nil
}

// runToolsGo runs the go command in a pinned tools module as it is: its
// go.sum decides every version, nothing is resolved anew.
func runToolsGo(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = dir, toolsGoEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, tail(out.String(), 40))
	}
	return nil
}

func toolsGoEnv() []string {
	return append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=readonly")
}

// dirKey hashes the named files of a directory, so a changed main or a
// bumped dependency builds anew.
func dirKey(dir string, names ...string) (string, error) {
	h := sha256.New()
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", n, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}
