package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The tools module builds the version versions.env pins.
func TestCertManagerToolsModuleMatchesVersionsFile(t *testing.T) {
	root, err := FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	l := Layout{RepoRoot: root}
	want, err := l.CertManagerVersion()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, certManagerToolsDir, "go.mod")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == certManagerModule {
			if r.Mod.Version != want {
				t.Fatalf("%s requires %s %s, versions.env pins %s", path, certManagerModule, r.Mod.Version, want)
			}
			return
		}
	}
	t.Fatalf("%s does not require %s", path, certManagerModule)
}

func TestCertManagerAddonRenders(t *testing.T) {
	objs, err := renderManifest("addons/cert-manager.yaml", certManagerValues{Image: "localhost/localcluster/cert-manager:v1", AvoidNode: NodeAt(0).Name})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o.GetKind()] = true
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"} {
		if !kinds[k] {
			t.Errorf("no %s in the cert-manager add-on", k)
		}
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		terms, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "affinity", "nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
		if len(terms) != 1 || !strings.Contains(fmt.Sprint(terms[0]), NodeAt(0).Name) {
			t.Errorf("the controller does not prefer a node other than %s: %v", NodeAt(0).Name, terms)
		}
	}
}
