package backupjob

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/quorumctl/etcd-operator/internal/backup"
)

// Outcome is what became of a Job.
type Outcome struct {
	// Done: the Job completed or failed.
	Done bool
	// Result is the agent's, when it reported one.
	Result backup.Result
	// NoResult says why there is no Result: the Pod was killed, ran past
	// its deadline, or never ran the agent. Empty when Result is set.
	NoResult string
	// Stuck says why a Pod cannot start (its image cannot be pulled, say);
	// the Job would otherwise sit until its deadline.
	Stuck string
}

// stuckReasons are the kubelet's waiting reasons that do not clear alone.
var stuckReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "ErrImageNeverPull": true,
	"InvalidImageName": true, "CreateContainerConfigError": true,
}

// Observe reads a Job and its Pods.
func Observe(job *batchv1.Job, pods []corev1.Pod) Outcome {
	var o Outcome
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			o.Done = true
			o.NoResult = fmt.Sprintf("%s: %s", c.Reason, c.Message)
		}
	}
	for i := range pods {
		if t := terminated(pods[i].Status.ContainerStatuses, ContainerName); t != nil {
			if res, err := backup.ParseResult(t.Message); err == nil {
				o.Result, o.NoResult = res, ""
				return o
			}
			if o.Done {
				o.NoResult = fmt.Sprintf("%s (exit code %d, %s)", o.NoResult, t.ExitCode, t.Reason)
			}
		}
		for _, cs := range pods[i].Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && stuckReasons[w.Reason] {
				o.Stuck = fmt.Sprintf("%s: %s", w.Reason, w.Message)
			}
		}
	}
	return o
}

func terminated(statuses []corev1.ContainerStatus, name string) *corev1.ContainerStateTerminated {
	for _, cs := range statuses {
		if cs.Name != name {
			continue
		}
		if t := cs.State.Terminated; t != nil {
			return t
		}
		return cs.LastTerminationState.Terminated
	}
	return nil
}

// InitFailure is the result a failed init container reported, such as the
// seed's restore download refusing a snapshot whose checksum differs. It
// looks at the current state, and at the last one while the kubelet waits
// to restart the container.
func InitFailure(p *corev1.Pod, container string) (backup.Result, bool) {
	if p == nil {
		return backup.Result{}, false
	}
	t := terminated(p.Status.InitContainerStatuses, container)
	if t == nil || t.ExitCode == 0 {
		return backup.Result{}, false
	}
	res, err := backup.ParseResult(t.Message)
	if err != nil {
		res = backup.Result{Code: backup.CodeRestoreFailed, Message: fmt.Sprintf("init container %s exited with %d (%s) without a result", container, t.ExitCode, t.Reason)}
	}
	if res.Code == backup.CodeOK {
		return backup.Result{}, false
	}
	return res, true
}

// FailedCreateReason is the reason of the Warning Event the Job controller
// records when the API server refuses to create a Job's Pod.
const FailedCreateReason = "FailedCreate"

// PodRefused is the API server's refusal of a Job's Pod (a quota, Pod
// Security, an admission policy), or "" while there is none. A Job has no
// condition for it: the Job controller retries the create on its own
// backoff until the Job's deadline and says why only in an Event, so the
// Events about the Job are read. A Job that has a Pod is judged by the Pod.
func PodRefused(job *batchv1.Job, pods []corev1.Pod, events []corev1.Event) string {
	if len(pods) > 0 {
		return ""
	}
	var latest *corev1.Event
	for i := range events {
		e := &events[i]
		if e.InvolvedObject.UID != job.UID || e.Reason != FailedCreateReason || e.Type != corev1.EventTypeWarning {
			continue
		}
		if latest == nil || EventTime(e).After(EventTime(latest)) {
			latest = e
		}
	}
	if latest == nil {
		return ""
	}
	return latest.Message
}

// EventTime is when an Event last happened, from whichever field the
// recorder filled in.
func EventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
