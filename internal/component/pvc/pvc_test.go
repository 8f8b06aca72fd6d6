package pvc_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/owner"
	"github.com/quorumctl/etcd-operator/internal/component/pvc"
)

const (
	testCluster = "demo"
	testMember  = "demo-x7k2p"
	testNS      = "prod"
)

func newMember(mutate ...func(*v1alpha1.EtcdMember)) *v1alpha1.EtcdMember {
	m := &v1alpha1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: testMember, Namespace: testNS, UID: "member-uid"},
		Spec: v1alpha1.EtcdMemberSpec{
			ClusterName:    testCluster,
			InitialCluster: "demo-x7k2p=http://demo-x7k2p.demo.prod.svc.cluster.local:2380",
			ClusterToken:   "etcd-3f1c",
		},
	}
	for _, f := range mutate {
		f(m)
	}
	return m
}

func TestBuild(t *testing.T) {
	memberLabels := v1alpha1.MemberLabels(testCluster, testMember)
	tests := []struct {
		name            string
		storage         v1alpha1.StorageSpec
		volumeSize      *resource.Quantity
		metadata        *v1alpha1.AdditionalMetadata
		wantNil         bool
		wantSize        string
		wantClass       *string
		wantLabels      map[string]string
		wantAnnotations map[string]string
	}{
		{name: "defaults", wantSize: "1Gi", wantLabels: memberLabels},
		{name: "size", storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("20Gi"))}, wantSize: "20Gi", wantLabels: memberLabels},
		{name: "named class", storage: v1alpha1.StorageSpec{StorageClassName: ptr.To("fast")}, wantSize: "1Gi", wantClass: ptr.To("fast"), wantLabels: memberLabels},
		{name: "empty class means no provisioning, not the default", storage: v1alpha1.StorageSpec{StorageClassName: ptr.To("")}, wantSize: "1Gi", wantClass: ptr.To(""), wantLabels: memberLabels},
		{name: "asked to grow past the template's size", storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("1Gi"))},
			volumeSize: ptr.To(resource.MustParse("4Gi")), wantSize: "4Gi", wantLabels: memberLabels},
		{name: "the template's size past an older ask", storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("8Gi"))},
			volumeSize: ptr.To(resource.MustParse("4Gi")), wantSize: "8Gi", wantLabels: memberLabels},
		{name: "memory has no claim", storage: v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: ptr.To(resource.MustParse("64Mi"))}, wantNil: true},
		{
			name: "additional metadata, operator labels win, no role label",
			metadata: &v1alpha1.AdditionalMetadata{
				Labels: map[string]string{
					"team": "storage", v1alpha1.MemberLabel: "other", v1alpha1.RoleLabel: v1alpha1.RoleLabelVoter,
				},
				Annotations: map[string]string{"backup.example.com/include": "true"},
			},
			wantSize: "1Gi",
			wantLabels: func() map[string]string {
				l := v1alpha1.MemberLabels(testCluster, testMember)
				l["team"] = "storage"
				return l
			}(),
			wantAnnotations: map[string]string{"backup.example.com/include": "true"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m := newMember(func(m *v1alpha1.EtcdMember) {
				m.Spec.Storage = tt.storage
				m.Spec.VolumeSize = tt.volumeSize
				m.Spec.AdditionalMetadata = tt.metadata
				m.Status.Role = v1alpha1.MemberRoleVoter
			})
			snapshot := m.DeepCopy()

			got := pvc.Build(m)
			if tt.wantNil {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got.Name).To(Equal("data-" + testMember))
			g.Expect(got.Namespace).To(Equal(testNS))
			g.Expect(got.Labels).To(Equal(tt.wantLabels))
			if tt.wantAnnotations == nil {
				g.Expect(got.Annotations).To(BeEmpty())
			} else {
				g.Expect(got.Annotations).To(Equal(tt.wantAnnotations))
			}
			g.Expect(got.OwnerReferences).To(Equal([]metav1.OwnerReference{{
				APIVersion:         "etcd.quorumctl.io/v1alpha1",
				Kind:               "EtcdMember",
				Name:               testMember,
				UID:                "member-uid",
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}}))
			g.Expect(got.Spec.AccessModes).To(Equal([]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}))
			size := got.Spec.Resources.Requests[corev1.ResourceStorage]
			g.Expect(size.Equal(resource.MustParse(tt.wantSize))).To(BeTrue(), "size %s", size.String())
			g.Expect(got.Spec.Resources.Limits).To(BeEmpty())
			g.Expect(got.Spec.StorageClassName).To(Equal(tt.wantClass))

			// The claim shares no memory with the member.
			got.Labels["team"] = "x"
			got.Annotations = map[string]string{}
			if got.Spec.StorageClassName != nil {
				*got.Spec.StorageClassName = "x"
			}
			g.Expect(m).To(Equal(snapshot))
		})
	}
}

type writes struct{ creates, updates, patches, deletes int }

func (w *writes) total() int { return w.creates + w.updates + w.patches + w.deletes }

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

func TestEnsure(t *testing.T) {
	owned := func(uid types.UID, size string) *corev1.PersistentVolumeClaim {
		c := pvc.Build(newMember())
		c.OwnerReferences[0].UID = uid
		c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
		return c
	}
	orphan := pvc.Build(newMember())
	orphan.OwnerReferences = nil

	tests := []struct {
		name        string
		storage     v1alpha1.StorageSpec
		live        *corev1.PersistentVolumeClaim
		wantCreates int
		wantSize    string
		wantNil     bool
		wantOwned   bool
	}{
		{name: "creates a missing claim", wantCreates: 1, wantSize: "1Gi"},
		{name: "returns the existing claim untouched", storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("5Gi"))}, live: owned("member-uid", "2Gi"), wantSize: "2Gi"},
		{name: "refuses a previous incarnation's claim", live: owned("old-uid", "1Gi"), wantNil: true, wantOwned: true},
		{name: "refuses a claim without a controller", live: orphan, wantNil: true, wantOwned: true},
		{name: "memory member has nothing to ensure", storage: v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: ptr.To(resource.MustParse("64Mi"))}, wantNil: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			w := &writes{}
			var objs []client.Object
			if tt.live != nil {
				objs = append(objs, tt.live)
			}
			c := newClient(w, objs...)
			m := newMember(func(m *v1alpha1.EtcdMember) { m.Spec.Storage = tt.storage })

			got, err := pvc.Ensure(ctx, c, m)
			if tt.wantOwned {
				var notOwned *owner.NotOwnedError
				g.Expect(errors.As(err, &notOwned)).To(BeTrue(), "got %v", err)
				g.Expect(notOwned.OwnerUID).To(BeEquivalentTo("member-uid"))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(w.creates).To(Equal(tt.wantCreates))
			g.Expect(w.total()).To(Equal(tt.wantCreates))
			if tt.wantNil {
				g.Expect(got).To(BeNil())
				return
			}
			size := got.Spec.Resources.Requests[corev1.ResourceStorage]
			g.Expect(size.Equal(resource.MustParse(tt.wantSize))).To(BeTrue(), "size %s", size.String())

			stored := &corev1.PersistentVolumeClaim{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(got), stored)).To(Succeed())
			g.Expect(metav1.GetControllerOf(stored).UID).To(BeEquivalentTo("member-uid"))

			// Ensuring again is a read.
			_, err = pvc.Ensure(ctx, c, m)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(w.total()).To(Equal(tt.wantCreates))
		})
	}
}

func TestGrow(t *testing.T) {
	claim := func(request string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
		c := pvc.Build(newMember())
		c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(request)
		c.Status.Phase = phase
		return c
	}
	tests := []struct {
		name       string
		storage    *resource.Quantity
		volumeSize *resource.Quantity
		live       *corev1.PersistentVolumeClaim
		wantGrown  bool
		wantSize   string
	}{
		{name: "asked to grow", volumeSize: ptr.To(resource.MustParse("4Gi")), live: claim("1Gi", corev1.ClaimBound), wantGrown: true, wantSize: "4Gi"},
		{name: "not asked", live: claim("1Gi", corev1.ClaimBound), wantSize: "1Gi"},
		{name: "the template's size alone grows nothing", storage: ptr.To(resource.MustParse("4Gi")), live: claim("1Gi", corev1.ClaimBound), wantSize: "1Gi"},
		{name: "already asked for as much", volumeSize: ptr.To(resource.MustParse("4Gi")), live: claim("4096Mi", corev1.ClaimBound), wantSize: "4096Mi"},
		{name: "asked for more already", volumeSize: ptr.To(resource.MustParse("4Gi")), live: claim("8Gi", corev1.ClaimBound), wantSize: "8Gi"},
		{name: "not bound yet", volumeSize: ptr.To(resource.MustParse("4Gi")), live: claim("1Gi", corev1.ClaimPending), wantSize: "1Gi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			w := &writes{}
			c := newClient(w, tt.live)
			m := newMember(func(m *v1alpha1.EtcdMember) {
				m.Spec.Storage.Size = tt.storage
				m.Spec.VolumeSize = tt.volumeSize
			})
			live := &corev1.PersistentVolumeClaim{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(tt.live), live)).To(Succeed())
			before := live.Spec.Resources.Requests[corev1.ResourceStorage]

			from, grown, err := pvc.Grow(ctx, c, m, live)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(grown).To(Equal(tt.wantGrown))
			g.Expect(from.Equal(before)).To(BeTrue(), "from %s", from.String())
			wantPatches := 0
			if tt.wantGrown {
				wantPatches = 1
			}
			g.Expect(w.patches).To(Equal(wantPatches))
			g.Expect(w.total()).To(Equal(w.patches), "growing is a patch, nothing else")
			stored := &corev1.PersistentVolumeClaim{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(tt.live), stored)).To(Succeed())
			size := stored.Spec.Resources.Requests[corev1.ResourceStorage]
			g.Expect(size.Equal(resource.MustParse(tt.wantSize))).To(BeTrue(), "size %s", size.String())

			// Growing again asks for nothing more.
			_, grown, err = pvc.Grow(ctx, c, m, stored)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(grown).To(BeFalse())
			g.Expect(w.patches).To(Equal(wantPatches))
		})
	}
}

func TestGrow_ReturnsTheRefusal(t *testing.T) {
	g := NewWithT(t)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumeclaims"}, "data-"+testMember, errors.New("exceeded quota"))
	live := pvc.Build(newMember())
	live.Status.Phase = corev1.ClaimBound
	c := interceptor.NewClient(fakeclient.NewClientBuilder().WithObjects(live).Build(), interceptor.Funcs{
		Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			return forbidden
		},
	})
	m := newMember(func(m *v1alpha1.EtcdMember) { m.Spec.VolumeSize = ptr.To(resource.MustParse("4Gi")) })
	_, grown, err := pvc.Grow(context.Background(), c, m, live)
	g.Expect(grown).To(BeFalse())
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the API server's refusal, wrapped: %v", err)
}
