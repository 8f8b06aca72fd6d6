package pod

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

func TestDefaultQuota(t *testing.T) {
	tests := []struct {
		size string
		want int64
	}{
		// (268435456 - 128000000) / 3: the minimum size still leaves the
		// database ~45 MiB beside the WAL.
		{"256Mi", 46811818},
		{"1Gi", 315247274},
		{"8Gi", 2820644864},
		// Below the WAL's reserve, which only a member created before the
		// minimum existed can have: a third of the whole.
		{"64Mi", 22369621},
	}
	for _, tc := range tests {
		t.Run(tc.size, func(t *testing.T) {
			if got := defaultQuota(resource.MustParse(tc.size)); got != tc.want {
				t.Errorf("defaultQuota(%s) = %d, want %d", tc.size, got, tc.want)
			}
		})
	}
}

func TestQuotaBackendBytes(t *testing.T) {
	size := resource.MustParse("256Mi")
	tests := []struct {
		name string
		t    v1alpha1.MemberTemplate
		want int64
	}{
		{"the default follows the volume", v1alpha1.MemberTemplate{}, 315247274},
		{"a grown volume, a larger quota", v1alpha1.MemberTemplate{Storage: v1alpha1.StorageSpec{Size: &size}}, 46811818},
		{"set", v1alpha1.MemberTemplate{Options: &v1alpha1.EtcdOptions{QuotaBackendBytes: ptr.To[int64](8 << 30)}}, 8 << 30},
		{"zero is etcd's own default", v1alpha1.MemberTemplate{Options: &v1alpha1.EtcdOptions{QuotaBackendBytes: ptr.To[int64](0)}}, 2 << 30},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := QuotaBackendBytes(tc.t); got != tc.want {
				t.Errorf("QuotaBackendBytes = %d, want %d", got, tc.want)
			}
		})
	}
}
