package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/memberstatus"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/etcdversion"
	"github.com/quorumctl/etcd-operator/internal/rollout"
)

// outdated: the member's template, or its trust bundles, differ from the
// target.
func (s *scope) outdated(m *v1alpha1.EtcdMember) bool {
	return !equality.Semantic.DeepEqual(m.Spec.MemberTemplate, s.cluster.Status.Observed.MemberTemplate) ||
		!equality.Semantic.DeepEqual(m.Spec.TLS, s.targetTLS(m))
}

// healthyMember: ready, answering, and following the quorum's leader.
func (s *scope) healthyMember(m *v1alpha1.EtcdMember) bool {
	em, ok := s.inEtcd(m)
	if !ok || !s.memberReady(m) {
		return false
	}
	h := s.etcd.health[em.ID]
	return h.ok() && h.status.LeaderID == s.quorumView().LeaderID
}

// versionCheck applies etcd's upgrade rules to the change from the versions
// the members are on now to the target. A refusal stops the rollout and
// keeps new members off the refused version.
func (s *scope) versionCheck() *etcdversion.Refusal {
	target, err := etcdversion.Parse(s.cluster.Status.Observed.Version)
	if err != nil {
		return &etcdversion.Refusal{Reason: etcdversion.ReasonUnsupportedVersion, Message: err.Error()}
	}
	var c etcdversion.Cluster
	for _, m := range s.members {
		v, err := etcdversion.Parse(m.Spec.Version)
		if err != nil {
			return &etcdversion.Refusal{Reason: etcdversion.ReasonUnsupportedVersion, Message: fmt.Sprintf("member %s: %v", m.Name, err)}
		}
		c.Members = append(c.Members, v)
	}
	if len(c.Members) == 0 {
		return nil
	}
	plan, err := etcdversion.Decide(c, target)
	var refusal *etcdversion.Refusal
	switch {
	case errors.As(err, &refusal):
		return refusal
	case err != nil:
		return &etcdversion.Refusal{Reason: etcdversion.ReasonUnsupportedVersion, Message: err.Error()}
	case plan.Kind == etcdversion.KindDowngrade:
		from := slices.MaxFunc(c.Members, etcdversion.Version.Compare)
		return &etcdversion.Refusal{Reason: reasonDowngradeNotSupported, Message: fmt.Sprintf(
			"downgrading from %s to %s takes etcd's downgrade API, which this operator does not drive yet; set spec.version back to a %s release",
			from, target, from.MinorString())}
	}
	return nil
}

// reasonDowngradeNotSupported refuses a one-minor downgrade, which etcd
// allows only through its downgrade API.
const reasonDowngradeNotSupported = "DowngradeNotSupported"

// etcdMemberOf is etcd's entry for the named member.
func etcdMemberOf(s *scope, name string) etcd.Member {
	for _, m := range append(append([]*v1alpha1.EtcdMember{}, s.members...), s.deleting...) {
		if m.Name == name {
			em, _ := s.inEtcd(m)
			return em
		}
	}
	return etcd.Member{}
}

// reconcileRollout takes the rollout's step for this pass (see package
// rollout). It acts only once the cluster has the target's number of
// members: a scale-up gives new members the target template anyway.
func (r *Reconciler) reconcileRollout(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	if err := r.clearRolledAt(ctx, s); err != nil {
		return ctrl.Result{}, true, err
	}
	if acted, err := r.refreshIdle(ctx, s); acted || err != nil {
		return ctrl.Result{}, true, err
	}
	counted := s.counted()
	if len(counted) != s.desiredReplicas() {
		return ctrl.Result{}, false, nil
	}
	if s.versionRefused != nil {
		return ctrl.Result{}, false, nil
	}
	// A version upgrade waits for its snapshot before anything moves; the
	// wait is the rollout's alone, so self-heal (earlier in the pass) and
	// everything after it go on.
	if s.outdatedCount() > 0 && s.settling() == "" && !s.cluster.Spec.Rollout.Paused {
		if hold, err := r.preUpgradeSnapshot(ctx, s); hold || err != nil {
			return ctrl.Result{RequeueAfter: requeueUnreachable}, false, err
		}
	}
	ms, volumes, err := r.rolloutMembers(ctx, s, counted)
	if err != nil {
		return ctrl.Result{}, true, err
	}
	if res, acted, err := r.advanceLogBeforeUpgrade(ctx, s); acted || err != nil {
		return res, acted, err
	}
	d := rollout.Next(ms, rollout.Options{Paused: s.cluster.Spec.Rollout.Paused, Settling: s.settling(), Restarting: r.restarting(s)})
	// Counted as the rollout sees them: a member whose spec is the
	// target's but whose Pod is not (turning TLS on changes the member
	// alone) is not updated yet either.
	updated := 0
	for _, rm := range ms {
		if !rm.Outdated {
			updated++
		}
	}
	log := ctrl.LoggerFrom(ctx)
	switch d.Action {
	case rollout.None:
		return ctrl.Result{}, false, nil
	case rollout.Wait:
		reason := v1alpha1.RollingUpdateReason
		if s.cluster.Spec.Rollout.Paused {
			reason = v1alpha1.RolloutPausedReason
		}
		s.setProgress(reason, "%s (%d of %d members updated)", d.Reason, updated, len(ms))
		return ctrl.Result{RequeueAfter: requeueUnreachable}, false, nil
	case rollout.MoveLeader:
		res, err := r.moveLeaderTo(ctx, s, s.member(d.Member), etcdMemberOf(s, d.Member), etcdMemberOf(s, d.To), "before updating it")
		return res, true, err
	case rollout.Restart:
		m := s.member(d.Member)
		log.Info("Rolling member to the target template", "member", m.Name, "version", s.cluster.Status.Observed.Version)
		if err := r.restartMember(ctx, s, m); err != nil {
			return ctrl.Result{}, true, err
		}
		r.event(s.cluster, corev1.EventTypeNormal, "MemberUpdating", "RollMember",
			"Restarting member %s on its volume with the new template (etcd %s); %d of %d members updated before it",
			m.Name, m.Spec.Version, updated, len(ms))
		s.setProgress(v1alpha1.RollingUpdateReason, "restarting member %s with the new template (%d of %d members updated)", m.Name, updated, len(ms))
		return ctrl.Result{}, true, nil
	case rollout.ExpandVolume:
		return ctrl.Result{RequeueAfter: requeueUnreachable}, true, r.expandVolume(ctx, s, s.member(d.Member))
	case rollout.Replace:
		m := s.member(d.Member)
		res, err := r.replaceToRoll(ctx, s, m, volumes[m.Name].why, updated, len(ms))
		return res, true, err
	}
	return ctrl.Result{}, false, fmt.Errorf("unknown rollout action %q", d.Action)
}

// rolloutMembers describes the counted members as package rollout sees
// them, and each outdated member's volume change, which the Replace step
// reports. Reading a volume change may ask the API server, so an error
// ends the pass as the rollout's step.
func (r *Reconciler) rolloutMembers(ctx context.Context, s *scope, counted []*v1alpha1.EtcdMember) ([]rollout.Member, map[string]volumeChange, error) {
	leader := s.quorumView().LeaderID
	var ms []rollout.Member
	volumes := map[string]volumeChange{}
	for _, m := range counted {
		em, listed := s.inEtcd(m)
		var vc volumeChange
		if s.outdated(m) {
			var err error
			if vc, err = r.volumeChangeOf(ctx, s, m); err != nil {
				return nil, nil, err
			}
			volumes[m.Name] = vc
		}
		rm := rollout.Member{
			Name: m.Name, Outdated: (s.outdated(m) || s.podOutdated(m)) && !r.restartedToTarget(s, m), Replace: vc.replace, Expand: vc.expand, Resizing: vc.resizing,
			Voter: listed && !em.IsLearner, Leader: listed && em.ID == leader && leader != 0, Healthy: s.healthyMember(m),
			DownFor: s.downFor(m),
		}
		if listed {
			rm.Applied = s.etcd.health[em.ID].status.RaftAppliedIndex
		}
		ms = append(ms, rm)
	}
	return ms, volumes, nil
}

// advanceLogBeforeUpgrade is the rollout's step while a version upgrade
// waits for every member to have taken a raft snapshot since the cluster
// came to run its minor (see entriesBeforeUpgrade). acted is false when no
// such wait is due. Each member takes a raft snapshot every snapshot-count
// entries; harmless entries get there without waiting for the users'.
func (r *Reconciler) advanceLogBeforeUpgrade(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	remaining := s.entriesBeforeUpgrade()
	if remaining <= 0 || s.outdatedCount() <= 0 || s.settling() != "" {
		return ctrl.Result{}, false, nil
	}
	n := min(remaining, advanceLogBatch)
	_, _, err := r.withClient(ctx, s, func(c etcd.Client) (etcd.Member, etcd.MemberList, error) {
		return etcd.Member{}, etcd.MemberList{}, c.AdvanceLog(ctx, n)
	})
	if err != nil && !etcd.IsUnavailable(err) {
		return ctrl.Result{}, true, fmt.Errorf("failed to advance the raft log: %w", err)
	}
	s.setProgress(v1alpha1.RollingUpdateReason,
		"waiting until every member has taken a raft snapshot since the cluster came to run %s, which etcd %s needs before it starts: %d log entries to go",
		s.cluster.Status.MinorSince.Minor, s.cluster.Status.Observed.Version, remaining)
	return ctrl.Result{RequeueAfter: requeueSoon}, true, nil
}

// replaceToRoll is the rollout's Replace step: a member whose volume cannot
// be kept (why says so) is rolled by adding a replacement with the target
// template, which joins first, before the old member leaves. updated and
// total are the rollout's progress, for the Event and status.
func (r *Reconciler) replaceToRoll(ctx context.Context, s *scope, m *v1alpha1.EtcdMember, why string, updated, total int) (ctrl.Result, error) {
	if exists, err := r.replacementExists(ctx, s, m.Name); err != nil || exists {
		return ctrl.Result{RequeueAfter: requeueSoon}, err
	}
	r.noteReplacedVolume(s, m, why)
	y, err := r.createMember(ctx, s, newMember{template: s.cluster.Status.Observed.MemberTemplate, replaces: m.Name})
	if err != nil {
		return ctrl.Result{}, err
	}
	s.replacedBy[m.Name] = y
	r.event(s.cluster, corev1.EventTypeNormal, "MemberUpdating", "RollMember",
		"Replacing member %s by %s with the new template (etcd %s), since %s: it joins first, then %s leaves; %d of %d members updated before it",
		m.Name, y.Name, y.Spec.Version, why, m.Name, updated, total)
	s.setProgress(v1alpha1.RollingUpdateReason, "replacing member %s by %s (%d of %d members updated)", m.Name, y.Name, updated, total)
	return r.completeAdd(ctx, s, y)
}

// settling names a membership change in flight, which a rollout waits out.
func (s *scope) settling() string {
	switch {
	case len(s.deleting) > 0:
		return fmt.Sprintf("member %s to leave", s.deleting[0].Name)
	case len(s.broken) > 0:
		return fmt.Sprintf("broken member %s to be replaced", s.broken[0].member.Name)
	case len(s.replacedBy) > 0:
		for x, y := range s.replacedBy {
			return fmt.Sprintf("%s's replacement %s to join", x, y.Name)
		}
	case len(s.etcd.learners()) > 0:
		return "a learner to be promoted"
	case s.pendingMember() != nil:
		return fmt.Sprintf("member %s to be added", s.pendingMember().Name)
	}
	return ""
}

func (s *scope) outdatedCount() int {
	n := 0
	for _, m := range s.counted() {
		if s.outdated(m) {
			n++
		}
	}
	return n
}

func (s *scope) member(name string) *v1alpha1.EtcdMember {
	for _, m := range s.members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// retireReplaced removes a member whose replacement has joined and is a
// healthy voter: the second half of a replacement that joined first (a
// rollout's, or a broken member's whose quorum gate held). Leadership moves
// away first.
func (r *Reconciler) retireReplaced(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	for _, x := range s.members {
		y := s.replacedBy[x.Name]
		if y == nil || !s.healthyMember(y) {
			continue
		}
		if em, ok := s.inEtcd(y); !ok || em.IsLearner {
			continue
		}
		if em, ok := s.inEtcd(x); ok && em.ID == s.etcd.leaderID() {
			res, err := r.moveLeaderTo(ctx, s, x, em, etcdMemberOf(s, y.Name), "before it leaves")
			return res, true, err
		}
		ctrl.LoggerFrom(ctx).Info("Retiring a member its replacement has taken over from", "member", x.Name, "replacement", y.Name)
		r.event(s.cluster, corev1.EventTypeNormal, "MemberRemoving", "RemoveMember",
			"Removing member %s: its replacement %s has joined", x.Name, y.Name)
		if err := r.Delete(ctx, x); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, true, fmt.Errorf("failed to delete EtcdMember %s: %w", x.Name, err)
		}
		s.setProgress(v1alpha1.RollingUpdateReason, "removing %s, replaced by %s", x.Name, y.Name)
		return ctrl.Result{}, true, nil
	}
	return ctrl.Result{}, false, nil
}

// clearRolledAt forgets the rollout of members that are back: healthy
// voters on the template the rollout restarted them to. The approval shares
// rolledAt's field manager and is restated as read, so the clear goes only
// if the member is as read: a read behind the API server would set back an
// approval given since. A member that changed is cleared by a later pass.
func (r *Reconciler) clearRolledAt(ctx context.Context, s *scope) error {
	for _, m := range s.members {
		if m.Status.RolledAt == nil {
			continue
		}
		if h, _ := r.restartedTo(s, m); !s.backOn(m, h) {
			continue
		}
		cleared := m.DeepCopy()
		cleared.Status.RolledAt = nil
		err := memberstatus.Apply(ctx, r.Client, cleared, memberstatus.Restart, memberstatus.IfUnchanged())
		switch {
		case apierrors.IsConflict(err):
			ctrl.LoggerFrom(ctx).V(1).Info("Not clearing the rollout of a member that changed since it was read", "member", m.Name)
		case err != nil:
			return fmt.Errorf("failed to clear the rollout of EtcdMember %s: %w", m.Name, err)
		default:
			*m = *cleared
		}
	}
	return nil
}

// rolloutFailure names a member the rollout updated that has not come back:
// it cannot start its image, or crash-loops.
func (s *scope) rolloutFailure() (string, bool) {
	for _, b := range s.held {
		m := b.member
		switch {
		case m.Status.RolledAt != nil && s.builtFor(m, m.Status.RestartApproved):
			// Judged on the Pod the restart made, not on the one before it.
			return fmt.Sprintf("member %s cannot be scheduled with the new template: %s", m.Name, b.verdict.Detail), true
		case m.Spec.Replaces != "" && s.replacedBy[m.Spec.Replaces] == m && !s.isBroken(s.member(m.Spec.Replaces)):
			return fmt.Sprintf("member %s, made to replace %s with the new template, cannot be scheduled: %s", m.Name, m.Spec.Replaces, b.verdict.Detail), true
		}
	}
	for _, m := range s.members {
		if m.Status.RolledAt == nil || s.outdated(m) || s.healthyMember(m) {
			continue
		}
		p := s.pods[m.Name]
		if p == nil {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && imageFailures[w.Reason] {
				return fmt.Sprintf("member %s cannot start etcd %s: %s: %s", m.Name, m.Spec.Version, w.Reason, strings.TrimSpace(w.Message)), true
			}
			if cs.RestartCount >= rolloutCrashRestarts {
				return fmt.Sprintf("member %s keeps failing on etcd %s (%d restarts since it was updated)", m.Name, m.Spec.Version, cs.RestartCount), true
			}
		}
	}
	return "", false
}

// imageFailures are the kubelet's reasons for a container that cannot start
// its image at all.
var imageFailures = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "ErrImageNeverPull": true,
	"InvalidImageName": true, "CreateContainerConfigError": true, "CreateContainerError": true,
}

// rolloutCrashRestarts is how many restarts of an updated member's Pod stop
// the rollout.
const rolloutCrashRestarts = 3

// advanceLogBatch bounds the harmless entries one pass commits, so that a
// pass stays short.
const advanceLogBatch = 2000

// entriesBeforeUpgrade is how many more log entries must be committed before
// members may start on the target's minor release, or 0. etcd 3.7 and later
// cannot replay entries written before their cluster ran the previous minor
// (a cluster upgraded from 3.5 keeps v2-era entries in its log until every
// member snapshots past them); a member replays only what follows its last
// raft snapshot, which it takes every snapshot-count entries. So once the
// log has moved that far since every member ran the previous minor, nothing
// older is replayed.
func (s *scope) entriesBeforeUpgrade() int {
	target, err := etcdversion.Parse(s.cluster.Status.Observed.Version)
	since := s.cluster.Status.MinorSince
	// A raft index of 0 marks a cluster formed on that minor: its log holds
	// nothing older.
	if err != nil || target.Minor < 7 || since == nil || since.RaftIndex == 0 || !s.etcd.usable() {
		return 0
	}
	from, err := etcdversion.Parse(since.Minor + ".0")
	if err != nil || from.Minor >= target.Minor {
		return 0
	}
	var count uint64
	for _, m := range s.counted() {
		count = max(count, snapshotCount(m))
	}
	mark := uint64(since.RaftIndex)
	leader := s.etcd.health[s.etcd.leaderID()].status.RaftIndex
	if leader > mark+count {
		return 0
	}
	return int(mark + count + 1 - leader)
}

// snapshotCount is a member's --snapshot-count: its own setting, or its
// release's default.
func snapshotCount(m *v1alpha1.EtcdMember) uint64 {
	if o := m.Spec.Options; o != nil && o.SnapshotCount != nil {
		return uint64(*o.SnapshotCount)
	}
	if v, err := etcdversion.Parse(m.Spec.Version); err == nil && v.Minor < 6 {
		return 100000
	}
	return 10000
}
