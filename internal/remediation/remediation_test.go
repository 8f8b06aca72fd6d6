package remediation

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Fatal lines as etcd 3.6 wrote them in experiments (trimmed).
const (
	wipedUnderExisting = `{"level":"fatal","caller":"etcdmain/etcd.go:183","msg":"discovery failed","error":"cannot fetch cluster info from peer urls: could not retrieve cluster information from the given URLs"}`
	garbledWAL         = `{"level":"fatal","caller":"etcdmain/etcd.go:183","msg":"discovery failed","error":"proto: illegal wireType 7"}`
	garbledDB          = `{"level":"panic","caller":"backend/backend.go:205","msg":"failed to open database","path":"/var/lib/etcd/data/member/snap/db","error":"invalid database"}
panic: failed to open database`
	rebootstrapPanic = `{"level":"panic","msg":"failed to update; member unknown","member-id":"f5207f579a8ae3c4"}
panic: failed to update; member unknown`
	bboltPage = `{"level":"info","logger":"bbolt","msg":"Opening bbolt db (/var/lib/etcd/data/member/snap/db) successfully"}
panic: assertion failed: Page expected to be: 2, but self identifies as 16582906387662605088`
	staleJoiner = `{"level":"fatal","msg":"discovery failed","error":"error validating peerURLs {...}: member count is unequal"}`
	removed     = `{"level":"warn","msg":"the member has been permanently removed from the cluster"}`
)

func TestClassifyTermination(t *testing.T) {
	cases := []struct {
		name    string
		message string
		want    Reason
		ok      bool
	}{
		{"wiped data dir under existing", wipedUnderExisting, DataDirLost, true},
		{"garbled WAL", garbledWAL, DataCorrupt, true},
		{"garbled database", garbledDB, DataCorrupt, true},
		{"damaged database page", bboltPage, DataCorrupt, true},
		{"the last line decides", `{"level":"warn","msg":"failed to find remote peer in cluster"}
{"level":"info","msg":"the member has been permanently removed from the cluster"}
` + bboltPage, DataCorrupt, true},
		{"panic after a wrong re-bootstrap", rebootstrapPanic, Diverged, true},
		{"stale member list", staleJoiner, DataDirLost, true},
		{"removed from the cluster", removed, RemovedFromCluster, true},
		{"unknown failure", `{"level":"fatal","msg":"listen tcp :2379: bind: address already in use"}`, "", false},
		{"empty", "", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, line, ok := ClassifyTermination(tc.message)
			g.Expect(ok).To(Equal(tc.ok))
			g.Expect(got).To(Equal(tc.want))
			if ok {
				g.Expect(tc.message).To(ContainSubstring(line), "the evidence is a line of the message")
			}
		})
	}
}

var now = time.Unix(1_800_000_000, 0)

func pod(cs corev1.ContainerStatus) *corev1.Pod {
	cs.Name = "etcd"
	return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}}}
}

func terminated(msg, reason string) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{ExitCode: 1, Message: msg, Reason: reason}
}

var crashLoopBackOff = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}

// notReadyFor marks the Pod not ready since the given time before now.
func notReadyFor(p *corev1.Pod, d time.Duration) *corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-d)),
	})
	return p
}

func running(since time.Duration) corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-since))}}
}

func TestAssessFencesAnUnconfirmedDisagreementOnly(t *testing.T) {
	g := NewWithT(t)
	ready := pod(corev1.ContainerStatus{Ready: true, State: running(time.Hour)})
	v, act := Assess(Facts{Container: "etcd", Pod: ready, Divergence: Diverging{Detail: "its member list differs"}}, now)
	g.Expect(act).To(BeTrue())
	g.Expect(v.Reason).To(Equal(Diverged))
	g.Expect(v.FenceOnly).To(BeTrue(), "a possible lag is fenced, not yet replaced")
	v, _ = Assess(Facts{Container: "etcd", Pod: ready, Divergence: Diverging{Detail: "its member list differs"}, DivergenceConfirmed: true}, now)
	g.Expect(v.FenceOnly).To(BeFalse())
}

func TestAssess(t *testing.T) {
	deleting := pod(corev1.ContainerStatus{RestartCount: 9, LastTerminationState: corev1.ContainerState{Terminated: terminated(wipedUnderExisting, "Error")}})
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	cases := []struct {
		name  string
		facts Facts
		want  Reason
		act   bool
	}{
		{"healthy member", Facts{Pod: pod(corev1.ContainerStatus{Ready: true, State: running(time.Hour)}), EndpointHealthy: true, OthersHealthy: true}, "", false},
		{"first failure with a known cause",
			Facts{Pod: pod(corev1.ContainerStatus{RestartCount: 1, State: crashLoopBackOff, LastTerminationState: corev1.ContainerState{Terminated: terminated(wipedUnderExisting, "Error")}})},
			DataDirLost, true},
		{"restarted just now after a known cause",
			Facts{Pod: pod(corev1.ContainerStatus{RestartCount: 1, State: running(time.Second), LastTerminationState: corev1.ContainerState{Terminated: terminated(wipedUnderExisting, "Error")}})},
			DataDirLost, true},
		{"a known cause long ago, running since and briefly not ready",
			Facts{Pod: notReadyFor(pod(corev1.ContainerStatus{RestartCount: 1, State: running(time.Hour), LastTerminationState: corev1.ContainerState{Terminated: terminated(wipedUnderExisting, "Error")}}), time.Second), OthersHealthy: true},
			"", false},
		{"terminated right now with a known cause",
			Facts{Pod: pod(corev1.ContainerStatus{State: corev1.ContainerState{Terminated: terminated(garbledDB, "Error")}})},
			DataCorrupt, true},
		{"unknown cause, few restarts",
			Facts{Pod: pod(corev1.ContainerStatus{RestartCount: 2, State: crashLoopBackOff, LastTerminationState: corev1.ContainerState{Terminated: terminated("boom", "Error")}})},
			"", false},
		{"unknown cause, crash loop",
			Facts{Pod: pod(corev1.ContainerStatus{RestartCount: 5, State: crashLoopBackOff, LastTerminationState: corev1.ContainerState{Terminated: terminated("boom", "Error")}})},
			CrashLoop, true},
		{"many restarts long ago, running since and briefly not ready",
			Facts{Pod: notReadyFor(pod(corev1.ContainerStatus{RestartCount: 7, State: running(24 * time.Hour), LastTerminationState: corev1.ContainerState{Terminated: terminated("boom", "Error")}}), time.Second), OthersHealthy: true},
			"", false},
		{"OOM killed now is never replaced",
			Facts{Pod: pod(corev1.ContainerStatus{RestartCount: 12, State: corev1.ContainerState{Terminated: terminated("", "OOMKilled")}})},
			"", false},
		{"OOM killed last time is never replaced",
			Facts{Pod: pod(corev1.ContainerStatus{RestartCount: 12, LastTerminationState: corev1.ContainerState{Terminated: terminated(wipedUnderExisting, "OOMKilled")}})},
			"", false},
		{"pod being deleted is left alone", Facts{Pod: deleting}, "", false},
		{"no pod (being re-created)", Facts{}, "", false},
		{"memory pod lost", Facts{PodLost: true}, PodLost, true},
		{"ready but diverged, confirmed", Facts{Pod: pod(corev1.ContainerStatus{Ready: true, State: running(time.Minute)}), Divergence: Diverging{Detail: "lists 1 member, the quorum 3"}, DivergenceConfirmed: true}, Diverged, true},
		{"stuck, silent, others healthy",
			Facts{Pod: pod(corev1.ContainerStatus{State: running(2 * UnresponsiveAfter)}), OthersHealthy: true},
			Unresponsive, true},
		{"stuck but only briefly",
			Facts{Pod: pod(corev1.ContainerStatus{State: running(UnresponsiveAfter / 2)}), OthersHealthy: true},
			"", false},
		{"running for days, not ready and silent only briefly",
			Facts{Pod: notReadyFor(pod(corev1.ContainerStatus{State: running(48 * time.Hour)}), UnresponsiveAfter/2), OthersHealthy: true},
			"", false},
		{"running for days, not ready and silent for long",
			Facts{Pod: notReadyFor(pod(corev1.ContainerStatus{State: running(48 * time.Hour)}), 2*UnresponsiveAfter), OthersHealthy: true},
			Unresponsive, true},
		{"stuck while others are unhealthy too",
			Facts{Pod: pod(corev1.ContainerStatus{State: running(2 * UnresponsiveAfter)}), OthersHealthy: false},
			"", false},
		{"not ready, answering, nothing disagrees",
			Facts{Pod: pod(corev1.ContainerStatus{State: running(2 * UnresponsiveAfter)}), OthersHealthy: true, EndpointHealthy: true},
			"", false},
		{"not ready, answering, view disagrees",
			Facts{Pod: pod(corev1.ContainerStatus{State: running(2 * UnresponsiveAfter)}), OthersHealthy: true, EndpointHealthy: true, Divergence: Diverging{Detail: "its member list differs"}},
			Diverged, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tc.facts.Container = "etcd"
			v, act := Assess(tc.facts, now)
			g.Expect(act).To(Equal(tc.act))
			g.Expect(v.Reason).To(Equal(tc.want))
			g.Expect(v.FenceOnly).To(BeFalse())
			if act {
				g.Expect(v.Detail).NotTo(BeEmpty())
			}
		})
	}
}
