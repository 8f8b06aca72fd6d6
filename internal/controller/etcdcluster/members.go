package etcdcluster

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/quorum"
	"github.com/quorumctl/etcd-operator/internal/remediation"
)

// syncMemberStatus copies etcd's view of each member (its ID and whether it
// votes) onto the EtcdMember, where the member controller turns the role into
// the Pod label the client Service selects. It writes only on change.
func (r *Reconciler) syncMemberStatus(ctx context.Context, s *scope) (ctrl.Result, error) {
	if err := r.recordURLs(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if !s.etcd.usable() {
		return ctrl.Result{}, nil
	}
	for _, m := range s.members {
		em, ok := s.inEtcd(m)
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

// recordURLs writes the peer and client URLs into members created before
// they were recorded at creation. A member etcd knows by its latched ID gets
// the URLs etcd has for it, which are right whatever the operator's
// settings are now; any other gets the ones its name gives.
func (r *Reconciler) recordURLs(ctx context.Context, s *scope) error {
	for _, m := range append(append([]*v1alpha1.EtcdMember{}, s.members...), s.deleting...) {
		if m.Spec.PeerURL != "" && m.Spec.ClientURL != "" {
			continue
		}
		peer, clientURL := r.peerURL(m), r.clientURL(m)
		if em, ok := s.inEtcd(m); ok && m.Status.MemberID != "" {
			if len(em.PeerURLs) > 0 {
				peer = em.PeerURLs[0]
			}
			if len(em.ClientURLs) > 0 {
				clientURL = em.ClientURLs[0]
			}
		}
		patch := client.MergeFrom(m.DeepCopy())
		m.Spec.PeerURL, m.Spec.ClientURL = peer, clientURL
		if err := r.Patch(ctx, m, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to record the URLs of EtcdMember %s: %w", m.Name, err)
		}
		s.peerURLs[m.Name] = peer
	}
	return nil
}

// reconcileMembership takes at most one membership step per pass. The order
// is what keeps the operator live: from any state in which a quorum of
// voters answers, a pass either takes a step or waits on a condition that is
// named in status and clears without a human (docs/design/0005).
//
//  0. A disaster recovery, while one is being carried out, is the only
//     step (docs/design/0011).
//  1. Finish an add whose etcd side is done, and keep the member list of
//     a joiner that has not started current: writes, and nothing else.
//  2. Self-heal: replace a broken member. This runs in every state, because
//     each step below may wait on the broken member itself.
//  3. Unfence a member whose view agrees again.
//  4. Wait for members leaving etcd, unless their own removal waits for a
//     replacement (the finalizer's gate), which would deadlock.
//  5. Promote a started learner; retire a member whose replacement joined.
//  6. Add a replacement, whose place is already counted.
//  7. Maintenance: wait for a defragmentation in flight, recover from
//     NOSPACE, or defragment a member that is due (docs/design/0008).
//  8. Roll one member to the target template (docs/design/0007).
//  9. Scale down, then finish a plain pending add, then scale up.
func (r *Reconciler) reconcileMembership(ctx context.Context, s *scope) (ctrl.Result, error) {
	s.judgeVersion()
	if res, acted, err := r.reconcileRecovery(ctx, s); acted || err != nil {
		return res, err
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
		return r.waitForQuorum(ctx, s)
	}
	if err := r.handJoinersTheirList(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if res, acted, err := r.remediate(ctx, s); acted || err != nil {
		return res, err
	}
	if acted, err := r.unfence(ctx, s); acted || err != nil {
		return ctrl.Result{}, err
	}
	if d := r.leavingMember(s); d != nil {
		s.setProgress(v1alpha1.ScalingDownReason, "waiting for member %s to leave etcd", d.Name)
		return ctrl.Result{RequeueAfter: requeueQuorumWait}, nil
	}
	if res, acted, err := r.addBeforePromotion(ctx, s); acted || err != nil {
		return res, err
	}
	if l, ok := s.startedLearner(); ok {
		if res, promoted, err := r.promoteIfReady(ctx, s, l); promoted || err != nil {
			return res, err
		}
	}
	if res, acted, err := r.retireReplaced(ctx, s); acted || err != nil {
		return res, err
	}
	if y := s.pendingReplacement(); y != nil {
		return r.completeAdd(ctx, s, y)
	}
	if res, acted, err := r.reconcileMaintenance(ctx, s); acted || err != nil {
		return res, err
	}
	if res, acted, err := r.reconcileRollout(ctx, s); acted || err != nil {
		return res, err
	}
	return r.reconcileSize(ctx, s, desired)
}

// waitForQuorum is the pass when etcd's view is not usable. Nothing may
// change without a quorum's answer, so it is a step of its own: remediate
// only records which members are broken and why it cannot act, and status
// says who did not answer.
func (r *Reconciler) waitForQuorum(ctx context.Context, s *scope) (ctrl.Result, error) {
	if _, _, err := r.remediate(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	// A reply over the bound stalls the cluster (see stalls), which
	// announceStalled reports in an Event once.
	reason, msg := unanswered(s)
	s.setProgress(reason, "%s", msg)
	return ctrl.Result{RequeueAfter: requeueUnreachable}, nil
}

// handJoinersTheirList finishes adds whose etcd side is done: the member
// gets etcd's member list, which only lets its Pod start; it is not a
// membership change, so self-heal still runs in the same pass. A joiner
// that has not started yet gets etcd's list again whenever the membership
// changed since its add (a removal, say): etcd refuses a first start whose
// --initial-cluster counts other members than it finds ("member count is
// unequal").
func (r *Reconciler) handJoinersTheirList(ctx context.Context, s *scope) error {
	for _, m := range s.members {
		em, listed := s.inEtcd(m)
		if !listed || m.HasBooted() || em.Name != "" {
			continue
		}
		want := initialClusterFrom(s.etcd.list)
		if m.Spec.InitialCluster == want {
			continue
		}
		if m.Pending() {
			s.setProgress(v1alpha1.ScalingUpReason, "starting learner %s", m.Name)
		}
		if err := r.setInitialCluster(ctx, m, want); err != nil {
			return err
		}
	}
	return nil
}

// leavingMember is a member on its way out whose removal the pass waits for.
// One whose removal its own finalizer holds back until a replacement has
// joined (see quorum.RemovalAllowed) is not waited for: that replacement is
// what this pass must add.
func (r *Reconciler) leavingMember(s *scope) *v1alpha1.EtcdMember {
	for _, d := range s.deleting {
		em, listed := s.inEtcd(d)
		if !listed || em.IsLearner {
			return d
		}
		selfHealthy := s.etcd.health[em.ID].ok()
		healthyOthers := s.etcd.healthyVoters()
		if selfHealthy {
			healthyOthers--
		}
		if quorum.RemovalAllowed(len(s.etcd.voters()), healthyOthers, s.desiredReplicas(), selfHealthy) {
			return d
		}
	}
	return nil
}

// startedLearner is a learner whose etcd has started and whose member is
// not on its way out: promoting it is the step that frees etcd's learner
// slot for whatever comes next.
func (s *scope) startedLearner() (etcd.Member, bool) {
	for _, l := range s.etcd.learners() {
		if l.Name == "" {
			continue
		}
		for _, m := range s.members {
			if em, ok := s.inEtcd(m); ok && em.ID == l.ID {
				return l, true
			}
		}
	}
	return etcd.Member{}, false
}

// unstartedMember is another member that etcd lists but that has not
// started yet: etcd names a member only once it has joined.
func (s *scope) unstartedMember(m *v1alpha1.EtcdMember) *v1alpha1.EtcdMember {
	for _, o := range s.members {
		if o.Name == m.Name {
			continue
		}
		if em, listed := s.inEtcd(o); listed && em.Name == "" {
			return o
		}
	}
	return nil
}

// pendingReplacement is a replacement not yet added to etcd.
func (s *scope) pendingReplacement() *v1alpha1.EtcdMember {
	for _, m := range s.members {
		if _, listed := s.inEtcd(m); m.Pending() && m.Spec.Replaces != "" && !listed {
			return m
		}
	}
	return nil
}

// holdsNothing: the member has never run, so nothing goes if it goes. It is
// not in etcd yet, or it is a learner whose etcd never started.
func (s *scope) holdsNothing(m *v1alpha1.EtcdMember) bool {
	em, listed := s.inEtcd(m)
	if !listed {
		return m.Pending() || !m.HasBooted()
	}
	return em.IsLearner && em.Name == "" && !m.HasBooted()
}

// cannotStart: the member holds nothing and the scheduler has found no place
// for its Pod. One that is only slow to start (its image being pulled, its
// volume made) is not given up: it is about to hold data.
func (s *scope) cannotStart(m *v1alpha1.EtcdMember) bool {
	return s.holdsNothing(m) && !remediation.UnschedulableSince(s.pods[m.Name]).IsZero()
}

// completeAdd adds a member to etcd as a learner and hands it etcd's member
// list. Its peer URL is recorded, so whether etcd already has it is a
// lookup, and the add is never issued twice. A replacement waits until the
// member it replaces has left etcd; a learner that never started, and so
// holds nothing, gives up etcd's learner slot to it.
func (r *Reconciler) completeAdd(ctx context.Context, s *scope, m *v1alpha1.EtcdMember) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("member", m.Name)
	// A broken member leaves before its replacement joins: it adds nothing
	// to the quorum. One that is healthy (a rollout's) stays until its
	// replacement votes.
	if x := m.Spec.Replaces; x != "" && isDeleting(s.deleting, x) {
		s.setProgress(v1alpha1.ReplacingMemberReason, "waiting for %s to leave etcd before its replacement %s joins", x, m.Name)
		return ctrl.Result{RequeueAfter: requeueQuorumWait}, nil
	}
	if u := s.unstartedMember(m); u != nil {
		// etcd checks a joining member's --initial-cluster against the
		// member list it finds at its first start, and refuses it if a
		// member was added since: so the next add waits for that start.
		// A replacement must not wait on a learner that may never start
		// (one that cannot be scheduled); such a learner yields to it.
		if m.Spec.Replaces != "" && s.cannotStart(u) && !u.Spec.Bootstrap {
			r.event(s.cluster, corev1.EventTypeNormal, "LearnerYielded", "RemoveMember",
				"Removing learner %s, which never started, so that %s can join", u.Name, m.Name)
			if err := r.Delete(ctx, u); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("failed to delete EtcdMember %s: %w", u.Name, err)
			}
			return ctrl.Result{}, nil
		}
		s.setProgress(v1alpha1.ScalingUpReason, "waiting for learner %s to start before adding %s", u.Name, m.Name)
		return ctrl.Result{RequeueAfter: requeueLearnerSync}, nil
	}
	if notReady := r.notReadyMembers(s, m.Name); len(notReady) > 0 {
		s.setProgress(v1alpha1.ScalingUpReason, "waiting for %s before adding %s", strings.Join(notReady, ", "), m.Name)
		return ctrl.Result{RequeueAfter: requeueUnreachable}, nil
	}
	url := r.peerURL(m)
	log.Info("Adding member to etcd as a learner", "peerURL", url)
	added, after, err := r.withClient(ctx, s, func(c etcd.Client) (etcd.Member, etcd.MemberList, error) {
		return c.MemberAddAsLearner(ctx, []string{url})
	})
	switch {
	case etcd.IsTooManyLearners(err):
		for _, l := range s.etcd.learners() {
			if r.memberFor(s, l) == nil {
				// A learner no member accounts for (its member went
				// without the finalizer's removal) would hold the slot
				// for ever: promote, which removes it, comes later.
				res, _, err := r.promoteStep(ctx, s, l)
				return res, err
			}
		}
		if l := r.idleLearner(s, m); l != nil {
			log.Info("Removing a learner that never started, to make room", "learner", l.Name)
			r.event(s.cluster, corev1.EventTypeNormal, "LearnerYielded", "RemoveMember",
				"Removing learner %s, which never started, so that %s can join", l.Name, m.Name)
			if err := r.Delete(ctx, l); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("failed to delete EtcdMember %s: %w", l.Name, err)
			}
			return ctrl.Result{}, nil
		}
		s.addRefused = true
		s.setProgress(v1alpha1.ScalingUpReason, "etcd deferred adding %s: %v", m.Name, err)
		return ctrl.Result{RequeueAfter: requeueEtcdRefused}, nil
	case etcd.IsUnhealthyCluster(err), etcd.IsUnavailable(err):
		// etcd wants every voter connected for a while after a change,
		// or did not answer; the plan is still right, so try again soon.
		s.addRefused = true
		s.setProgress(v1alpha1.ScalingUpReason, "etcd deferred adding %s: %v", m.Name, err)
		return ctrl.Result{RequeueAfter: requeueEtcdRefused}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("failed to add member %s to etcd: %w", m.Name, err)
	}
	r.event(s.cluster, corev1.EventTypeNormal, "MemberAdded", "AddLearner",
		"Added member %s to etcd as learner %s", m.Name, added.IDString())
	s.setProgress(v1alpha1.ScalingUpReason, "starting learner %s", m.Name)
	return ctrl.Result{}, r.setInitialCluster(ctx, m, initialClusterFrom(after))
}

// idleLearner is a member other than m that etcd lists as a learner whose
// etcd never started, and that is not itself a replacement. Only a
// replacement takes a slot from one: a plain scale-up waits its turn, since
// the learner it would remove may just be starting beside it.
func (r *Reconciler) idleLearner(s *scope, m *v1alpha1.EtcdMember) *v1alpha1.EtcdMember {
	if m.Spec.Replaces == "" {
		return nil
	}
	for _, o := range s.members {
		if o.Name == m.Name || o.Spec.Replaces != "" {
			continue
		}
		if em, listed := s.inEtcd(o); listed && s.cannotStart(o) && em.IsLearner {
			return o
		}
	}
	return nil
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
				name, _ = v1alpha1.MemberOfPeerURL(u)
			}
			entries = append(entries, name+"="+u)
		}
	}
	sort.Strings(entries)
	return strings.Join(entries, ",")
}

func (r *Reconciler) memberFor(s *scope, em etcd.Member) *v1alpha1.EtcdMember {
	for _, m := range append(append([]*v1alpha1.EtcdMember{}, s.members...), s.deleting...) {
		if found, ok := s.inEtcd(m); ok && found.ID == em.ID {
			return m
		}
	}
	return nil
}

// notReadyMembers names the members, other than those excluded, that are not
// ready or whose etcd endpoint is unhealthy. Members that hold nothing (not
// yet added, or never started) are not waited for: they wait on this.
func (r *Reconciler) notReadyMembers(s *scope, exclude ...string) []string {
	var out []string
	for _, m := range s.members {
		if contains(exclude, m.Name) || s.holdsNothing(m) {
			continue
		}
		if !s.memberReady(m) {
			out = append(out, m.Name)
			continue
		}
		if em, ok := s.inEtcd(m); ok && !s.etcd.health[em.ID].ok() {
			out = append(out, m.Name)
		}
	}
	return out
}

// withClient dials the members and runs one etcd call.
func (r *Reconciler) withClient(ctx context.Context, s *scope, call func(etcd.Client) (etcd.Member, etcd.MemberList, error)) (etcd.Member, etcd.MemberList, error) {
	c, err := r.Dialer.Dial(ctx, r.endpoints(s), s.access.Options...)
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
