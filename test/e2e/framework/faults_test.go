package framework

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestInjectable(t *testing.T) {
	running := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m-1"},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if err := Injectable(&running); err != nil {
		t.Fatalf("a running pod: %v", err)
	}
	unscheduled := running
	unscheduled.Spec.NodeName = ""
	unscheduled.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available",
	}}}
	pending := running
	pending.Status.Phase = corev1.PodPending
	deleting := running
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	for want, p := range map[string]corev1.Pod{
		"not scheduled (Unschedulable: 0/3 nodes are available)": unscheduled,
		`not running (phase "Pending")`:                          pending,
		"being deleted":                                          deleting,
	} {
		if err := Injectable(&p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}
