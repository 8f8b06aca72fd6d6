package etcdcluster

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// syncMemberStatus copies etcd's view of each member (its ID and whether it
// votes) onto the EtcdMember, where the member controller turns the role into
// the Pod label the client Service selects. It writes only on change.
func (r *Reconciler) syncMemberStatus(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !s.etcd.usable() {
		return ctrl.Result{}, nil
	}
	for _, m := range s.members {
		em, ok := s.etcd.byPeerURL(r.peerURL(m))
		if !ok {
			// etcd does not list it (not yet added, or removed behind our
			// back): it must not receive client traffic.
			if m.Status.Role != "" {
				if err := r.patchMemberStatus(ctx, m, m.Status.MemberID, ""); err != nil {
					return ctrl.Result{}, err
				}
			}
			continue
		}
		role := v1alpha1.MemberRoleVoter
		if em.IsLearner {
			role = v1alpha1.MemberRoleLearner
		}
		if err := r.patchMemberStatus(ctx, m, em.IDString(), role); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// reconcileMembership takes at most one membership step per pass, in order of
// priority: finish a half-added member, promote a caught-up learner, remove a
// learner no member owns, then scale towards the target.
func (r *Reconciler) reconcileMembership(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.terminal != "" {
		return ctrl.Result{}, nil
	}
	if !s.cluster.ClusterFormed() {
		return r.reconcileBootstrap(ctx, s)
	}
	desired := s.desiredReplicas()
	if d := s.dormantMember(); d != nil {
		if desired > 0 {
			return r.wake(ctx, s, d)
		}
		return ctrl.Result{}, nil
	}
	if desired == 0 && len(s.members) == 1 && len(s.deleting) == 0 {
		return r.pause(ctx, s, s.members[0])
	}
	if !s.etcd.usable() {
		// Nothing may change without a quorum's answer; remediate only
		// records which members are broken and why it cannot act.
		if _, _, err := r.remediate(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		s.setProgress(v1alpha1.EtcdUnreachableReason, "%v", s.etcd.err)
		return ctrl.Result{RequeueAfter: requeueUnreachable}, nil
	}
	if len(s.deleting) > 0 {
		s.setProgress(v1alpha1.ScalingDownReason, "waiting for member %s to leave etcd", s.deleting[0].Name)
		return ctrl.Result{RequeueAfter: requeueQuorumWait}, nil
	}
	if p := s.pendingMember(); p != nil {
		return r.completeAdd(ctx, s, p)
	}
	if res, acted, err := r.remediate(ctx, s); acted || err != nil {
		return res, err
	}
	if acted, err := r.unfence(ctx, s); acted || err != nil {
		return ctrl.Result{}, err
	}
	// Scaling down goes before promotion: the member to remove is the
	// newest, which is the learner when one is stuck catching up.
	if len(s.members) > desired {
		return r.scaleDown(ctx, s)
	}
	if learners := s.etcd.learners(); len(learners) > 0 {
		return r.promote(ctx, s, learners[0])
	}
	if len(s.members) < desired {
		return r.scaleUp(ctx, s)
	}
	if notReady := r.notReadyMembers(s); len(notReady) > 0 {
		s.setProgress(v1alpha1.MembersNotReadyReason, "waiting for %s", strings.Join(notReady, ", "))
		return ctrl.Result{RequeueAfter: requeueUnreachable}, nil
	}
	return ctrl.Result{RequeueAfter: requeueSteadyState}, nil
}

// completeAdd finishes a member whose creation was interrupted. Its peer URL
// is a function of its name, so whether etcd already has it is a lookup, and
// the add is never issued twice.
func (r *Reconciler) completeAdd(ctx context.Context, s *scope, m *v1alpha1.EtcdMember) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("member", m.Name)
	url := r.peerURL(m)
	list := s.etcd.list
	if _, ok := s.etcd.byPeerURL(url); !ok {
		if notReady := r.notReadyMembers(s, m.Name); len(notReady) > 0 {
			s.setProgress(v1alpha1.ScalingUpReason, "waiting for %s before adding %s", strings.Join(notReady, ", "), m.Name)
			return ctrl.Result{RequeueAfter: requeueUnreachable}, nil
		}
		log.Info("Adding member to etcd as a learner", "peerURL", url)
		added, after, err := r.withClient(ctx, s, func(c etcd.Client) (etcd.Member, etcd.MemberList, error) {
			return c.MemberAddAsLearner(ctx, []string{url})
		})
		switch {
		case etcd.IsUnhealthyCluster(err), etcd.IsTooManyLearners(err), etcd.IsUnavailable(err):
			// etcd wants every voter connected for a while after a change,
			// or did not answer; the plan is still right, so try again soon.
			s.setProgress(v1alpha1.ScalingUpReason, "etcd deferred adding %s: %v", m.Name, err)
			return ctrl.Result{RequeueAfter: requeueEtcdRefused}, nil
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("failed to add member %s to etcd: %w", m.Name, err)
		}
		list = after
		r.event(s.cluster, corev1.EventTypeNormal, "MemberAdded", "AddLearner",
			"Added member %s to etcd as learner %s", m.Name, added.IDString())
	}
	s.setProgress(v1alpha1.ScalingUpReason, "starting learner %s", m.Name)
	return ctrl.Result{}, r.setInitialCluster(ctx, m, initialClusterFrom(list))
}

// initialClusterFrom renders etcd's authoritative member list as
// --initial-cluster. A member that has not started yet has no name in etcd;
// its name is the first label of its peer URL's host.
func initialClusterFrom(list etcd.MemberList) string {
	var entries []string
	for _, m := range list.Members {
		for _, u := range m.PeerURLs {
			name := m.Name
			if name == "" {
				name = memberNameFromPeerURL(u)
			}
			entries = append(entries, name+"="+u)
		}
	}
	sort.Strings(entries)
	return strings.Join(entries, ",")
}

func memberNameFromPeerURL(u string) string {
	host := u
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	}
	if i := strings.IndexAny(host, ".:/"); i >= 0 {
		host = host[:i]
	}
	return host
}

// promote makes a learner a voter once its Pod is ready. etcd itself refuses
// while the learner's log is behind, which is the signal to wait.
func (r *Reconciler) promote(ctx context.Context, s *scope, learner etcd.Member) (ctrl.Result, error) {
	m := r.memberFor(s, learner)
	if m == nil {
		// A learner no EtcdMember accounts for can only be the remains of an
		// interrupted add whose member was deleted; it holds no data anyone
		// relies on, and it blocks further adds.
		ctrl.LoggerFrom(ctx).Info("Removing a learner no member owns", "memberID", learner.IDString())
		if _, _, err := r.withClient(ctx, s, func(c etcd.Client) (etcd.Member, etcd.MemberList, error) {
			l, err := c.MemberRemove(ctx, learner.ID)
			return etcd.Member{}, l, err
		}); err != nil && !etcd.IsMemberNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("failed to remove orphan learner %s: %w", learner.IDString(), err)
		}
		r.event(s.cluster, corev1.EventTypeWarning, "OrphanLearnerRemoved", "RemoveMember",
			"Removed learner %s that no EtcdMember owns", learner.IDString())
		return ctrl.Result{RequeueAfter: requeueSoon}, nil
	}
	if !s.podReady(m.Name) || learner.Name == "" {
		s.setProgress(v1alpha1.ScalingUpReason, "waiting for learner %s to start", m.Name)
		return ctrl.Result{}, nil
	}
	s.setProgress(v1alpha1.PromotingLearnerReason, "promoting learner %s", m.Name)
	_, _, err := r.withClient(ctx, s, func(c etcd.Client) (etcd.Member, etcd.MemberList, error) {
		l, err := c.MemberPromote(ctx, learner.ID)
		return etcd.Member{}, l, err
	})
	switch {
	case etcd.IsLearnerNotReady(err):
		s.setProgress(v1alpha1.PromotingLearnerReason, "learner %s is catching up", m.Name)
		return ctrl.Result{RequeueAfter: requeueLearnerSync}, nil
	case etcd.IsUnhealthyCluster(err):
		return ctrl.Result{RequeueAfter: requeueEtcdRefused}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("failed to promote learner %s: %w", m.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Promoted learner", "member", m.Name, "memberID", learner.IDString())
	r.event(s.cluster, corev1.EventTypeNormal, "MemberPromoted", "PromoteMember",
		"Promoted member %s (%s) to voter", m.Name, learner.IDString())
	// Nothing in Kubernetes changes on a promotion, so look again shortly to
	// record the new role and move on.
	return ctrl.Result{RequeueAfter: requeueSoon}, nil
}

func (r *Reconciler) memberFor(s *scope, em etcd.Member) *v1alpha1.EtcdMember {
	for _, m := range s.members {
		for _, u := range em.PeerURLs {
			if u == r.peerURL(m) {
				return m
			}
		}
	}
	return nil
}

// notReadyMembers names the members, other than those excluded, that are not
// ready or whose etcd endpoint is unhealthy.
func (r *Reconciler) notReadyMembers(s *scope, exclude ...string) []string {
	var out []string
	for _, m := range s.members {
		if contains(exclude, m.Name) {
			continue
		}
		if !s.memberReady(m) {
			out = append(out, m.Name)
			continue
		}
		if em, ok := s.etcd.byPeerURL(r.peerURL(m)); ok && !s.etcd.health[em.ID].ok() {
			out = append(out, m.Name)
		}
	}
	return out
}

// withClient dials the members and runs one etcd call.
func (r *Reconciler) withClient(ctx context.Context, s *scope, call func(etcd.Client) (etcd.Member, etcd.MemberList, error)) (etcd.Member, etcd.MemberList, error) {
	c, err := r.Dialer.Dial(ctx, r.endpoints(s))
	if err != nil {
		return etcd.Member{}, etcd.MemberList{}, err
	}
	defer c.Close()
	return call(c)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
