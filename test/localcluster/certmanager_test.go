package localcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func repoLayout(t *testing.T) Layout {
	t.Helper()
	root, err := FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLayout(root)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The tools module builds the version versions.env pins, and the cache name
// says which.
func TestCertManagerToolsModuleMatchesVersionsFile(t *testing.T) {
	l := repoLayout(t)
	v, err := LoadVersions(l.RepoRoot)
	if err != nil {
		t.Fatal(err)
	}
	required, err := requiredVersion(filepath.Join(l.RepoRoot, certManagerToolsDir, "go.mod"), certManagerModule)
	if err != nil {
		t.Fatal(err)
	}
	if required != v.CertManager {
		t.Fatalf("%s/go.mod requires %s %s, %s pins %s", certManagerToolsDir, certManagerModule, required, VersionsFile, v.CertManager)
	}
	b, err := certManagerBuild(l.RepoRoot, v.CertManager)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.name, "cert-manager-"+v.CertManager+"-") || b.moduleDir != filepath.Join(l.RepoRoot, certManagerToolsDir) {
		t.Fatalf("build %s from %s", b.name, b.moduleDir)
	}
}

// A pin that the tools module does not build is refused before any build.
func TestCertManagerBuildRefusesAnotherPin(t *testing.T) {
	l := repoLayout(t)
	if _, err := certManagerBuild(l.RepoRoot, "v0.0.1"); err == nil {
		t.Fatal("a versions.env pin the tools module does not require was accepted")
	}
}

// The CRDs come from the module version the tools module requires, all four
// kinds the controllers serve among them, and nothing but CRDs.
func TestCertManagerCRDsFromTheModule(t *testing.T) {
	l := repoLayout(t)
	dir, err := l.CertManagerCRDDir(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	required, err := requiredVersion(filepath.Join(l.RepoRoot, certManagerToolsDir, "go.mod"), certManagerModule)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dir, "@"+required+string(filepath.Separator)) {
		t.Fatalf("CRDs read from %s, not from %s@%s", dir, certManagerModule, required)
	}
	crds, err := l.certManagerCRDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range crds {
		if c.GetKind() != "CustomResourceDefinition" {
			t.Errorf("%s %s among the CRDs", c.GetKind(), c.GetName())
		}
		names = append(names, c.GetName())
	}
	for _, want := range []string{"certificates.cert-manager.io", "certificaterequests.cert-manager.io", "issuers.cert-manager.io", "clusterissuers.cert-manager.io"} {
		if !slices.Contains(names, want) {
			t.Errorf("no CRD %s in %v", want, names)
		}
	}
}

func TestCertManagerAddonRenders(t *testing.T) {
	values := certManagerValues{Namespace: CertManagerNamespace, Image: certManagerImageRepo + ":v1", HealthPort: certManagerHealthPort, AvoidNode: NodeAt(0).Name}
	objs, err := renderManifest("addons/cert-manager.yaml", values)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var dep *unstructured.Unstructured
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+"/"+o.GetName())
		if o.GetKind() == "Deployment" {
			dep = o
		}
	}
	want := "Namespace/cert-manager ServiceAccount/cert-manager ClusterRole/localcluster:cert-manager ClusterRoleBinding/localcluster:cert-manager Deployment/cert-manager"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("objects %s, want %s", got, want)
	}
	if dep.GetName() != certManagerDeployment || dep.GetNamespace() != CertManagerNamespace {
		t.Fatalf("the Deployment is %s/%s; certManagerProblems looks for %s/%s", dep.GetNamespace(), dep.GetName(), CertManagerNamespace, certManagerDeployment)
	}
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("%d containers", len(containers))
	}
	c := containers[0].(map[string]any)
	if c["image"] != values.Image {
		t.Errorf("image %v, want %s", c["image"], values.Image)
	}
	// The probe asks the port the controller is told to serve /readyz on.
	if args := fmt.Sprint(c["args"]); !strings.Contains(args, fmt.Sprintf("--health-addr=:%d", certManagerHealthPort)) {
		t.Errorf("args %s do not serve /readyz on %d", args, certManagerHealthPort)
	}
	path, _, _ := unstructured.NestedString(c, "readinessProbe", "httpGet", "path")
	port, _, _ := unstructured.NestedFieldNoCopy(c, "readinessProbe", "httpGet", "port")
	ports, _, _ := unstructured.NestedSlice(c, "ports")
	if path != "/readyz" || len(ports) != 1 || ports[0].(map[string]any)["name"] != port ||
		fmt.Sprint(ports[0].(map[string]any)["containerPort"]) != fmt.Sprint(certManagerHealthPort) {
		t.Errorf("readiness probe %s on %v, ports %v", path, port, ports)
	}
	terms, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "affinity", "nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
	if len(terms) != 1 || !strings.Contains(fmt.Sprint(terms[0]), NodeAt(0).Name) {
		t.Errorf("the controller does not prefer a node other than %s: %v", NodeAt(0).Name, terms)
	}
}

func TestCRDEstablished(t *testing.T) {
	crd := func(conds ...map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		list := make([]any, len(conds))
		for i, c := range conds {
			list[i] = c
		}
		_ = unstructured.SetNestedSlice(u.Object, list, "status", "conditions")
		return u
	}
	for _, tc := range []struct {
		name string
		crd  *unstructured.Unstructured
		want bool
	}{
		{"no status", &unstructured.Unstructured{Object: map[string]any{}}, false},
		{"names accepted only", crd(map[string]any{"type": "NamesAccepted", "status": "True"}), false},
		{"establishing", crd(map[string]any{"type": "Established", "status": "False"}), false},
		{"established", crd(map[string]any{"type": "NamesAccepted", "status": "True"}, map[string]any{"type": "Established", "status": "True"}), true},
	} {
		if got := crdEstablished(tc.crd); got != tc.want {
			t.Errorf("%s: established=%t, want %t", tc.name, got, tc.want)
		}
	}
}
