package owner_test

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/internal/component/owner"
)

func TestCheck(t *testing.T) {
	g := NewWithT(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	var notOwned *owner.NotOwnedError
	g.Expect(errors.As(owner.Check("Pod", pod, "a"), &notOwned)).To(BeTrue(), "no controller")
	g.Expect(notOwned.Error()).To(ContainSubstring("without a controller"))

	pod.OwnerReferences = []metav1.OwnerReference{{Kind: "EtcdMember", Name: "m", UID: "b", Controller: ptr.To(true)}}
	g.Expect(errors.As(owner.Check("Pod", pod, "a"), &notOwned)).To(BeTrue(), "another controller")
	g.Expect(notOwned.Controller.UID).To(BeEquivalentTo("b"))
	g.Expect(owner.Check("Pod", pod, "b")).To(Succeed())
}
