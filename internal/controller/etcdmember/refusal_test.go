package etcdmember

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

type recordedEvent struct{ eventType, reason, note string }

type eventLog struct{ events []recordedEvent }

func (l *eventLog) Eventf(_ runtime.Object, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	l.events = append(l.events, recordedEvent{eventtype, reason, fmt.Sprintf(note, args...)})
}

// refusePods makes the API server refuse Pod creates with err while *on.
func (f *fixture) refusePods(on *bool, err error) *eventLog {
	events := &eventLog{}
	f.r.Client = interceptor.NewClient(f.c.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, isPod := obj.(*corev1.Pod); isPod && *on {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	f.r.Recorder = events
	return events
}

func (f *fixture) reconcileErr(name string) error {
	_, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	return err
}

// A Pod the API server refuses is reported with the API server's message,
// once as an Event, and the create is retried: once allowed, the Pod is
// created and the condition clears by itself.
func TestRefusedPod_ReportedThenClears(t *testing.T) {
	f := newFixture(t, false, "demo-a")
	refused := true
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "demo-a",
		errors.New("no PriorityClass with name etcd-critical was found"))
	events := f.refusePods(&refused, forbidden)

	for range 3 {
		err := f.reconcileErr("demo-a")
		f.g.Expect(err).To(HaveOccurred(), "a refused create is retried on the workqueue's backoff")
		c := meta.FindStatusCondition(f.member("demo-a").Status.Conditions, v1alpha1.MemberReadyCondition)
		f.g.Expect(c).NotTo(BeNil())
		f.g.Expect(c.Reason).To(Equal(v1alpha1.MemberPodCreateFailedReason))
		f.g.Expect(c.Message).To(ContainSubstring("no PriorityClass with name etcd-critical was found"))
	}
	f.g.Expect(events.events).To(HaveLen(1), "one Event per cause, not per retry")
	f.g.Expect(events.events[0].eventType).To(Equal(corev1.EventTypeWarning))
	f.g.Expect(events.events[0].reason).To(Equal(v1alpha1.MemberPodCreateFailedReason))

	refused = false
	f.reconcile("demo-a")
	_, created := f.pod("demo-a")
	f.g.Expect(created).To(BeTrue())
	c := meta.FindStatusCondition(f.member("demo-a").Status.Conditions, v1alpha1.MemberReadyCondition)
	f.g.Expect(c.Reason).To(Equal(v1alpha1.MemberPodNotReadyReason))
}

// A failure that is no refusal (a timeout, a conflict) is retried without
// a report: the API server did not say anything about the Pod.
func TestRefusedPod_TransientErrorIsNoRefusal(t *testing.T) {
	f := newFixture(t, false, "demo-a")
	failing := true
	events := f.refusePods(&failing, apierrors.NewTimeoutError("slow", 1))
	f.g.Expect(f.reconcileErr("demo-a")).To(HaveOccurred())
	c := meta.FindStatusCondition(f.member("demo-a").Status.Conditions, v1alpha1.MemberReadyCondition)
	f.g.Expect(c.Reason).To(Equal(v1alpha1.MemberPodMissingReason))
	f.g.Expect(events.events).To(BeEmpty())
}

func TestNewRefusal(t *testing.T) {
	g := NewWithT(t)
	m := &v1alpha1.EtcdMember{}
	g.Expect(newRefusal(m, "quota exceeded")).To(BeTrue(), "no condition yet")
	updateStatus(m, observation{podRefused: "quota exceeded"})
	g.Expect(newRefusal(m, "quota exceeded")).To(BeFalse(), "already reported")
	g.Expect(newRefusal(m, "no PriorityClass")).To(BeTrue(), "another cause")
	updateStatus(m, observation{})
	g.Expect(newRefusal(m, "quota exceeded")).To(BeTrue(), "cleared, then refused again")
}
