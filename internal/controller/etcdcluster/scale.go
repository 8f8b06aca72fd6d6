package etcdcluster

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/etcdversion"
	"github.com/quorumctl/etcd-operator/internal/maintenance"
	"github.com/quorumctl/etcd-operator/internal/quorum"
)

// scaleUp adds one member: it creates the EtcdMember, adds it to etcd as a
// learner and hands it etcd's member list, all in this pass when nothing
// interrupts. Every member that holds data must be ready first; a learner
// that has started and is ready counts, so from etcd 3.6 a second learner
// may join beside one that still learns (see addBeforePromoting).
func (r *Reconciler) scaleUp(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.versionRefused != nil {
		s.setProgress(v1alpha1.VersionChangeRefusedReason, "no member is added on a refused version: %s", s.versionRefused.Message)
		return ctrl.Result{RequeueAfter: requeueQuorumWait}, nil
	}
	if notReady := r.notReadyMembers(s); len(notReady) > 0 {
		s.setProgress(v1alpha1.ScalingUpReason, "waiting for %s before adding a member", strings.Join(notReady, ", "))
		return ctrl.Result{RequeueAfter: requeueUnreachable}, nil
	}
	// A member created moments ago may not be in the cache yet; creating
	// another would add two members at once.
	if fresh, err := r.cacheIsBehind(ctx, s); err != nil || fresh {
		return ctrl.Result{RequeueAfter: requeueSoon}, err
	}
	from := len(s.counted())
	m, err := r.createMember(ctx, s, newMember{template: s.cluster.Status.Observed.MemberTemplate})
	if err != nil {
		return ctrl.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("Scaling up", "member", m.Name, "from", from, "to", s.desiredReplicas())
	return r.completeAdd(ctx, s, m)
}

func (r *Reconciler) cacheIsBehind(ctx context.Context, s *scope) (bool, error) {
	live, err := r.liveMembers(ctx, s)
	if err != nil {
		return false, err
	}
	known := map[string]bool{}
	for _, m := range s.members {
		known[m.Name] = true
	}
	for _, m := range s.deleting {
		known[m.Name] = true
	}
	for _, m := range live {
		if !known[m.Name] {
			return true, nil
		}
	}
	return false, nil
}

// liveMembers lists the cluster's members from the API server itself, past
// the cache, for the decisions a stale read could make twice.
func (r *Reconciler) liveMembers(ctx context.Context, s *scope) ([]v1alpha1.EtcdMember, error) {
	var live v1alpha1.EtcdMemberList
	if err := r.APIReader.List(ctx, &live, client.InNamespace(s.cluster.Namespace),
		client.MatchingLabels{v1alpha1.ClusterLabel: s.cluster.Name}); err != nil {
		return nil, fmt.Errorf("failed to list EtcdMembers of %s: %w", s.cluster.Name, err)
	}
	out := live.Items[:0]
	for _, m := range live.Items {
		if isControlledBy(&m, s.cluster) {
			out = append(out, m)
		}
	}
	return out, nil
}

// scaleDown removes one member, the one whose loss costs least (see
// quorum.PickToRemove): a user who scales down to shed a broken member gets
// exactly that. Leadership moves away from it first, and the removal goes
// ahead only if the voters that remain keep a quorum of the smaller
// membership. The member's finalizer does the etcd-side removal.
func (r *Reconciler) scaleDown(ctx context.Context, s *scope) (ctrl.Result, error) {
	broken := map[string]bool{}
	for _, b := range s.broken {
		broken[b.member.Name] = true
	}
	counted := s.counted()
	candidates := make([]quorum.Candidate, 0, len(counted))
	for _, m := range counted {
		em, listed := s.inEtcd(m)
		candidates = append(candidates, quorum.Candidate{
			Name: m.Name, Created: m.CreationTimestamp.Time,
			HoldsNothing: s.holdsNothing(m), Broken: broken[m.Name],
			Learner: listed && em.IsLearner, Ready: s.memberReady(m),
		})
	}
	pick, _ := quorum.PickToRemove(candidates)
	var victim *v1alpha1.EtcdMember
	for _, m := range counted {
		if m.Name == pick.Name {
			victim = m
		}
	}
	// A healthy member goes only while every other member is ready: never
	// take a working member while another is restarting. One that is down
	// itself (a learner that never caught up, a member of a lost node) goes
	// whatever else is down; the quorum gate below is what protects then.
	var waitFor []string
	if s.memberReady(victim) {
		for _, n := range r.notReadyMembers(s, victim.Name) {
			if !broken[n] {
				waitFor = append(waitFor, n)
			}
		}
	}
	if len(waitFor) > 0 {
		s.setProgress(v1alpha1.ScalingDownReason, "waiting for %s before removing %s", strings.Join(waitFor, ", "), victim.Name)
		return ctrl.Result{RequeueAfter: requeueUnreachable}, nil
	}
	em, listed := s.inEtcd(victim)
	if listed && !em.IsLearner {
		if em.ID == s.etcd.leaderID() {
			return r.moveLeaderAway(ctx, s, victim, em)
		}
		selfHealthy := s.etcd.health[em.ID].ok() && !broken[victim.Name]
		healthyOthers := s.etcd.healthyVoters()
		if s.etcd.health[em.ID].ok() {
			healthyOthers--
		}
		voters := len(s.etcd.voters())
		if !quorum.RemovalAllowed(voters, healthyOthers, s.desiredReplicas(), selfHealthy) {
			s.setProgress(v1alpha1.WaitingForQuorumReason,
				"removing %s would leave %d healthy of %d voters, below quorum %d or a quorum of the target %d",
				victim.Name, healthyOthers, voters-1, quorum.Size(voters-1), s.desiredReplicas())
			return ctrl.Result{RequeueAfter: requeueQuorumWait}, nil
		}
	}
	ctrl.LoggerFrom(ctx).Info("Scaling down", "member", victim.Name, "from", len(counted), "to", s.desiredReplicas())
	if err := r.Delete(ctx, victim); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("failed to delete EtcdMember %s: %w", victim.Name, err)
	}
	r.event(s.cluster, corev1.EventTypeNormal, "MemberRemoving", "RemoveMember",
		"Removing member %s to scale from %d to %d", victim.Name, len(counted), s.desiredReplicas())
	s.setProgress(v1alpha1.ScalingDownReason, "removing member %s", victim.Name)
	return ctrl.Result{}, nil
}

// moveLeaderAway hands leadership to the healthy voter with the highest raft
// index, so removing the leader never costs an election under load.
func (r *Reconciler) moveLeaderAway(ctx context.Context, s *scope, victim *v1alpha1.EtcdMember, leader etcd.Member) (ctrl.Result, error) {
	var target etcd.Member
	var best uint64
	for _, v := range s.etcd.voters() {
		h := s.etcd.health[v.ID]
		if v.ID == leader.ID || !h.ok() {
			continue
		}
		if target.ID == 0 || h.status.RaftIndex > best {
			target, best = v, h.status.RaftIndex
		}
	}
	return r.moveLeaderTo(ctx, s, victim, leader, target, "before removing it")
}

// moveLeaderTo hands leadership from victim to target.
func (r *Reconciler) moveLeaderTo(ctx context.Context, s *scope, victim *v1alpha1.EtcdMember, leader, target etcd.Member, why string) (ctrl.Result, error) {
	if target.ID == 0 || target.ID == leader.ID {
		s.setProgress(v1alpha1.WaitingForQuorumReason, "no healthy voter to take leadership from %s", victim.Name)
		return ctrl.Result{RequeueAfter: requeueQuorumWait}, nil
	}
	s.setProgress(v1alpha1.ScalingDownReason, "moving leadership from %s %s", victim.Name, why)
	_, _, err := r.withClient(ctx, s, func(c etcd.Client) (etcd.Member, etcd.MemberList, error) {
		return etcd.Member{}, etcd.MemberList{}, c.MoveLeader(ctx, target.ID)
	})
	if etcd.IsTransfereeNotReady(err) {
		// Typically a member promoted a moment ago that has not applied its
		// promotion yet; it will on the leader's next message.
		s.setProgress(v1alpha1.ScalingDownReason, "waiting for %s to take leadership from %s %s: %v", target.Name, victim.Name, why, err)
		return ctrl.Result{RequeueAfter: requeueSoon}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to move leadership from %s: %w", victim.Name, err)
	}
	r.event(s.cluster, corev1.EventTypeNormal, "LeaderMoved", "MoveLeader",
		"Moved leadership from %s to %s %s", victim.Name, target.Name, why)
	return ctrl.Result{RequeueAfter: requeueSoon}, nil
}

// addBeforePromoting: a plain scale-up adds its next learner before the
// started learners are promoted (quorum.AddBeforePromoting,
// docs/design/0027). Only when nothing else is under way: no member
// leaving, no replacement to add, no rollout due, no maintenance under way
// or due, the version accepted, every member that holds data ready, and
// every learner started and accounted for by a member.
func (r *Reconciler) addBeforePromoting(s *scope) bool {
	learners := s.etcd.learners()
	started := make([]bool, 0, len(learners))
	for _, l := range learners {
		m := r.memberFor(s, l)
		started = append(started, m != nil && l.Name != "" && !isDeleting(s.deleting, m.Name))
	}
	maint := s.maint.running != nil || s.maint.finished || s.maint.interrupted != "" ||
		s.maint.decided && s.maint.decision.Action != maintenance.None
	canAdd := s.versionRefused == nil && len(s.deleting) == 0 && s.pendingReplacement() == nil &&
		s.outdatedCount() == 0 && !maint && len(r.notReadyMembers(s)) == 0
	// A member created for the next add and waiting for the learner's start
	// is what the add is for: it is not counted as there yet.
	counted := 0
	for _, m := range s.counted() {
		if _, listed := s.inEtcd(m); listed || !m.Pending() {
			counted++
		}
	}
	return quorum.AddBeforePromoting(started, counted, s.desiredReplicas(), s.maxLearners(), canAdd)
}

// maxLearners is how many learners etcd lets join at once: 2 from etcd 3.6
// on (the operator sets --max-learners), 1 while any member runs 3.5.
func (s *scope) maxLearners() int {
	for _, m := range s.counted() {
		if v, err := etcdversion.Parse(m.Spec.Version); err != nil || v.Minor < 6 {
			return 1
		}
	}
	return pod.MaxLearners
}

// addBeforePromotion takes a plain scale-up's next add ahead of promoting a
// learner (see addBeforePromoting): etcd takes the add now, and after the
// promotion it would refuse it for 5 s. acted is false when the add was not
// due, or when etcd refused it and nothing changed, so that the pass goes
// on to the promotion.
func (r *Reconciler) addBeforePromotion(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	if !r.addBeforePromoting(s) {
		return ctrl.Result{}, false, nil
	}
	var res ctrl.Result
	var err error
	if p := s.pendingMember(); p != nil {
		res, err = r.completeAdd(ctx, s, p)
	} else {
		res, err = r.scaleUp(ctx, s)
	}
	if err != nil || !s.addRefused {
		return res, true, err
	}
	// etcd refused the add and nothing changed: fewer learner slots
	// than its version gives (a member started with a lower
	// --max-learners), or its health window. The promotion must not
	// wait on that: it goes first, as it did before, and as on 3.5.
	return ctrl.Result{}, false, nil
}

// reconcileSize is the end of the membership step, once nothing is broken,
// leaving, rolling or under maintenance: bring the number of members to
// desired (scale down first, then finish a plain pending add, then scale
// up), promote learners, and otherwise wait for members not ready yet.
// It is kept apart from reconcileMembership because every branch here is
// about the cluster's size, and each returns the pass's one step.
func (r *Reconciler) reconcileSize(ctx context.Context, s *scope, desired int) (ctrl.Result, error) {
	if len(s.counted()) > desired {
		return r.scaleDown(ctx, s)
	}
	if p := s.pendingMember(); p != nil {
		return r.completeAdd(ctx, s, p)
	}
	// Learners join side by side where etcd allows it: another can be added
	// while one catches up, and each is promoted as soon as it is ready.
	learners := s.etcd.learners()
	if len(s.counted()) < desired && len(learners) < s.maxLearners() {
		return r.scaleUp(ctx, s)
	}
	if len(learners) > 0 {
		if s.promoteTried {
			// Asked once already this pass; etcd said not yet.
			return ctrl.Result{RequeueAfter: requeueLearnerSync}, nil
		}
		return r.promote(ctx, s, learners[0])
	}
	if notReady := r.notReadyMembers(s); len(notReady) > 0 {
		// A rollout that waits on the same members has said so already,
		// and says more.
		if s.progress.reason == "" {
			s.setProgress(v1alpha1.MembersNotReadyReason, "waiting for %s", strings.Join(notReady, ", "))
		}
		return ctrl.Result{RequeueAfter: requeueUnreachable}, nil
	}
	return ctrl.Result{RequeueAfter: requeueSteadyState}, nil
}
