package localcluster

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestSecondStorageClassRenders: the second class is a StorageClass of the
// local-path provisioner under the name tests use, and not the default.
func TestSecondStorageClassRenders(t *testing.T) {
	objs, err := renderManifest("addons/local-path-second.yaml", addonValues{SecondStorageClass: SecondStorageClass})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Fatalf("%d objects, want 1", len(objs))
	}
	sc := objs[0]
	if sc.GetKind() != "StorageClass" || sc.GetName() != SecondStorageClass {
		t.Fatalf("got %s %s", sc.GetKind(), sc.GetName())
	}
	if p, _, _ := unstructured.NestedString(sc.Object, "provisioner"); p != "rancher.io/local-path" {
		t.Fatalf("provisioner %q", p)
	}
	if sc.GetAnnotations()["storageclass.kubernetes.io/is-default-class"] == "true" {
		t.Fatal("the second class must not be the default")
	}
}
