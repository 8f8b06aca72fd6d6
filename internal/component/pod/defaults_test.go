package pod

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
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
