package owner_test

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

func TestCreateConflict(t *testing.T) {
	g := NewWithT(t)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "demo-client", Namespace: "ns"}}
	exists := apierrors.NewAlreadyExists(schema.GroupResource{Resource: "services"}, "demo-client")
	err := owner.CreateConflict("Service", svc, "uid-1", exists)
	var notOwned *owner.NotOwnedError
	g.Expect(errors.As(err, &notOwned)).To(BeTrue())
	g.Expect(notOwned.Unlabelled).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("Service ns/demo-client already exists and is not the operator's"))
	other := errors.New("boom")
	g.Expect(owner.CreateConflict("Service", svc, "uid-1", other)).To(BeIdenticalTo(other))
}
