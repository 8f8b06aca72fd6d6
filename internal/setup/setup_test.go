package setup

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	etcdv1alpha1 "github.com/quorumctl/etcd-operator/api/v1alpha1"
)

func TestNewScheme(t *testing.T) {
	s := NewScheme()
	for _, gvk := range []schema.GroupVersionKind{
		corev1.SchemeGroupVersion.WithKind("Pod"),
		corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"),
		etcdv1alpha1.GroupVersion.WithKind("EtcdCluster"),
		etcdv1alpha1.GroupVersion.WithKind("EtcdClusterList"),
		etcdv1alpha1.GroupVersion.WithKind("EtcdMember"),
		etcdv1alpha1.GroupVersion.WithKind("EtcdMemberList"),
		etcdv1alpha1.GroupVersion.WithKind("EtcdRecovery"),
		etcdv1alpha1.GroupVersion.WithKind("EtcdRecoveryList"),
	} {
		if !s.Recognizes(gvk) {
			t.Errorf("the scheme does not know %s", gvk)
		}
	}
}

func TestControllerOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		opts    ControllerOptions
		wantErr bool
	}{
		{name: "defaults", opts: ControllerOptions{EtcdImageRepository: DefaultEtcdImageRepository, ClusterDomain: "cluster.local"}},
		{name: "domain left to detection", opts: ControllerOptions{EtcdImageRepository: DefaultEtcdImageRepository}},
		{name: "registry with port", opts: ControllerOptions{EtcdImageRepository: "registry.local:5000/etcd", ClusterDomain: "cluster.local."}},
		{name: "empty repository", opts: ControllerOptions{ClusterDomain: "cluster.local"}, wantErr: true},
		{name: "repository with tag", opts: ControllerOptions{EtcdImageRepository: "quay.io/coreos/etcd:v3.6.16"}, wantErr: true},
		{name: "registry port and tag", opts: ControllerOptions{EtcdImageRepository: "registry.local:5000/etcd:v3"}, wantErr: true},
		{name: "repository with digest", opts: ControllerOptions{EtcdImageRepository: "quay.io/coreos/etcd@sha256:abc"}, wantErr: true},
		{name: "bad domain", opts: ControllerOptions{EtcdImageRepository: DefaultEtcdImageRepository, ClusterDomain: "under_score.local"}, wantErr: true},
		{name: "empty label", opts: ControllerOptions{EtcdImageRepository: DefaultEtcdImageRepository, ClusterDomain: "a..b"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if (err != nil) != tt.wantErr {
				t.Errorf("Validate() error = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

func TestParseNamespaces(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{in: "", want: nil},
		{in: " , ,", want: nil},
		{in: "a", want: []string{"a"}},
		{in: "a,b", want: []string{"a", "b"}},
		{in: " a , b ,a,, c", want: []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		if got := ParseNamespaces(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("ParseNamespaces(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCacheOptions(t *testing.T) {
	if got := CacheOptions(nil); got.DefaultNamespaces != nil {
		t.Errorf("CacheOptions(nil).DefaultNamespaces = %v, want nil (all namespaces)", got.DefaultNamespaces)
	}
	got := CacheOptions([]string{"a", "b"})
	if len(got.DefaultNamespaces) != 2 {
		t.Fatalf("CacheOptions(a,b).DefaultNamespaces = %v, want two entries", got.DefaultNamespaces)
	}
	for _, ns := range []string{"a", "b"} {
		if _, ok := got.DefaultNamespaces[ns]; !ok {
			t.Errorf("namespace %q is not cached", ns)
		}
	}
}

func TestEnvOr(t *testing.T) {
	const key = "ETCD_OPERATOR_SETUP_TEST_VAR"
	t.Setenv(key, "")
	if got := EnvOr(key, "def"); got != "def" {
		t.Errorf("EnvOr(empty) = %q, want def", got)
	}
	t.Setenv(key, "set")
	if got := EnvOr(key, "def"); got != "set" {
		t.Errorf("EnvOr(set) = %q, want set", got)
	}
}
