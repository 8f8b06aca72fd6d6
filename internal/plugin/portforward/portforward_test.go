package portforward

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func reviewing(allowed bool) *fake.Clientset {
	c := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-a", Namespace: "ns"}})
	c.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: allowed}}, nil
	})
	return c
}

func TestAllowed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(Allowed(ctx, reviewing(true), "ns", "demo-a")).To(Succeed())
	g.Expect(apierrors.IsForbidden(Allowed(ctx, reviewing(false), "ns", "demo-a"))).To(BeTrue(),
		"a denied review is a Forbidden API error, so the plugin can name the missing rule")
}

func TestLastLine(t *testing.T) {
	g := NewWithT(t)
	l := &lastLine{}
	g.Expect(l.err()).NotTo(HaveOccurred())
	_, _ = l.Write([]byte("E1129 an error occurred forwarding 2379 -> 2379: connection refused\n"))
	_, _ = l.Write([]byte("\n"))
	g.Expect(l.err()).To(MatchError(ContainSubstring("connection refused")))
}
