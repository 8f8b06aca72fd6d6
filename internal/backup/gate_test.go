package backup

import (
	"errors"
	"testing"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

func TestRestoreNeeded(t *testing.T) {
	cases := []struct {
		state   string
		dataDir bool
		want    bool
	}{
		{v1alpha1.InitialClusterStateNew, false, true},
		// The restore finished (and moved the data dir into place) before
		// the container restarted: never restore over it.
		{v1alpha1.InitialClusterStateNew, true, false},
		// The cluster exists: its seed booted, or its ID is latched.
		{v1alpha1.InitialClusterStateExisting, false, false},
		{v1alpha1.InitialClusterStateExisting, true, false},
		// No value at all is not "new".
		{"", false, false},
	}
	for _, tc := range cases {
		if got := RestoreNeeded(tc.state, tc.dataDir); got != tc.want {
			t.Errorf("RestoreNeeded(%q, dataDir=%v) = %v, want %v", tc.state, tc.dataDir, got, tc.want)
		}
	}
}

func TestCheckRestoreVersion(t *testing.T) {
	cases := []struct {
		snapshot, cluster string
		refused           bool
	}{
		{"3.6.16", "3.6.16", false},
		{"3.6.16", "3.6.1", false},
		{"3.5.35", "3.6.16", false},
		{"3.7.3", "3.6.16", true},
		{"4.0.0", "3.9.9", true},
	}
	for _, tc := range cases {
		err := CheckRestoreVersion(tc.snapshot, tc.cluster)
		var refusal *VersionRefusal
		if got := errors.As(err, &refusal); got != tc.refused {
			t.Errorf("CheckRestoreVersion(%s into %s) = %v, refused %v", tc.snapshot, tc.cluster, err, tc.refused)
		}
	}
	if err := CheckRestoreVersion("3.7", "3.6.16"); !errors.Is(err, ErrMetadataInvalid) {
		t.Errorf("an unparsable snapshot version gave %v, want ErrMetadataInvalid", err)
	}
}
