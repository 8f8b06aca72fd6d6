package etcdrecovery

import (
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/component/backupjob"
	"github.com/quorumctl/etcd-operator/internal/recovery"
)

// The pure decisions of the key check: what a Job came to, and when the
// next starts after one that gave no verdict.

const (
	// keyCheckRetryFirst is the wait before the second check of a
	// snapshot: long enough not to churn Pods, short against a recovery.
	keyCheckRetryFirst = 30 * time.Second
	// keyCheckRetryMax bounds the wait; a check Job's own deadline is as
	// long, so a fixed cause costs at most about one more check.
	keyCheckRetryMax = 10 * time.Minute
)

// checkState is what a key check Job came to.
type checkState int

const (
	// checkRunning: the agent may still report.
	checkRunning checkState = iota
	// checkHeldUp: the Pod is not running and something says why (no node
	// fits it, a volume does not mount, its create was refused), but that
	// may pass: the Job is kept until it runs or ends.
	checkHeldUp
	// checkVerdict: the agent ran and wrote its result. Final for the
	// snapshot and the key, whatever the result.
	checkVerdict
	// checkNotRun: the Job ended, or its Pod cannot start, without the
	// agent's result. That says nothing of the key or the snapshot: the
	// Job is replaced.
	checkNotRun
)

type checkOutcome struct {
	state checkState
	// result is the agent's (checkVerdict).
	result backup.Result
	// why the agent has not given a verdict (checkHeldUp, checkNotRun).
	why string
}

// classifyKeyCheck tells the agent's verdict, which only the termination
// message of its container carries, from every way a Job can end or stall
// without one; warnings are the Warning Events about the Job and its
// Pending Pods.
func classifyKeyCheck(job *batchv1.Job, pods []corev1.Pod, warnings []corev1.Event) checkOutcome {
	o := backupjob.Observe(job, pods)
	held := heldUp(job, pods, warnings)
	switch {
	case o.Result.Code != "":
		return checkOutcome{state: checkVerdict, result: o.Result}
	case o.Done:
		why := "its Job ended without the agent's result (" + o.NoResult + ")"
		if held != "" {
			why += "; " + held
		}
		return checkOutcome{state: checkNotRun, why: why}
	case o.Stuck != "":
		return checkOutcome{state: checkNotRun, why: "its Pod cannot start: " + o.Stuck}
	case held != "":
		return checkOutcome{state: checkHeldUp, why: held}
	}
	return checkOutcome{state: checkRunning}
}

// heldUp says why a key check Pod is not running, from its scheduling
// condition, its container's waiting reason, or the latest Warning Event
// about it or its Job (FailedMount, FailedCreate); "" when nothing says.
func heldUp(job *batchv1.Job, pods []corev1.Pod, warnings []corev1.Event) string {
	if refused := backupjob.PodRefused(job, pods, warnings); refused != "" {
		return "the API server refused its Pod: " + refused
	}
	var latest *corev1.Event
	for i := range warnings {
		if e := &warnings[i]; e.InvolvedObject.Kind == "Pod" && (latest == nil || backupjob.EventTime(e).After(backupjob.EventTime(latest))) {
			latest = e
		}
	}
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase != corev1.PodPending {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return fmt.Sprintf("its Pod %s cannot be scheduled: %s", p.Name, c.Message)
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" && w.Reason != "" {
				return fmt.Sprintf("its Pod %s waits: %s: %s", p.Name, w.Reason, w.Message)
			}
		}
		if latest != nil && latest.InvolvedObject.UID == p.UID {
			return fmt.Sprintf("its Pod %s has not started: %s: %s", p.Name, latest.Reason, strings.TrimSpace(latest.Message))
		}
	}
	return ""
}

// recordNotRun records a check Job of snapshot, number attempt, that gave
// no verdict, and when the next starts. A Job already recorded (a stale
// cache shows it again) changes nothing, so its backoff is not restarted.
func recordNotRun(prev *v1alpha1.RecoveryKeyCheckStatus, snapshot string, attempt int32, why string, now time.Time) *v1alpha1.RecoveryKeyCheckStatus {
	if prev != nil && prev.Snapshot == snapshot && prev.Attempt >= attempt {
		return prev
	}
	return &v1alpha1.RecoveryKeyCheckStatus{Snapshot: snapshot, Attempt: attempt, NotRun: why,
		RetryAt: metav1.NewTime(now.Add(keyCheckBackoff(attempt)))}
}

// nextKeyCheck is the number of the next check Job of snapshot, and
// whether it may start now.
func nextKeyCheck(prev *v1alpha1.RecoveryKeyCheckStatus, snapshot string, now time.Time) (int32, bool) {
	if prev == nil || prev.Snapshot != snapshot {
		return 1, true
	}
	return prev.Attempt + 1, !now.Before(prev.RetryAt.Time)
}

// keyCheckBackoff is the wait after the attempt-th check that gave no
// verdict: doubling from keyCheckRetryFirst, at most keyCheckRetryMax.
func keyCheckBackoff(attempt int32) time.Duration {
	d := keyCheckRetryFirst
	for i := int32(1); i < attempt && d < keyCheckRetryMax; i++ {
		d *= 2
	}
	return min(d, keyCheckRetryMax)
}

// notRunOf is the check the status records as not run, while no Job is
// there and the next is not due: the recovery waits for it. Once it is due
// there is no check, and the next is started.
func notRunOf(s *v1alpha1.RecoveryKeyCheckStatus, now time.Time) *recovery.KeyCheck {
	if s == nil || !now.Before(s.RetryAt.Time) {
		return nil
	}
	return &recovery.KeyCheck{Snapshot: s.Snapshot,
		NotRun:  fmt.Sprintf("check %d of it did not run: %s", s.Attempt, s.NotRun),
		RetryAt: s.RetryAt.Time}
}
