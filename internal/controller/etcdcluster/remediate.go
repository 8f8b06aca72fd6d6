package etcdcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/memberstatus"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/metrics"
	"github.com/quorumctl/etcd-operator/internal/quorum"
	"github.com/quorumctl/etcd-operator/internal/remediation"
)

// brokenMember is a member judged beyond restarting this pass.
type brokenMember struct {
	member  *v1alpha1.EtcdMember
	verdict remediation.Verdict
	// voter is true when etcd lists the member as a voter.
	voter bool
	id    uint64
}

// assessMembers applies the self-heal triggers to every member. It runs only
// on a formed cluster whose membership etcd answered for: during bootstrap a
// failing seed is a bootstrap failure, not a member to replace.
func (r *Reconciler) assessMembers(s *scope) []brokenMember {
	if !s.cluster.ClusterFormed() || !s.etcd.listed() {
		return nil
	}
	q := s.quorumView()
	mm := r.memos.get(s.cluster)
	live := map[string]bool{}
	var broken []brokenMember
	for _, m := range s.members {
		live[memberKey(m)] = true
		if m.Pending() || m.Spec.Dormant {
			continue
		}
		p := s.pods[m.Name]
		node := s.nodeOf(m)
		facts := remediation.Facts{
			Pod:           p,
			Container:     pod.ContainerName,
			PodLost:       m.LostPod(p),
			OthersHealthy: s.othersHealthy(m.Name),
			Node:          remediation.Node(node, s.nodes[node], podRunningOn(p, node), remediation.UnschedulableSince(p), s.heard[node]),
			NodeLostAfter: s.cluster.Spec.SelfHeal.NodeLostAfter(),
			// A rollout restarted it and it has not been healthy since, or
			// it is being defragmented.
			InMaintenance: m.Status.RolledAt != nil || r.inMaintenance(s, m),
		}
		em, listed := s.inEtcd(m)
		if listed {
			facts.Learner = em.IsLearner
			facts.NeverStarted = em.Name == "" && !m.HasBooted()
			h := s.etcd.health[em.ID]
			facts.EndpointHealthy = h.ok()
			var status *etcd.EndpointStatus
			if h.err == nil {
				status = &h.status
			}
			// Status is read every pass; the member's own list only when a
			// view check is due.
			own := s.etcd.ownLists[em.ID]
			facts.Divergence = remediation.Divergence(q, status, own)
			facts.DivergenceConfirmed = mm.confirm(m, facts.Divergence, remediation.Observed{Status: status != nil, Members: own != nil}, s.now)
			if !facts.Divergence.Diverged() && status != nil && own != nil && m.Status.Fenced != "" {
				// A full check agrees again: it was a lag after all.
				s.unfence = append(s.unfence, m)
			}
		}
		v, act := remediation.Assess(facts, s.now)
		switch {
		case act && v.Hold && p != nil && pod.Leaving(m, p):
			// The Pod the verdict is about is being re-created from a newer
			// spec: its successor is judged on its own.
		case act && v.Hold:
			s.held = append(s.held, brokenMember{member: m, verdict: v, voter: listed && !em.IsLearner, id: em.ID})
		case act:
			broken = append(broken, brokenMember{member: m, verdict: v, voter: listed && !em.IsLearner, id: em.ID})
		}
	}
	mm.keepOnly(live)
	return broken
}

func podRunningOn(p *corev1.Pod, node string) bool {
	return p != nil && p.DeletionTimestamp.IsZero() && p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning
}

// remediate replaces one broken member, if the quorum gate allows: the voters
// that remain must keep a quorum of the smaller membership, counted from the
// health each member's own endpoint reported this pass. It runs in every
// state of a formed cluster (members being added, deleted or promoted, a
// missed deadline, a failing phase), because waiting for any of those to
// finish first can wait on the broken member itself.
//
// The replacement is created first, with the broken member's own template
// and spec.replaces naming it, and joins once the broken member has left
// etcd: self-heal restores what was there, whatever the spec says now, so a
// bad pending edit (a nodeSelector that matches nothing, say) cannot make a
// replacement unschedulable. Template changes reach members through
// rollouts. When the target has fewer members than the cluster, the broken
// member is simply removed.
func (r *Reconciler) remediate(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	if len(s.broken) == 0 {
		return ctrl.Result{}, false, nil
	}
	b := s.broken[0]
	log := ctrl.LoggerFrom(ctx).WithValues("member", b.member.Name, "reason", b.verdict.Reason)
	if b.verdict.Reason == remediation.Diverged && b.member.Status.Fenced == "" {
		// Cut client traffic first: the label goes at once, the removal may
		// have to wait for the quorum gate or for the disagreement to last.
		log.Info("Fencing member whose view disagrees with the quorum's", "detail", b.verdict.Detail)
		r.event(s.cluster, corev1.EventTypeWarning, string(b.verdict.Reason), "FenceMember",
			"Fencing member %s: %s", b.member.Name, b.verdict.Detail)
		if err := r.setFenced(ctx, b.member, b.verdict.Detail); err != nil {
			return ctrl.Result{}, true, err
		}
	}
	if b.verdict.FenceOnly {
		return ctrl.Result{RequeueAfter: remediation.DivergenceConfirmAfter / 2}, true, nil
	}
	if b.voter || !s.etcd.usable() {
		voters := len(s.etcd.voters())
		healthyOthers := s.etcd.healthyVoters()
		if s.etcd.health[b.id].ok() {
			healthyOthers--
		}
		if !s.etcd.usable() || !quorum.RemovalAllowed(voters, healthyOthers, s.desiredReplicas(), false) {
			s.remediationHeld = fmt.Sprintf("member %s is broken (%s: %s) but replacing it would leave %d healthy of %d voters, below quorum %d",
				b.member.Name, b.verdict.Reason, b.verdict.Detail, healthyOthers, voters-1, quorum.Size(voters-1))
			log.Info("Quorum gate holds a replacement", "healthyOthers", healthyOthers, "voters", voters)
			return ctrl.Result{RequeueAfter: requeueQuorumWait}, true, nil
		}
	}
	replace := len(s.counted()) <= s.desiredReplicas()
	if replace && s.replacedBy[b.member.Name] == nil {
		// The cache can trail the replacement an earlier pass created; a
		// second one would add two members for one.
		if exists, err := r.replacementExists(ctx, s, b.member.Name); err != nil || exists {
			return ctrl.Result{RequeueAfter: requeueSoon}, true, err
		}
		y, err := r.createMember(ctx, s, memberFrom(b.member))
		if err != nil {
			return ctrl.Result{}, true, err
		}
		s.replacedBy[b.member.Name] = y
		log.Info("Created replacement member", "replacement", y.Name)
	}
	log.Info("Replacing broken member", "detail", b.verdict.Detail, "withReplacement", replace)
	note := "Replacing member %s: %s"
	if !replace {
		note = "Removing member %s without a replacement (the target has fewer members): %s"
	}
	r.event(s.cluster, corev1.EventTypeWarning, string(b.verdict.Reason), "ReplaceMember", note, b.member.Name, b.verdict.Detail)
	if err := r.Delete(ctx, b.member); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, true, fmt.Errorf("failed to delete broken EtcdMember %s: %w", b.member.Name, err)
	}
	metrics.MemberReplaced(s.cluster.Namespace, s.cluster.Name, string(b.member.UID), string(b.verdict.Reason))
	s.setProgress(v1alpha1.ReplacingMemberReason, "replacing %s (%s)", b.member.Name, b.verdict.Reason)
	return ctrl.Result{}, true, nil
}

// replacementExists asks the API server itself whether a live member
// replaces the named one.
func (r *Reconciler) replacementExists(ctx context.Context, s *scope, name string) (bool, error) {
	live, err := r.liveMembers(ctx, s)
	if err != nil {
		return false, err
	}
	for _, m := range live {
		if m.Spec.Replaces == name && m.DeletionTimestamp.IsZero() {
			return true, nil
		}
	}
	return false, nil
}

// unfence returns a member to client traffic once a full check finds its view
// agrees with the quorum's again, a disagreement that was not confirmed.
func (r *Reconciler) unfence(ctx context.Context, s *scope) (bool, error) {
	if len(s.unfence) == 0 {
		return false, nil
	}
	m := s.unfence[0]
	ctrl.LoggerFrom(ctx).Info("Unfencing member whose view agrees with the quorum's again", "member", m.Name, "was", m.Status.Fenced)
	r.event(s.cluster, corev1.EventTypeNormal, "Unfenced", "UnfenceMember",
		"Member %s agrees with the quorum again (was: %s)", m.Name, m.Status.Fenced)
	return true, r.setFenced(ctx, m, "")
}

// setFenced records why a member is out of client traffic; "" lets it back
// in. The member controller turns it into the Pod's role label.
func (r *Reconciler) setFenced(ctx context.Context, m *v1alpha1.EtcdMember, why string) error {
	m.Status.Fenced = why
	if err := memberstatus.Apply(ctx, r.Client, m, memberstatus.Fence); err != nil {
		return fmt.Errorf("failed to set status.fenced of EtcdMember %s: %w", m.Name, err)
	}
	return nil
}

// othersHealthy: every other voter is ready and answering, so a member that
// stands out is the problem rather than a symptom of a wider outage.
// Learners do not count: one catching up, or never started, says nothing
// about the network the voters share.
func (s *scope) othersHealthy(name string) bool {
	for _, m := range s.members {
		em, ok := s.inEtcd(m)
		if m.Name == name || (ok && em.IsLearner) || s.holdsNothing(m) {
			continue
		}
		if !ok || !s.podReady(m.Name) || !s.etcd.health[em.ID].ok() {
			return false
		}
	}
	return true
}

func (s *scope) quorumView() remediation.QuorumView {
	q := remediation.QuorumView{ClusterID: s.etcd.list.ClusterID}
	var statuses []etcd.EndpointStatus
	for _, m := range s.etcd.list.Members {
		q.Members = append(q.Members, m.ID)
		if h := s.etcd.health[m.ID]; h.err == nil && !m.IsLearner {
			statuses = append(statuses, h.status)
		}
	}
	q.LeaderID, q.LeaderTerm = remediation.QuorumLeader(len(s.etcd.voters()), statuses)
	return q
}
