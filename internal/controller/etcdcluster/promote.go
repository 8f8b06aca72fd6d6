package etcdcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// Promotion: a learner becomes a voter only once etcd says its log caught
// up and its first boot is latched. Kept apart from members.go, which takes
// the pass's one membership step and calls these.

// promote makes a learner a voter once its Pod is ready. etcd itself refuses
// while the learner's log is behind, which is the signal to wait.
// promoteIfReady promotes a started learner once etcd agrees it has caught
// up; while it has not, the pass goes on to other steps.
func (r *Reconciler) promoteIfReady(ctx context.Context, s *scope, learner etcd.Member) (ctrl.Result, bool, error) {
	m := r.memberFor(s, learner)
	if m == nil || !s.podReady(m.Name) {
		return ctrl.Result{}, false, nil
	}
	if booted, err := r.bootLatched(ctx, m); err != nil || !booted {
		return ctrl.Result{}, false, err
	}
	s.promoteTried = true
	return r.promoteStep(ctx, s, learner)
}

func (r *Reconciler) promote(ctx context.Context, s *scope, learner etcd.Member) (ctrl.Result, error) {
	res, _, err := r.promoteStep(ctx, s, learner)
	return res, err
}

// promoteStep promotes a learner, or removes one no member owns; acted says
// whether it changed the membership.
func (r *Reconciler) promoteStep(ctx context.Context, s *scope, learner etcd.Member) (ctrl.Result, bool, error) {
	m := r.memberFor(s, learner)
	if m == nil {
		// A learner no EtcdMember accounts for can only be the remains of an
		// interrupted add whose member was deleted; it holds no data anyone
		// relies on, and it blocks further adds. The cache may simply not
		// have seen its member yet, so the API server has the last word.
		if owned, err := r.learnerOwned(ctx, s, learner); err != nil || owned {
			return ctrl.Result{RequeueAfter: requeueSoon}, false, err
		}
		ctrl.LoggerFrom(ctx).Info("Removing a learner no member owns", "memberID", learner.IDString())
		if _, _, err := r.withClient(ctx, s, func(c etcd.Client) (etcd.Member, etcd.MemberList, error) {
			l, err := c.MemberRemove(ctx, learner.ID)
			return etcd.Member{}, l, err
		}); err != nil && !etcd.IsMemberNotFound(err) {
			return ctrl.Result{}, true, fmt.Errorf("failed to remove orphan learner %s: %w", learner.IDString(), err)
		}
		r.event(s.cluster, corev1.EventTypeWarning, "OrphanLearnerRemoved", "RemoveMember",
			"Removed learner %s that no EtcdMember owns", learner.IDString())
		return ctrl.Result{RequeueAfter: requeueSoon}, true, nil
	}
	if !s.podReady(m.Name) || learner.Name == "" {
		s.setProgress(v1alpha1.ScalingUpReason, "waiting for learner %s to start", m.Name)
		return ctrl.Result{RequeueAfter: requeueUnreachable}, false, nil
	}
	if booted, err := r.bootLatched(ctx, m); err != nil || !booted {
		s.setProgress(v1alpha1.ScalingUpReason, "waiting for the first start of learner %s to be recorded", m.Name)
		return ctrl.Result{RequeueAfter: requeueLearnerSync}, false, err
	}
	s.setProgress(v1alpha1.PromotingLearnerReason, "promoting learner %s", m.Name)
	_, _, err := r.withClient(ctx, s, func(c etcd.Client) (etcd.Member, etcd.MemberList, error) {
		l, err := c.MemberPromote(ctx, learner.ID)
		return etcd.Member{}, l, err
	})
	switch {
	case etcd.IsLearnerNotReady(err):
		s.setProgress(v1alpha1.PromotingLearnerReason, "learner %s is catching up", m.Name)
		return ctrl.Result{RequeueAfter: requeueLearnerSync}, false, nil
	case etcd.IsUnhealthyCluster(err):
		return ctrl.Result{RequeueAfter: requeueEtcdRefused}, false, nil
	case err != nil:
		return ctrl.Result{}, true, fmt.Errorf("failed to promote learner %s: %w", m.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Promoted learner", "member", m.Name, "memberID", learner.IDString())
	r.event(s.cluster, corev1.EventTypeNormal, "MemberPromoted", "PromoteMember",
		"Promoted member %s (%s) to voter", m.Name, learner.IDString())
	// Nothing in Kubernetes changes on a promotion, so look again shortly to
	// record the new role and move on.
	return ctrl.Result{RequeueAfter: requeueSoon}, true, nil
}

// bootLatched: the member's first boot is recorded (status.firstReadyTime),
// read past the cache when the cache does not have it yet. Until it is, the
// member's startup ConfigMap still hands it the member list of its add, and
// it must not become a voter: a voter that lost its data dir would then
// rejoin under its old ID with an empty log, instead of failing loudly.
func (r *Reconciler) bootLatched(ctx context.Context, m *v1alpha1.EtcdMember) (bool, error) {
	if m.HasBooted() {
		return true, nil
	}
	live := &v1alpha1.EtcdMember{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(m), live); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return live.HasBooted(), nil
}

// learnerOwned: a member the API server has, live or leaving, accounts
// for the learner, by its latched ID or its recorded peer URL.
func (r *Reconciler) learnerOwned(ctx context.Context, s *scope, learner etcd.Member) (bool, error) {
	live, err := r.liveMembers(ctx, s)
	if err != nil {
		return false, err
	}
	for i := range live {
		m := &live[i]
		if m.Status.MemberID == learner.IDString() || contains(learner.PeerURLs, r.peerURL(m)) {
			return true, nil
		}
	}
	return false, nil
}
