package remediation

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Thresholds of the triggers that have no recognised cause to go on.
const (
	// CrashLoopRestarts is how many restarts of an unexplained failure make
	// a crash loop.
	CrashLoopRestarts = 5
	// UnresponsiveAfter is how long a member may stay not ready, without
	// restarting, before an unanswering endpoint counts as broken.
	UnresponsiveAfter = 30 * time.Second
)

// Facts is what a pass observed about one member.
type Facts struct {
	// Pod is the member's Pod; nil when it does not exist.
	Pod *corev1.Pod
	// Container is the name of the etcd container.
	Container string
	// PodLost is true for a Memory member whose recorded Pod is gone.
	PodLost bool
	// EndpointHealthy: the member's own endpoint answered without errors.
	EndpointHealthy bool
	// Divergence is non-empty when the member answers but its view of the
	// cluster disagrees with the quorum's; it says how.
	Divergence string
	// OthersHealthy: every other member is healthy, so a member that stands
	// out is the problem rather than a symptom of a wider outage.
	OthersHealthy bool
}

// Verdict is a decision to replace a member.
type Verdict struct {
	Reason Reason
	Detail string
}

// Assess decides whether the member must be replaced.
//
// Exclusions come first: an OOM kill is a sizing problem that a replacement
// would only repeat (and the new member would start from a snapshot that
// needs the same memory), and a Pod already being deleted is in someone
// else's hands.
func Assess(f Facts, now time.Time) (Verdict, bool) {
	if f.PodLost {
		return Verdict{PodLost, "the member's Pod and its tmpfs data are gone"}, true
	}
	if f.Pod == nil || !f.Pod.DeletionTimestamp.IsZero() {
		return Verdict{}, false
	}
	cs := containerStatus(f.Pod, f.Container)
	if cs == nil || oomKilled(cs) {
		return Verdict{}, false
	}
	if cs.Ready {
		if f.Divergence != "" {
			return Verdict{Diverged, f.Divergence}, true
		}
		return Verdict{}, false
	}
	for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
		if t == nil {
			continue
		}
		if reason, line, ok := ClassifyTermination(t.Message); ok {
			return Verdict{reason, fmt.Sprintf("etcd exited with code %d: %s", t.ExitCode, line)}, true
		}
	}
	if cs.RestartCount >= CrashLoopRestarts {
		return Verdict{CrashLoop, fmt.Sprintf("not ready after %d restarts", cs.RestartCount)}, true
	}
	if f.OthersHealthy && cs.State.Running != nil && now.Sub(cs.State.Running.StartedAt.Time) >= UnresponsiveAfter {
		if f.Divergence != "" {
			return Verdict{Diverged, f.Divergence}, true
		}
		if !f.EndpointHealthy {
			return Verdict{Unresponsive, fmt.Sprintf("running but not ready for %s and its endpoint does not answer",
				now.Sub(cs.State.Running.StartedAt.Time).Round(time.Second))}, true
		}
	}
	return Verdict{}, false
}

func containerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func oomKilled(cs *corev1.ContainerStatus) bool {
	for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
		if t != nil && t.Reason == "OOMKilled" {
			return true
		}
	}
	return false
}
