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
	// DivergenceConfirmAfter is how long a disagreement that could be a lag
	// must persist before the member is replaced; it is fenced meanwhile.
	DivergenceConfirmAfter = 10 * time.Second
	// UnschedulableAfter is how long the scheduler may find no place for a
	// member's Pod before the member is reported as one that cannot be
	// scheduled. Shorter waits are routine: a volume being provisioned, or
	// the Pod it replaces still leaving the node.
	UnschedulableAfter = time.Minute
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
	// Divergence is how the member's own view of the cluster, when it
	// answers, disagrees with the quorum's.
	Divergence Diverging
	// DivergenceConfirmed: the disagreement is definitive, or has been seen
	// for at least DivergenceConfirmAfter; a passing lag is never worth a
	// member's data.
	DivergenceConfirmed bool
	// OthersHealthy: every other member is healthy, so a member that stands
	// out is the problem rather than a symptom of a wider outage.
	OthersHealthy bool
	// Node is the state of the node the member lives on.
	Node NodeState
	// NodeLostAfter is how long the node may be unavailable before the
	// member is replaced elsewhere.
	NodeLostAfter time.Duration
	// Learner: etcd lists the member as a learner. A learner that answers
	// slowly is catching up, which is what learners do.
	Learner bool
	// NeverStarted: etcd lists the member but it has never joined (etcd
	// names a member once it has), and it has not booted: it holds no data
	// to lose, so an empty data dir is only the start it has not made.
	NeverStarted bool
	// InMaintenance: the operator itself is working on the member (it is
	// being defragmented, or a rollout restarted it), so its silence, or
	// the restarts of a template that does not run, are expected: replacing
	// it would only repeat them. A recognised fatal cause still counts.
	InMaintenance bool
}

// Verdict is a decision to replace a member, or, with FenceOnly, to take it
// out of client traffic while a disagreement is confirmed, or, with Hold, a
// failure to report that a replacement would not cure.
type Verdict struct {
	Reason    Reason
	Detail    string
	FenceOnly bool
	Hold      bool
}

// Assess decides whether the member must be replaced.
//
// Exclusions come first: an OOM kill is a sizing problem that a replacement
// would only repeat (and the new member would start from a snapshot that
// needs the same memory), and a Pod already being deleted is in someone
// else's hands.
func Assess(f Facts, now time.Time) (Verdict, bool) {
	// A lost node comes first: its Pods stay Terminating or Pending for as
	// long as the node is gone, which the exclusions below would otherwise
	// read as someone else's business.
	if f.Node.Unavailable && now.Sub(f.Node.Since) >= f.NodeLostAfter {
		detail := f.Node.Why
		if !f.Node.Since.IsZero() {
			detail = fmt.Sprintf("%s, for %s", f.Node.Why, now.Sub(f.Node.Since).Round(time.Second))
		}
		return Verdict{Reason: NodeLost, Detail: detail}, true
	}
	if f.PodLost {
		return Verdict{Reason: PodLost, Detail: "the member's Pod and its tmpfs data are gone"}, true
	}
	if f.Pod == nil || !f.Pod.DeletionTimestamp.IsZero() {
		return Verdict{}, false
	}
	if since := UnschedulableSince(f.Pod); !since.IsZero() && now.Sub(since) >= UnschedulableAfter {
		// A replacement would be made from the same template and volume
		// class, and meet the same refusal: it is reported, and the rollout
		// that led to it, if one did, stops on it.
		return Verdict{Reason: Unschedulable, Hold: true, Detail: fmt.Sprintf("its Pod has not been scheduled for %s: %s",
			now.Sub(since).Round(time.Second), schedulerMessage(f.Pod))}, true
	}
	cs := containerStatus(f.Pod, f.Container)
	if cs == nil || oomKilled(cs) {
		return Verdict{}, false
	}
	if cs.Ready {
		if f.Divergence.Diverged() {
			return Verdict{Reason: Diverged, Detail: f.Divergence.Detail, FenceOnly: !f.DivergenceConfirmed}, true
		}
		return Verdict{}, false
	}
	// Only a failure that is still going on counts: a container that
	// crashed long ago and has run since is judged by how it runs now.
	if failingNow(cs, now) {
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t == nil {
				continue
			}
			reason, line, ok := ClassifyTermination(t.Message)
			switch {
			case !ok:
				continue
			case reason == DataDirLost && f.NeverStarted:
				// A joiner whose first start etcd refused (its member list
				// went stale while it waited, or no peer answered it): a new
				// member would ask the same way, and the kubelet's next
				// restart asks again with the list the operator keeps fresh.
				return Verdict{Reason: CannotJoin, Hold: true, Detail: fmt.Sprintf(
					"its first start failed, and it holds no data to lose (etcd exited with code %d: %s)", t.ExitCode, line)}, true
			}
			return Verdict{Reason: reason, Detail: fmt.Sprintf("etcd exited with code %d: %s", t.ExitCode, line)}, true
		}
		if cs.RestartCount >= CrashLoopRestarts && !f.InMaintenance {
			return Verdict{Reason: CrashLoop, Detail: fmt.Sprintf("not ready after %d restarts", cs.RestartCount)}, true
		}
	}
	if since, ok := notReadySince(f.Pod, cs); ok && f.OthersHealthy && now.Sub(since) >= UnresponsiveAfter {
		// Not ready this long, the member is out of client traffic already:
		// a disagreement needs no further confirmation.
		if f.Divergence.Diverged() {
			return Verdict{Reason: Diverged, Detail: f.Divergence.Detail}, true
		}
		if !f.EndpointHealthy && !f.Learner && !f.InMaintenance {
			return Verdict{Reason: Unresponsive, Detail: fmt.Sprintf("running but not ready for %s and its endpoint does not answer",
				now.Sub(since).Round(time.Second))}, true
		}
	}
	return Verdict{}, false
}

// failingNow: the container is down (terminated, or waiting to be
// restarted), or started again so recently that it is still coming up after
// its last failure.
func failingNow(cs *corev1.ContainerStatus, now time.Time) bool {
	switch {
	case cs.State.Terminated != nil, cs.State.Waiting != nil:
		return true
	case cs.State.Running != nil:
		return now.Sub(cs.State.Running.StartedAt.Time) < UnresponsiveAfter
	}
	return false
}

// notReadySince is when a running container was last seen to stop being
// ready: its start, or the Pod's Ready condition turning false after it, so
// that a member running for days and not ready for a second is not taken
// for one stuck since it started.
func notReadySince(p *corev1.Pod, cs *corev1.ContainerStatus) (time.Time, bool) {
	if cs.State.Running == nil {
		return time.Time{}, false
	}
	since := cs.State.Running.StartedAt.Time
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue && c.LastTransitionTime.After(since) {
			since = c.LastTransitionTime.Time
		}
	}
	return since, true
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

// schedulerMessage is why the scheduler could not place the Pod.
func schedulerMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return shorten(c.Message)
		}
	}
	return "no reason given"
}
