package etcdsnapshot

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/backupjob"
)

// A Job the API server refuses (its Pod template is validated with it)
// fails the snapshot at once, with the API server's message.
func TestARefusedJobFailsTheSnapshotAtOnce(t *testing.T) {
	h := newHarness(t)
	h.cluster(true)
	h.snapshot("s", 0)
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "main-snapshot", field.ErrorList{
		field.Invalid(field.NewPath("spec", "template", "spec", "containers").Index(0).Child("env").Index(0).Child("valueFrom", "secretKeyRef", "name"),
			"Bad_Name", "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters")})
	h.r.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, isJob := obj.(*batchv1.Job); isJob {
				return invalid
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	res := h.reconcile("s")
	s := h.get("s")
	h.g.Expect(s.Status.Phase).To(Equal(v1alpha1.SnapshotFailed))
	h.g.Expect(h.condition("s").Reason).To(Equal(v1alpha1.SnapshotPodCreateFailedReason))
	h.g.Expect(h.condition("s").Message).To(ContainSubstring("Bad_Name"))
	h.g.Expect(res.RequeueAfter).To(BeZero())
}

// A Job whose Pod the API server refuses (the Job controller says so in a
// FailedCreate Event, and would retry until the Job's deadline) fails the
// snapshot as soon as the Event is there; until then the snapshot looks
// again soon, as nothing it watches changes.
func TestAJobWhosePodIsRefusedFailsTheSnapshot(t *testing.T) {
	h := newHarness(t)
	h.cluster(true)
	h.snapshot("s", 0)
	h.reconcile("s")
	j := h.job()
	res := h.reconcile("s")
	h.g.Expect(h.get("s").Status.Phase).To(Equal(v1alpha1.SnapshotRunning))
	h.g.Expect(res.RequeueAfter).To(Equal(requeueWaiting))

	msg := `Error creating: pods "main-snapshot-x" is forbidden: exceeded quota: none, requested: pods=1, used: pods=0, limited: pods=0`
	h.g.Expect(h.c.Create(context.Background(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "main-snapshot.1", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Job", Namespace: ns, Name: j.Name, UID: j.UID},
		Reason:         backupjob.FailedCreateReason, Type: corev1.EventTypeWarning, Message: msg,
		LastTimestamp: metav1.NewTime(h.now),
	})).To(Succeed())
	h.reconcile("s")
	s := h.get("s")
	h.g.Expect(s.Status.Phase).To(Equal(v1alpha1.SnapshotFailed))
	h.g.Expect(h.condition("s").Reason).To(Equal(v1alpha1.SnapshotPodCreateFailedReason))
	h.g.Expect(h.condition("s").Message).To(ContainSubstring("exceeded quota"))
}
