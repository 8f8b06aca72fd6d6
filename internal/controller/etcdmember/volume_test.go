package etcdmember

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pvc"
)

// boundVolume gives the member the bound claim of size that the member
// controller and the provisioner leave, and asks (spec.volumeSize, as the
// cluster controller does) for it to grow to ask.
func (f *fixture) boundVolume(name, size, ask string) {
	ctx := context.Background()
	m := f.member(name)
	claim := pvc.Build(m)
	claim.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
	claim.Status.Phase = corev1.ClaimBound
	f.g.Expect(f.c.Create(ctx, claim)).To(Succeed())
	m.Spec.VolumeSize = ptr.To(resource.MustParse(ask))
	f.g.Expect(f.c.Update(ctx, m)).To(Succeed())
}

func (f *fixture) requested(name string) string {
	claim := &corev1.PersistentVolumeClaim{}
	f.g.Expect(f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: v1alpha1.DataVolumeClaimName(name)}, claim)).To(Succeed())
	return claim.Spec.Resources.Requests.Storage().String()
}

// The cluster controller asks for the volume to grow in the member's spec;
// the member controller grows the claim, once, and says so on the member.
func TestVolume_GrowsToTheSizeTheSpecAsks(t *testing.T) {
	f := newFixture(t, false, "demo-a")
	f.boundVolume("demo-a", "1Gi", "4Gi")
	events := &eventLog{}
	f.r.Recorder = events

	f.reconcile("demo-a")
	f.g.Expect(f.requested("demo-a")).To(Equal("4Gi"))
	f.g.Expect(events.events).To(ConsistOf(recordedEvent{corev1.EventTypeNormal, "VolumeExpanding",
		"Asked for PersistentVolumeClaim data-demo-a to grow from 1Gi to 4Gi online"}))
	_, running := f.pod("demo-a")
	f.g.Expect(running).To(BeTrue(), "the member runs on its volume while it grows")

	f.reconcile("demo-a")
	f.g.Expect(events.events).To(HaveLen(1), "asked once")
}

// A grow the API server refuses (a storage quota, say) is reported on the
// member and retried, and keeps nothing else of the pass from happening:
// the member's Pod is still made.
func TestVolume_ARefusedGrowIsReportedAndTheMemberStillRuns(t *testing.T) {
	f := newFixture(t, false, "demo-a")
	f.boundVolume("demo-a", "1Gi", "4Gi")
	events := &eventLog{}
	f.r.Recorder = events
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumeclaims"}, "data-demo-a",
		errors.New("exceeded quota: storage, requested: requests.storage=3Gi"))
	f.r.Client = interceptor.NewClient(f.c.(client.WithWatch), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, isClaim := obj.(*corev1.PersistentVolumeClaim); isClaim {
				return forbidden
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})

	err := f.reconcileErr("demo-a")
	f.g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "retried on the workqueue's backoff: %v", err)
	f.g.Expect(f.requested("demo-a")).To(Equal("1Gi"))
	_, running := f.pod("demo-a")
	f.g.Expect(running).To(BeTrue(), "the rest of the pass went on")
	f.g.Expect(events.events).To(ContainElement(recordedEvent{corev1.EventTypeWarning, "VolumeExpansionRefused",
		"The API server refused to grow PersistentVolumeClaim data-demo-a to 4Gi: " + forbidden.ErrStatus.Message}))
}

// A claim made after the member was asked to grow (its claim was deleted)
// is made at the asked size, not made small and grown.
func TestVolume_AClaimMadeAgainIsMadeAtTheAskedSize(t *testing.T) {
	f := newFixture(t, false, "demo-a")
	m := f.member("demo-a")
	m.Spec.VolumeSize = ptr.To(resource.MustParse("4Gi"))
	f.g.Expect(f.c.Update(context.Background(), m)).To(Succeed())
	events := &eventLog{}
	f.r.Recorder = events

	f.reconcile("demo-a")
	f.g.Expect(f.requested("demo-a")).To(Equal("4Gi"))
	f.g.Expect(events.events).NotTo(ContainElement(HaveField("reason", "VolumeExpanding")))
}
