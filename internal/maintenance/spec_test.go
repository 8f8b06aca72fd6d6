package maintenance

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

func TestPolicyOf(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	p, err := PolicyOf(v1alpha1.MaintenanceSpec{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Rule).To(Equal(DefaultRule()), "the API's defaults are the rule's")
	g.Expect(p.Defrag).To(BeTrue())
	g.Expect(p.NoSpaceRecovery).To(BeTrue())
	g.Expect(p.Window).To(BeNil())

	minReclaim := resource.MustParse("1Mi")
	p, err = PolicyOf(v1alpha1.MaintenanceSpec{
		Defrag: v1alpha1.DefragSpec{FreePercent: ptr.To[int32](40), MinReclaim: &minReclaim, QuotaPercent: ptr.To[int32](90),
			Schedule: "@daily", Window: &metav1.Duration{Duration: 2 * time.Hour}},
		NoSpaceRecovery: v1alpha1.NoSpaceRecoverySpec{Enabled: ptr.To(false)},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Rule).To(Equal(Rule{FreePercent: 40, MinReclaim: 1 << 20, QuotaPercent: 90}))
	g.Expect(p.Window.String()).To(Equal(`within 2h0m0s of each tick of "@daily"`))
	g.Expect(p.NoSpaceRecovery).To(BeFalse())

	p, err = PolicyOf(v1alpha1.MaintenanceSpec{Defrag: v1alpha1.DefragSpec{Schedule: "61 * * * *"}})
	g.Expect(err).To(HaveOccurred())
	g.Expect(p.Defrag).To(BeFalse(), "a schedule that does not parse stops routine defragmentation")
	g.Expect(p.NoSpaceRecovery).To(BeTrue(), "never NOSPACE recovery")
}
