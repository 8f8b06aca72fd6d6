package pod_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/owner"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
)

// writes counts every mutating call a client makes.
type writes struct{ creates, updates, patches, deletes, applies int }

func (w *writes) total() int { return w.creates + w.updates + w.patches + w.deletes + w.applies }

func newClient(w *writes, objs ...client.Object) client.Client {
	return interceptor.NewClient(fakeclient.NewClientBuilder().WithObjects(objs...).Build(), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.creates++
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.updates++
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			w.patches++
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.deletes++
			return c.Delete(ctx, obj, opts...)
		},
	})
}

func TestEnsure_CreatesMissingPod(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := &writes{}
	c := newClient(w)
	p := newParams(newMember())

	got, err := pod.Ensure(ctx, c, p)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.creates).To(Equal(1))
	g.Expect(got.Name).To(Equal(testMember))

	stored := &corev1.Pod{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(got), stored)).To(Succeed())
	g.Expect(stored.Spec.Containers[0].Args).To(Equal(pod.Build(p).Spec.Containers[0].Args))
	g.Expect(metav1.GetControllerOf(stored).UID).To(BeEquivalentTo("member-uid"))
}

func TestEnsure_NeverUpdatesAnExistingPod(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newMember()
	live := pod.Build(newParams(m))
	live.Spec.Containers[0].Image = "old/etcd:v3.5.0"
	w := &writes{}
	c := newClient(w, live)

	// The member has since moved on; the running Pod must not follow.
	m.Spec.Version = "3.6.16"
	m.Spec.Options = &v1alpha1.EtcdOptions{SnapshotCount: ptr.To[int64](1)}
	for range 3 {
		got, err := pod.Ensure(ctx, c, newParams(m))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Spec.Containers[0].Image).To(Equal("old/etcd:v3.5.0"))
	}
	g.Expect(w.total()).To(BeZero())
}

func TestEnsure_RefusesPodsItDoesNotControl(t *testing.T) {
	foreign := func(refs ...metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: testMember, Namespace: testNS, OwnerReferences: refs}}
	}
	tests := []struct {
		name           string
		live           *corev1.Pod
		wantController bool
	}{
		{name: "no owner", live: foreign()},
		{
			name: "a previous incarnation of the member",
			live: foreign(metav1.OwnerReference{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "EtcdMember", Name: testMember, UID: "old-uid", Controller: ptr.To(true),
			}),
			wantController: true,
		},
		{
			name: "owned but not controlled by the member",
			live: foreign(metav1.OwnerReference{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "EtcdMember", Name: testMember, UID: "member-uid",
			}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w := &writes{}
			c := newClient(w, tt.live)

			got, err := pod.Ensure(context.Background(), c, newParams(newMember()))
			g.Expect(got).To(BeNil())
			var notOwned *owner.NotOwnedError
			g.Expect(errors.As(err, &notOwned)).To(BeTrue(), "got %v", err)
			g.Expect(notOwned.Name).To(Equal(testMember))
			g.Expect(notOwned.OwnerUID).To(BeEquivalentTo("member-uid"))
			g.Expect(notOwned.Controller != nil).To(Equal(tt.wantController))
			g.Expect(w.total()).To(BeZero())
		})
	}
}

func TestEnsure_PendingMemberGetsNoPod(t *testing.T) {
	g := NewWithT(t)
	w := &writes{}
	c := newClient(w)
	m := newMember(func(m *v1alpha1.EtcdMember) { m.Spec.InitialCluster = "" })

	_, err := pod.Ensure(context.Background(), c, newParams(m))
	g.Expect(err).To(MatchError(pod.ErrMemberPending))
	g.Expect(w.total()).To(BeZero())
}

func TestSetRoleLabel(t *testing.T) {
	tests := []struct {
		name        string
		label       *string
		voter       bool
		wantLabel   *string
		wantPatches int
	}{
		{name: "voter gains the label", voter: true, wantLabel: ptr.To("voter"), wantPatches: 1},
		{name: "voter keeps the label", label: ptr.To("voter"), voter: true, wantLabel: ptr.To("voter")},
		{name: "voter with a wrong value is corrected", label: ptr.To("learner"), voter: true, wantLabel: ptr.To("voter"), wantPatches: 1},
		{name: "demoted member loses the label", label: ptr.To("voter"), wantPatches: 1},
		{name: "any value is removed from a non-voter", label: ptr.To(""), wantPatches: 1},
		{name: "non-voter without the label is left alone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			live := pod.Build(newParams(newMember()))
			live.Labels["team"] = "storage"
			if tt.label != nil {
				live.Labels[v1alpha1.RoleLabel] = *tt.label
			}
			w := &writes{}
			c := newClient(w, live)

			p := &corev1.Pod{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(live), p)).To(Succeed())
			g.Expect(pod.SetRoleLabel(ctx, c, p, tt.voter)).To(Succeed())
			g.Expect(w.patches).To(Equal(tt.wantPatches))
			g.Expect(w.total()).To(Equal(tt.wantPatches))

			stored := &corev1.Pod{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(live), stored)).To(Succeed())
			for _, got := range []*corev1.Pod{p, stored} {
				if tt.wantLabel == nil {
					g.Expect(got.Labels).NotTo(HaveKey(v1alpha1.RoleLabel))
				} else {
					g.Expect(got.Labels).To(HaveKeyWithValue(v1alpha1.RoleLabel, *tt.wantLabel))
				}
				g.Expect(got.Labels).To(HaveKeyWithValue("team", "storage"))
				g.Expect(got.Labels).To(HaveKeyWithValue(v1alpha1.MemberLabel, testMember))
			}

			// A second call finds nothing to do.
			g.Expect(pod.SetRoleLabel(ctx, c, stored, tt.voter)).To(Succeed())
			g.Expect(w.total()).To(Equal(tt.wantPatches))
		})
	}
}
