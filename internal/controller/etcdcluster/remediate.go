package etcdcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
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
	var broken []brokenMember
	for _, m := range s.members {
		if m.Pending() || m.Spec.Dormant {
			continue
		}
		em, listed := s.etcd.byPeerURL(s.peerURLs[m.Name])
		facts := remediation.Facts{
			Pod:           s.pods[m.Name],
			Container:     pod.ContainerName,
			PodLost:       m.LostPod(s.pods[m.Name]),
			OthersHealthy: s.othersHealthy(m.Name),
		}
		if listed {
			h := s.etcd.health[em.ID]
			facts.EndpointHealthy = h.ok()
			var status *etcd.EndpointStatus
			if h.err == nil {
				status = &h.status
			}
			own := s.etcd.ownLists[em.ID]
			// Status alone is read every pass; the member's own list only
			// when a view check is due.
			fullCheck := status != nil && own != nil
			facts.Divergence = remediation.Divergence(q, status, own)
			facts.DivergenceConfirmed = r.divergenceConfirmed(m, facts.Divergence, fullCheck, s.now)
			if !facts.Divergence.Diverged() && fullCheck && m.Status.Fenced != "" && m.DeletionTimestamp.IsZero() {
				// A full check agrees again: it was a lag after all.
				s.unfence = append(s.unfence, m)
			}
		}
		if v, act := remediation.Assess(facts, s.now); act {
			broken = append(broken, brokenMember{member: m, verdict: v, voter: listed && !em.IsLearner, id: em.ID})
		}
	}
	return broken
}

// remediate replaces one broken member, if the quorum gate allows: the voters
// that remain must keep a quorum of the smaller membership, counted from the
// health each member's own endpoint reported this pass. The member's
// finalizer checks the same before MemberRemove; the gap is then filled by a
// fresh member, with a new name and member ID, joining as a learner.
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
		if !quorum.CanRemoveVoter(voters, healthyOthers) || !s.etcd.usable() {
			s.remediationHeld = fmt.Sprintf("member %s is broken (%s: %s) but replacing it would leave %d healthy of %d voters, below quorum %d",
				b.member.Name, b.verdict.Reason, b.verdict.Detail, healthyOthers, voters-1, quorum.Size(voters-1))
			log.Info("Quorum gate holds a replacement", "healthyOthers", healthyOthers, "voters", voters)
			return ctrl.Result{RequeueAfter: requeueQuorumWait}, true, nil
		}
	}
	log.Info("Replacing broken member", "detail", b.verdict.Detail)
	r.event(s.cluster, corev1.EventTypeWarning, string(b.verdict.Reason), "ReplaceMember",
		"Replacing member %s: %s", b.member.Name, b.verdict.Detail)
	if err := r.Delete(ctx, b.member); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, true, fmt.Errorf("failed to delete broken EtcdMember %s: %w", b.member.Name, err)
	}
	metrics.MemberReplaced(s.cluster.Namespace, s.cluster.Name, string(b.member.UID), string(b.verdict.Reason))
	s.setProgress(v1alpha1.ReplacingMemberReason, "replacing %s (%s)", b.member.Name, b.verdict.Reason)
	return ctrl.Result{}, true, nil
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

// divergenceConfirmed says whether a disagreement may cost the member its
// data: it is definitive, or it was first seen at least
// DivergenceConfirmAfter ago. The first sighting is kept in memory only; an
// operator restart starts the wait again, which errs on the side of keeping
// the member. A full check (status and member list) that agrees forgets it.
func (r *Reconciler) divergenceConfirmed(m *v1alpha1.EtcdMember, d remediation.Diverging, fullCheck bool, now time.Time) bool {
	// The UID tells a re-created member of the same name from the old one.
	key := m.Namespace + "/" + m.Name + "/" + string(m.UID)
	if !d.Diverged() {
		if fullCheck {
			r.divergedSince.Delete(key)
		}
		return false
	}
	if d.Definitive {
		return true
	}
	first, _ := r.divergedSince.LoadOrStore(key, now)
	return now.Sub(first.(time.Time)) >= remediation.DivergenceConfirmAfter
}

// setFenced records why a member is out of client traffic; "" lets it back
// in. The member controller turns it into the Pod's role label.
func (r *Reconciler) setFenced(ctx context.Context, m *v1alpha1.EtcdMember, why string) error {
	patch := client.MergeFrom(m.DeepCopy())
	m.Status.Fenced = why
	if err := r.Status().Patch(ctx, m, patch); err != nil {
		return fmt.Errorf("failed to set status.fenced of EtcdMember %s: %w", m.Name, err)
	}
	return nil
}

// othersHealthy: every member but the named one is ready and answering.
func (s *scope) othersHealthy(name string) bool {
	for _, m := range s.members {
		if m.Name == name {
			continue
		}
		em, ok := s.etcd.byPeerURL(s.peerURLs[m.Name])
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
