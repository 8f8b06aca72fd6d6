package backupjob_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quorumctl/etcd-operator/internal/component/backupjob"
)

func TestPodRefused(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "main-snapshot", UID: "job-uid"}}
	at := time.Unix(1_800_000_000, 0)
	event := func(uid, reason, eventType, msg string, when time.Time) corev1.Event {
		return corev1.Event{
			InvolvedObject: corev1.ObjectReference{Kind: "Job", UID: types.UID(uid)},
			Reason:         reason, Type: eventType, Message: msg, LastTimestamp: metav1.NewTime(when),
		}
	}
	quota := `Error creating: pods "main-snapshot-x" is forbidden: exceeded quota: none, requested: pods=1, used: pods=0, limited: pods=0`
	for _, tc := range []struct {
		name   string
		pods   []corev1.Pod
		events []corev1.Event
		want   string
	}{
		{name: "no events", want: ""},
		{name: "refused", events: []corev1.Event{event("job-uid", "FailedCreate", corev1.EventTypeWarning, quota, at)}, want: quota},
		{name: "the latest refusal", events: []corev1.Event{
			event("job-uid", "FailedCreate", corev1.EventTypeWarning, "later", at.Add(time.Minute)),
			event("job-uid", "FailedCreate", corev1.EventTypeWarning, quota, at),
		}, want: "later"},
		{name: "a Pod exists", pods: []corev1.Pod{{}},
			events: []corev1.Event{event("job-uid", "FailedCreate", corev1.EventTypeWarning, quota, at)}, want: ""},
		{name: "another reason", events: []corev1.Event{event("job-uid", "SuccessfulCreate", corev1.EventTypeNormal, "Created pod", at)}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(backupjob.PodRefused(job, tc.pods, tc.events)).To(Equal(tc.want))
		})
	}
	other := event("an-older-job", "FailedCreate", corev1.EventTypeWarning, quota, at)
	NewWithT(t).Expect(backupjob.PodRefused(job, nil, []corev1.Event{other})).To(BeEmpty(), "an earlier Job of the same name")
}
