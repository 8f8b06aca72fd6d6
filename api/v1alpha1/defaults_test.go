package v1alpha1_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// The default etcd version is written in three places that must agree: the
// versions file the local cluster builds images from, the Go constant, and
// the CRD default marker.
func TestDefaultVersionMatchesVersionsFile(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join("..", "..", "versions.env"))
	g.Expect(err).NotTo(HaveOccurred())
	m := regexp.MustCompile(`(?m)^ETCD_DEFAULT_VERSION=(\S+)$`).FindSubmatch(data)
	g.Expect(m).NotTo(BeNil())
	g.Expect(string(m[1])).To(Equal(v1alpha1.DefaultEtcdVersion))
	src, err := os.ReadFile("common_types.go")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(src)).To(ContainSubstring(`+kubebuilder:default="` + v1alpha1.DefaultEtcdVersion + `"`))
}

// The minimum storage size is a Go value for the operator's arithmetic and a
// literal in the CEL rule; they must not drift apart.
func TestMinimumStorageSizeMatchesCELRule(t *testing.T) {
	g := NewWithT(t)
	src, err := os.ReadFile("common_types.go")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(src)).To(ContainSubstring(`compareTo(quantity('` + v1alpha1.MinimumStorageSize.String() + `')) >= 0`))
	g.Expect(string(src)).To(ContainSubstring(`message="storage.size must be at least ` + v1alpha1.MinimumStorageSize.String() + `:`))
}

// Each of the four inputs alone turns the seed's "new" into "existing".
func TestInitialClusterState(t *testing.T) {
	cases := []struct {
		name          string
		bootstrap     bool
		memberID      string
		clusterFormed bool
		booted        bool
		want          string
	}{
		{"seed before the cluster forms", true, "", false, false, "new"},
		{"seed after the cluster formed", true, "", true, false, "existing"},
		{"seed with its ID latched", true, "8e9e05c52164694d", false, false, "existing"},
		{"seed that has been seen ready", true, "", false, true, "existing"},
		{"seed, formed, latched and booted", true, "8e9e05c52164694d", true, true, "existing"},
		{"joiner before the cluster forms", false, "", false, false, "existing"},
		{"joiner after", false, "", true, false, "existing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &v1alpha1.EtcdMember{}
			m.Spec.Bootstrap = tc.bootstrap
			m.Status.MemberID = tc.memberID
			if tc.booted {
				m.Status.FirstReadyTime = &metav1.Time{Time: time.Unix(1_700_000_000, 0)}
			}
			NewWithT(t).Expect(v1alpha1.InitialClusterState(m, tc.clusterFormed)).To(Equal(tc.want))
		})
	}
}

// The defragmentation rule's defaults are Go constants for the operator and
// literals in the default markers; they must not drift apart.
func TestDefragDefaultsMatchMarkers(t *testing.T) {
	g := NewWithT(t)
	src, err := os.ReadFile("maintenance_types.go")
	g.Expect(err).NotTo(HaveOccurred())
	for _, marker := range []string{
		fmt.Sprintf("+kubebuilder:default=%d\n\t// +kubebuilder:validation:XValidation:rule=\"self >= 1 && self <= 100\",message=\"maintenance.defrag.freePercent", v1alpha1.DefaultDefragFreePercent),
		fmt.Sprintf("+kubebuilder:default=%d\n\t// +kubebuilder:validation:XValidation:rule=\"self >= 1 && self <= 100\",message=\"maintenance.defrag.quotaPercent", v1alpha1.DefaultDefragQuotaPercent),
		`+kubebuilder:default="` + v1alpha1.DefaultDefragMinReclaim.String() + `"`,
	} {
		g.Expect(string(src)).To(ContainSubstring(marker))
	}
}

// TestReservedPrefixCoversTheOperatorsKeys: the rules on additionalMetadata
// repeat the prefix literally; every label the operator sets is under it.
func TestReservedPrefixCoversTheOperatorsKeys(t *testing.T) {
	g := NewWithT(t)
	for _, k := range []string{v1alpha1.ClusterLabel, v1alpha1.MemberLabel, v1alpha1.RoleLabel, v1alpha1.ScheduleLabel,
		v1alpha1.SnapshotLabel, v1alpha1.PreUpgradeLabel, v1alpha1.JobKindLabel, v1alpha1.IssueClientCertificateAnnotation,
		v1alpha1.RotateCAAnnotation, v1alpha1.KeepOldCAAnnotation, v1alpha1.ReleasePlaintextAnnotation} {
		g.Expect(k).To(HavePrefix(v1alpha1.ReservedPrefix))
	}
}
