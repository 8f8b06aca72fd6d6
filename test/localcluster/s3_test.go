package localcluster

import (
	"strings"
	"testing"
)

func TestS3ManifestRenders(t *testing.T) {
	objs, err := renderManifest("addons/s3.yaml", s3Values{
		Namespace: S3Namespace, Image: versityGWRepo + ":v1.8.0", Port: S3Port,
		AccessKeyID: S3AccessKeyID, SecretAccessKey: S3SecretAccessKey, AvoidNode: NodeAt(0).Name,
	})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+"/"+o.GetName())
		if o.GetKind() != "Namespace" && o.GetNamespace() != S3Namespace {
			t.Errorf("%s/%s is in namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
	want := "Namespace/localcluster-s3 Secret/s3-credentials PersistentVolumeClaim/s3-data Deployment/s3 Service/s3"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("objects %s, want %s", got, want)
	}
	if S3Endpoint() != "http://s3.localcluster-s3.svc:7070" {
		t.Fatalf("endpoint %s", S3Endpoint())
	}
}

func TestVersityGWIsPinned(t *testing.T) {
	root, err := FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLayout(root)
	if err != nil {
		t.Fatal(err)
	}
	v, err := l.versityGWVersion()
	if err != nil || !strings.HasPrefix(v, "v") {
		t.Fatalf("VERSITYGW_VERSION = %q, %v", v, err)
	}
}
