package etcdrecovery

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/component/backupjob"
)

func checkJob(conds ...batchv1.JobCondition) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "rec-key-check", UID: "job-uid"}, Status: batchv1.JobStatus{Conditions: conds}}
}

var deadline = batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
	Reason: batchv1.JobReasonDeadlineExceeded, Message: "Job was active longer than specified deadline"}

func checkPod(status corev1.PodStatus) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rec-key-check-x", UID: "pod-uid"}, Status: status}
}

func pending(cs ...corev1.ContainerStatus) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: cs}
}

func waiting(reason, msg string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: backupjob.ContainerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}
}

func terminatedWith(msg string, code int32, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: backupjob.ContainerName, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{Message: msg, ExitCode: code, Reason: reason}}}
}

func warning(kind, uid, reason, msg string, at time.Time) corev1.Event {
	return corev1.Event{Type: corev1.EventTypeWarning, Reason: reason, Message: msg, LastTimestamp: metav1.NewTime(at),
		InvolvedObject: corev1.ObjectReference{Kind: kind, UID: types.UID(uid)}}
}

// The agent's verdict is only what its container's termination message
// carries; every other end of a Job, or a Pod that cannot start, is no
// verdict, whatever the Job's own condition says.
func TestClassifyKeyCheck(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	wrong := backup.ResultOf(&backup.WrongKeyError{Recorded: "sha256:aa", Given: "sha256:bb"})
	unreadable := backup.Result{Code: backup.CodeObjectNotFound, Message: "no such object"}
	unschedulable := pending()
	unschedulable.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: 3 Insufficient memory."}}
	for _, tc := range []struct {
		name     string
		job      *batchv1.Job
		pods     []corev1.Pod
		warnings []corev1.Event
		state    checkState
		result   backup.Code
		why      string
	}{
		{name: "no Pod yet", job: checkJob(), state: checkRunning},
		{name: "container creating", job: checkJob(), pods: []corev1.Pod{checkPod(pending(waiting("ContainerCreating", "")))}, state: checkRunning},
		{name: "running", job: checkJob(), pods: []corev1.Pod{checkPod(corev1.PodStatus{Phase: corev1.PodRunning})}, state: checkRunning},
		{name: "the agent's wrong key", job: checkJob(deadline),
			pods:  []corev1.Pod{checkPod(corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{terminatedWith(string(wrong.Encode()), 1, "Error")}})},
			state: checkVerdict, result: backup.CodeEncryptionKeyWrong},
		{name: "the agent could not read the snapshot", job: checkJob(),
			pods:  []corev1.Pod{checkPod(corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{terminatedWith(string(unreadable.Encode()), 1, "Error")}})},
			state: checkVerdict, result: backup.CodeObjectNotFound},
		{name: "deadline, the Pod gone", job: checkJob(deadline), state: checkNotRun,
			why: "its Job ended without the agent's result (DeadlineExceeded: Job was active longer than specified deadline)"},
		{name: "deadline, the Pod never scheduled", job: checkJob(deadline), pods: []corev1.Pod{checkPod(unschedulable)}, state: checkNotRun,
			why: "(DeadlineExceeded: Job was active longer than specified deadline); its Pod rec-key-check-x cannot be scheduled: 0/3 nodes are available: 3 Insufficient memory."},
		{name: "killed before reporting", job: checkJob(batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}),
			pods:  []corev1.Pod{checkPod(corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{terminatedWith("", 137, "OOMKilled")}})},
			state: checkNotRun, why: "(exit code 137, OOMKilled)"},
		{name: "image pull", job: checkJob(), pods: []corev1.Pod{checkPod(pending(waiting("ImagePullBackOff", "Back-off pulling image \"operator:nope\"")))},
			state: checkNotRun, why: "its Pod cannot start: ImagePullBackOff: Back-off pulling image \"operator:nope\""},
		{name: "unschedulable", job: checkJob(), pods: []corev1.Pod{checkPod(unschedulable)}, state: checkHeldUp,
			why: "its Pod rec-key-check-x cannot be scheduled: 0/3 nodes are available: 3 Insufficient memory."},
		{name: "a volume that does not mount", job: checkJob(), pods: []corev1.Pod{checkPod(pending(waiting("ContainerCreating", "")))},
			warnings: []corev1.Event{
				warning("Pod", "pod-uid", "FailedMount", "an older one", at.Add(-time.Minute)),
				warning("Pod", "pod-uid", "FailedMount", "MountVolume.SetUp failed for volume \"backups\" : persistentvolumeclaim \"backups\" not found", at),
			},
			state: checkHeldUp, why: "its Pod rec-key-check-x has not started: FailedMount: MountVolume.SetUp failed for volume \"backups\" : persistentvolumeclaim \"backups\" not found"},
		{name: "the API server refused the Pod", job: checkJob(),
			warnings: []corev1.Event{warning("Job", "job-uid", backupjob.FailedCreateReason, "pods \"rec-key-check-x\" is forbidden: exceeded quota", at)},
			state:    checkHeldUp, why: "the API server refused its Pod: pods \"rec-key-check-x\" is forbidden: exceeded quota"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			o := classifyKeyCheck(tc.job, tc.pods, tc.warnings)
			g.Expect(o.state).To(Equal(tc.state))
			g.Expect(o.result.Code).To(Equal(tc.result))
			if tc.why == "" {
				g.Expect(o.why).To(BeEmpty())
			} else {
				g.Expect(o.why).To(ContainSubstring(tc.why))
			}
		})
	}
}

func TestKeyCheckBackoffIsBounded(t *testing.T) {
	g := NewWithT(t)
	var got []time.Duration
	for a := int32(1); a <= 7; a++ {
		got = append(got, keyCheckBackoff(a))
	}
	g.Expect(got).To(Equal([]time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute}))
	g.Expect(keyCheckBackoff(1 << 30)).To(Equal(10 * time.Minute))
}

func TestRecordNotRunAndNextKeyCheck(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1_700_000_000, 0)
	attempt, start := nextKeyCheck(nil, "sealed", now)
	g.Expect(attempt).To(Equal(int32(1)))
	g.Expect(start).To(BeTrue())

	s := recordNotRun(nil, "sealed", 1, "deadline", now)
	g.Expect(s).To(Equal(&v1alpha1.RecoveryKeyCheckStatus{Snapshot: "sealed", Attempt: 1, NotRun: "deadline", RetryAt: metav1.NewTime(now.Add(30 * time.Second))}))
	// Seen again (a stale cache): the backoff is not restarted.
	g.Expect(recordNotRun(s, "sealed", 1, "deadline", now.Add(20*time.Second))).To(BeIdenticalTo(s))

	_, start = nextKeyCheck(s, "sealed", now.Add(29*time.Second))
	g.Expect(start).To(BeFalse(), "not before the backoff")
	attempt, start = nextKeyCheck(s, "sealed", now.Add(30*time.Second))
	g.Expect(attempt).To(Equal(int32(2)))
	g.Expect(start).To(BeTrue())

	s2 := recordNotRun(s, "sealed", 2, "image", now.Add(time.Minute))
	g.Expect(s2.Attempt).To(Equal(int32(2)))
	g.Expect(s2.RetryAt.Time).To(Equal(now.Add(2 * time.Minute)))

	// Another snapshot starts counting again, at once.
	attempt, start = nextKeyCheck(s2, "newer", now.Add(time.Minute))
	g.Expect(attempt).To(Equal(int32(1)))
	g.Expect(start).To(BeTrue())
	g.Expect(recordNotRun(s2, "newer", 1, "x", now).Attempt).To(Equal(int32(1)))
}
