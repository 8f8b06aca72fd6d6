package etcdcluster

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/recovery"
	"github.com/quorumctl/etcd-operator/internal/remediation"
)

// assessQuorum sorts the voters into those that answer and those that do
// not, with self-heal's verdict on each, to tell a quorum lost for good from
// one only out of reach (docs/design/0011). It reads only the scope.
func (r *Reconciler) assessQuorum(s *scope) recovery.Loss {
	if !s.cluster.ClusterFormed() {
		return recovery.Loss{}
	}
	verdicts := map[string]remediation.Verdict{}
	for _, b := range s.broken {
		verdicts[b.member.Name] = b.verdict
	}
	var members []recovery.Member
	if s.etcd.listed() {
		for _, em := range s.etcd.voters() {
			rm := recovery.Member{ID: em.ID, Voter: true}
			if m := r.memberFor(s, em); m != nil {
				rm.Name = m.Name
				if v, ok := verdicts[m.Name]; ok {
					rm.Verdict, rm.Detail = v.Reason, v.Detail
				}
			}
			if h := s.etcd.health[em.ID]; h.err == nil {
				rm.Answered, rm.Status = true, h.status
			} else if rep, ok := s.etcd.reports[rm.Name]; ok && rep.MemberID == em.ID {
				// A report is only the member's if it carries the ID etcd
				// lists for it: the metrics say nothing of the cluster ID.
				rm.Report(rep, "")
			}
			members = append(members, rm)
		}
		return recovery.Assess(members)
	}
	// Nothing answered, not even serializably: the voters are those the
	// last authoritative list named, and each is judged from its Pod and
	// node alone, which is all self-heal has to go on without etcd.
	for _, m := range s.members {
		if m.Status.Role != v1alpha1.MemberRoleVoter || m.Spec.Dormant {
			continue
		}
		rm := recovery.Member{Name: m.Name, Voter: true}
		if id, err := etcd.ParseMemberID(m.Status.MemberID); err == nil {
			rm.ID = id
			if rep, ok := s.etcd.reports[m.Name]; ok && rep.MemberID == id {
				rm.Report(rep, "")
			}
		}
		if v, ok := s.offlineVerdict(m); ok && !rm.Reported {
			rm.Verdict, rm.Detail = v.Reason, v.Detail
		}
		members = append(members, rm)
	}
	return recovery.Assess(members)
}

// offlineVerdict is self-heal's judgement of a member from what Kubernetes
// shows of it: its Pod's termination, its node, a lost Memory Pod.
func (s *scope) offlineVerdict(m *v1alpha1.EtcdMember) (remediation.Verdict, bool) {
	p := s.pods[m.Name]
	node := s.nodeOf(m)
	return remediation.Assess(remediation.Facts{
		Pod:           p,
		Container:     pod.ContainerName,
		PodLost:       m.LostPod(p),
		Node:          remediation.Node(node, s.nodes[node], podRunningOn(p, node), remediation.UnschedulableSince(p), s.heard[node]),
		NodeLostAfter: s.cluster.Spec.SelfHeal.NodeLostAfter(),
	}, s.now)
}

// quorumLossStatus renders a loss for status.quorumLoss, carrying forward
// when it was first seen lost for good.
func quorumLossStatus(s *scope, l recovery.Loss) *v1alpha1.QuorumLoss {
	out := &v1alpha1.QuorumLoss{Voters: int32(l.Voters), Survivors: recovery.Reports(l.Survivors)}
	for _, m := range l.Missing {
		g := v1alpha1.GoneMember{Name: m.Name, Reason: string(m.Verdict), Detail: m.Detail}
		if m.ID != 0 {
			g.ID = etcd.FormatMemberID(m.ID)
		}
		if g.Name == "" {
			g.Name = g.ID
		}
		out.Gone = append(out.Gone, g)
	}
	if l.ForGood() || s.cluster.Status.Recovery.Active() {
		if was := s.cluster.Status.QuorumLoss; was != nil && was.LostAt != nil {
			out.LostAt = was.LostAt.DeepCopy()
		} else {
			out.LostAt = timePtr(s.now)
		}
	}
	return out
}

// quorumLostMessage adds what to do to the description of a loss.
func quorumLostMessage(s *scope, l recovery.Loss) string {
	if l.ForGood() {
		return fmt.Sprintf("%s. The quorum cannot come back by itself: recover with an EtcdRecovery (kubectl etcd recover %s --from-survivor, or --from-snapshot); see docs/disaster-recovery.md",
			l.Describe(), s.cluster.Name)
	}
	return fmt.Sprintf("%s. Waiting for them to answer again, or for self-heal to judge them gone", l.Describe())
}

func timePtr(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}

// announceQuorumLost records a Warning Event when the quorum is first seen
// lost for good, once per loss rather than on every pass that finds it so.
func (r *Reconciler) announceQuorumLost(before, after *v1alpha1.EtcdCluster) {
	now := meta.FindStatusCondition(after.Status.Conditions, v1alpha1.QuorumLostCondition)
	if now == nil || now.Status != metav1.ConditionTrue || now.Reason != v1alpha1.MembersGoneReason {
		return
	}
	if was := meta.FindStatusCondition(before.Status.Conditions, v1alpha1.QuorumLostCondition); was != nil && was.Status == metav1.ConditionTrue {
		return
	}
	r.event(after, corev1.EventTypeWarning, v1alpha1.QuorumLostCondition, "DetectQuorumLoss", "%s", now.Message)
}
