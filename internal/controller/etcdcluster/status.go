package etcdcluster

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/netpol"
	"github.com/quorumctl/etcd-operator/internal/component/owner"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
	"github.com/quorumctl/etcd-operator/internal/etcdversion"
	"github.com/quorumctl/etcd-operator/internal/quorum"
	"github.com/quorumctl/etcd-operator/internal/remediation"
	"github.com/quorumctl/etcd-operator/internal/unreachable"
)

// updateStatus computes every status field from the scope. It is the only
// place conditions are set. observedGeneration is set where the spec is
// adopted (latchTarget), not here: it says which spec is the target, which a
// failed step in a pass does not change.
func updateStatus(s *scope) {
	c := s.cluster
	c.Status.Selector = v1alpha1.ClusterSelector(c.Name)
	c.Status.Members, c.Status.ReadyMembers = memberSummaries(s)
	c.Status.BrokenMembers = int32(len(s.broken))
	c.Status.UpdatedMembers, c.Status.CurrentVersion = rolloutSummary(s)
	setMinorSince(s)
	setVersionsAligned(s)
	setQuorumLost(s)
	setAvailable(s)
	setMembersHealthy(s)
	setMaintenance(s)
	setProgressing(s)
	setReady(s)
	setKstatus(s)
	recordMetrics(s)
}

func memberSummaries(s *scope) ([]v1alpha1.MemberSummary, int32) {
	var out []v1alpha1.MemberSummary
	var ready int32
	for _, m := range s.members {
		sum := v1alpha1.MemberSummary{Name: m.Name, ID: m.Status.MemberID, Role: m.Status.Role, Version: m.Status.Version}
		if em, ok := s.inEtcd(m); ok {
			sum.ID = em.IDString()
			sum.Role = v1alpha1.MemberRoleVoter
			if em.IsLearner {
				sum.Role = v1alpha1.MemberRoleLearner
			}
			sum.Ready = s.podReady(m.Name) && em.Name != ""
			if h := s.etcd.health[em.ID]; h.err == nil && h.status.Version != "" {
				sum.Version = h.status.Version
			}
		}
		if sum.Ready {
			ready++
		}
		sum.Updated = s.cluster.Status.Observed != nil && !s.outdated(m)
		out = append(out, sum)
	}
	return out, ready
}

// rolloutSummary counts the members on the target template and names the
// lowest version any member is configured with.
func rolloutSummary(s *scope) (int32, string) {
	if s.cluster.Status.Observed == nil {
		return 0, ""
	}
	var updated int32
	var lowest etcdversion.Version
	found := false
	for _, m := range s.counted() {
		if !s.outdated(m) {
			updated++
		}
		if v, err := etcdversion.Parse(m.Spec.Version); err == nil && (!found || v.Compare(lowest) < 0) {
			lowest, found = v, true
		}
	}
	if !found {
		return updated, ""
	}
	return updated, lowest.String()
}

// setMinorSince records the raft index at which every member was first seen
// running one minor release (see entriesBeforeUpgrade). It reads the
// versions the members report, not their templates: a member whose template
// changed may not have restarted yet.
func setMinorSince(s *scope) {
	if !s.etcd.usable() || len(s.members) == 0 {
		return
	}
	minor := ""
	for _, m := range s.etcd.list.Members {
		h := s.etcd.health[m.ID]
		v, err := etcdversion.Parse(h.status.Version)
		if h.err != nil || err != nil || (minor != "" && minor != v.MinorString()) {
			return
		}
		minor = v.MinorString()
	}
	if since := s.cluster.Status.MinorSince; minor == "" || (since != nil && since.Minor == minor) {
		return
	}
	s.cluster.Status.MinorSince = &v1alpha1.MinorMark{Minor: minor, RaftIndex: int64(s.etcd.health[s.etcd.leaderID()].status.RaftIndex)}
}

func setCondition(s *scope, condType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&s.cluster.Status.Conditions, metav1.Condition{
		Type:               condType,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: s.cluster.Generation,
	})
}

// setAvailable: quorum is present and the client Service has a ready voter.
func setAvailable(s *scope) {
	c := s.cluster
	switch {
	case s.desiredReplicas() == 0 && !c.ClusterFormed():
		setCondition(s, v1alpha1.AvailableCondition, metav1.ConditionFalse, v1alpha1.NoDataWrittenReason,
			"created with replicas 0: no member has ever run and no data has been written")
	case s.desiredReplicas() == 0 && s.dormantMember() != nil:
		d := s.dormantMember()
		setCondition(s, v1alpha1.AvailableCondition, metav1.ConditionFalse, v1alpha1.PausedReason,
			fmt.Sprintf("paused: member %s is dormant and its data is kept on PersistentVolumeClaim %s; set replicas to resume",
				d.Name, v1alpha1.DataVolumeClaimName(d.Name)))
	case !c.ClusterFormed() && s.restoreRefusal != nil:
		setCondition(s, v1alpha1.AvailableCondition, metav1.ConditionFalse, s.restoreRefusal.reason, s.restoreRefusal.message)
	case !c.ClusterFormed():
		setCondition(s, v1alpha1.AvailableCondition, metav1.ConditionFalse, v1alpha1.BootstrappingReason,
			"the seed member has not formed the cluster yet")
	case !s.etcd.usable():
		reason, msg := unanswered(s)
		setCondition(s, v1alpha1.AvailableCondition, metav1.ConditionFalse, reason, msg)
	default:
		voters, healthy := len(s.etcd.voters()), s.etcd.healthyVoters()
		switch {
		case !quorum.HasQuorum(voters, healthy):
			setCondition(s, v1alpha1.AvailableCondition, metav1.ConditionFalse, v1alpha1.QuorumLostReason,
				fmt.Sprintf("%d of %d voters healthy; quorum needs %d", healthy, voters, quorum.Size(voters)))
		case readyVoterPods(s) == 0:
			setCondition(s, v1alpha1.AvailableCondition, metav1.ConditionFalse, v1alpha1.NoReadyVoterReason,
				"quorum holds but no voter Pod is ready behind the client Service")
		default:
			setCondition(s, v1alpha1.AvailableCondition, metav1.ConditionTrue, v1alpha1.QuorumAvailableReason,
				fmt.Sprintf("%d of %d voters healthy", healthy, voters))
		}
	}
}

// unanswered is the reason and message for a pass that got no usable answer
// from etcd. A reply over the operator's bound is told apart from silence:
// the member runs something that is not etcd as the operator knows it (an
// image a user chose, say), asking again gets the same reply, and a person
// has to change the image. While no member answers the looks are spaced
// out, and the message says when the next one is due (at the least: any
// change to the cluster or its Pods brings one at once); the interval,
// not a time, so the message stops changing once the backoff is at its
// longest.
func unanswered(s *scope) (reason, message string) {
	if reason, message, ok := authFailure(s); ok {
		return reason, message
	}
	err := s.etcd.err
	if etcd.IsReplyTooLarge(err) {
		return v1alpha1.EtcdReplyTooLargeReason, fmt.Sprintf("a member answered with more than the operator reads of one reply; check that the member image runs etcd: %v", err)
	}
	if s.retryDelay > unreachable.First {
		return v1alpha1.EtcdUnreachableReason, fmt.Sprintf("no member answered: %v; asking again in %s, backing off while none answers", err, s.retryDelay)
	}
	return v1alpha1.EtcdUnreachableReason, fmt.Sprintf("no member answered: %v", err)
}

func readyVoterPods(s *scope) int {
	n := 0
	for _, m := range s.members {
		if em, ok := s.inEtcd(m); ok && !em.IsLearner && s.podReady(m.Name) {
			n++
		}
	}
	return n
}

// progressReason is what the cluster is doing, derived from the scope when
// the pass did not record anything more specific.
func progressReason(s *scope) (string, string) {
	if sw := s.switchSummary(); sw != "" && (s.progress.reason == "" || s.progress.reason == v1alpha1.RollingUpdateReason || s.progress.reason == v1alpha1.RolloutPausedReason) {
		// A source switch is carried by the passes of a CA rotation:
		// said as the switch it is, with the pass it is in.
		reason := v1alpha1.TLSSourceSwitchingReason
		if s.progress.reason == v1alpha1.RolloutPausedReason || s.rotationPaused() {
			reason = v1alpha1.RolloutPausedReason
		}
		if rot := s.rotationSummary(); rot != "" {
			sw += ": " + rot
		}
		if s.progress.message != "" {
			sw += " (" + s.progress.message + ")"
		}
		return reason, sw
	}
	if rot := s.rotationSummary(); rot != "" && (s.progress.reason == "" || s.progress.reason == v1alpha1.RollingUpdateReason || s.progress.reason == v1alpha1.RolloutPausedReason) {
		// The rollout's restarts are the rotation's first and third
		// passes: said as such, with the rollout's own word on where it is.
		// A rotation spec.rollout.paused holds (its restarts, or its
		// switch) says RolloutPaused, what a person has to undo.
		reason := v1alpha1.CARotatingReason
		if s.progress.reason == v1alpha1.RolloutPausedReason || s.rotationPaused() {
			reason = v1alpha1.RolloutPausedReason
		}
		if s.progress.message != "" {
			rot += " (" + s.progress.message + ")"
		}
		return reason, rot
	}
	if tr := s.transitionSummary(); tr != "" && (s.progress.reason == "" || s.progress.reason == v1alpha1.RollingUpdateReason || s.progress.reason == v1alpha1.RolloutPausedReason) {
		// The rollout's restarts are the transition's passes, as they are
		// a rotation's.
		reason := v1alpha1.TLSTransitioningReason
		if s.progress.reason == v1alpha1.RolloutPausedReason {
			reason = v1alpha1.RolloutPausedReason
		}
		if s.progress.message != "" {
			tr += " (" + s.progress.message + ")"
		}
		return reason, tr
	}
	if s.progress.reason != "" {
		return s.progress.reason, s.progress.message
	}
	desired, n := s.desiredReplicas(), len(s.counted())
	switch {
	case !s.cluster.ClusterFormed():
		return v1alpha1.BootstrappingReason, "forming the cluster"
	case len(s.broken) > 0:
		b := s.broken[0]
		return v1alpha1.ReplacingMemberReason, fmt.Sprintf("member %s is broken (%s)", b.member.Name, b.verdict.Reason)
	case n < desired:
		return v1alpha1.ScalingUpReason, fmt.Sprintf("%d of %d members", n, desired)
	case n > desired || len(s.deleting) > 0 || len(s.leftoverPods) > 0:
		return v1alpha1.ScalingDownReason, fmt.Sprintf("%d members, target %d", n, desired)
	case len(s.etcd.learners()) > 0:
		return v1alpha1.PromotingLearnerReason, "a learner is catching up"
	}
	return v1alpha1.MembersNotReadyReason, "waiting for members to be ready"
}

func setProgressing(s *scope) {
	switch {
	case s.reached && specMatchesObserved(s.cluster) && s.desiredReplicas() == 0:
		setCondition(s, v1alpha1.ProgressingCondition, metav1.ConditionFalse, v1alpha1.PausedReason, "paused at replicas 0")
	case s.reached && specMatchesObserved(s.cluster) && authPending(s) && stalledBy(s) == "":
		setCondition(s, v1alpha1.ProgressingCondition, metav1.ConditionTrue, v1alpha1.EnablingAuthReason, "turning etcd's authentication on, as spec.auth asks")
	case s.reached && specMatchesObserved(s.cluster):
		setCondition(s, v1alpha1.ProgressingCondition, metav1.ConditionFalse, v1alpha1.ReconciledReason,
			fmt.Sprintf("%d of %d members ready", len(s.members), s.desiredReplicas()))
	case stalledBy(s) != "":
		_, msg, _ := phaseFailure(s)
		setCondition(s, v1alpha1.ProgressingCondition, metav1.ConditionFalse, stalledBy(s), msg)
	case deadlinePassed(s):
		// As a Deployment reports it: no longer progressing within its
		// deadline, while the work goes on.
		setCondition(s, v1alpha1.ProgressingCondition, metav1.ConditionFalse, v1alpha1.DeadlineExceededReason, stalledMessage(s))
	default:
		reason, msg := progressReason(s)
		setCondition(s, v1alpha1.ProgressingCondition, metav1.ConditionTrue, reason, msg)
	}
}

// setReady: the cluster is exactly what the spec asks for and nothing is in
// flight. A 3-member cluster with only its seed up is Available, not Ready.
// A step that failed this pass keeps it from Ready: the cluster is not what
// the spec asks for while, say, its client Service belongs to someone else.
func setReady(s *scope) {
	available := meta.IsStatusConditionTrue(s.cluster.Status.Conditions, v1alpha1.AvailableCondition)
	if reason, msg, failed := phaseFailure(s); failed {
		setCondition(s, v1alpha1.ReadyCondition, metav1.ConditionFalse, reason, msg)
		return
	}
	switch {
	case noSpace(s):
		// Every member may be up, but the cluster refuses writes.
		c := meta.FindStatusCondition(s.cluster.Status.Conditions, v1alpha1.MaintenanceCondition)
		setCondition(s, v1alpha1.ReadyCondition, metav1.ConditionFalse, c.Reason, c.Message)
	case s.reached && specMatchesObserved(s.cluster) && authPending(s) && s.desiredReplicas() > 0:
		setCondition(s, v1alpha1.ReadyCondition, metav1.ConditionFalse, v1alpha1.EnablingAuthReason, "turning etcd's authentication on, as spec.auth asks")
	case s.reached && specMatchesObserved(s.cluster) && s.desiredReplicas() == 0:
		setCondition(s, v1alpha1.ReadyCondition, metav1.ConditionTrue, v1alpha1.PausedReason,
			"paused at replicas 0, as the spec asks")
	case s.reached && specMatchesObserved(s.cluster) && available:
		setCondition(s, v1alpha1.ReadyCondition, metav1.ConditionTrue, v1alpha1.MembersReadyReason,
			fmt.Sprintf("%d of %d members ready voters", len(s.members), s.desiredReplicas()))
	default:
		reason, msg := progressReason(s)
		setCondition(s, v1alpha1.ReadyCondition, metav1.ConditionFalse, reason, msg)
	}
}

// phaseFailure names what keeps the cluster from its spec and needs a
// person: an object the cluster needs that belongs to someone else, a
// version change etcd does not allow, a rollout whose updated member does
// not come back. Any other failed step is an error the next pass retries.
func phaseFailure(s *scope) (string, string, bool) {
	if reason, msg, failed := authFailure(s); failed {
		return reason, msg, true
	}
	if s.versionRefused != nil {
		return v1alpha1.VersionChangeRefusedReason, s.versionRefused.Message, true
	}
	if s.preUpgradeFailed != "" {
		return v1alpha1.PreUpgradeSnapshotFailedReason, s.preUpgradeFailed, true
	}
	if why, failed := s.rolloutFailure(); failed {
		return v1alpha1.RolloutFailedReason, why + "; fix spec or set it back, and the member is rolled back first", true
	}
	if reason, msg, active := maintenanceCondition(s); active && stalls[reason] {
		return reason, msg, true
	}
	for _, err := range s.phaseErrs {
		var notOwned *owner.NotOwnedError
		if errors.As(err, &notOwned) {
			return v1alpha1.ObjectNotOwnedReason, fmt.Sprintf("%v; delete or rename it so the operator can create its own", notOwned), true
		}
		var forbidden *netpol.NotPermittedError
		if errors.As(err, &forbidden) {
			return v1alpha1.NetworkPolicyNotPermittedReason, forbidden.Error(), true
		}
		var invalid *sourceInvalidError
		if errors.As(err, &invalid) {
			return v1alpha1.TLSSourceInvalidReason, invalid.message, true
		}
		var pending *tlsPendingError
		if errors.As(err, &pending) {
			return v1alpha1.TLSSourcePendingReason, pending.message, true
		}
	}
	if len(s.phaseErrs) > 0 {
		return v1alpha1.ReconcileErrorReason, s.phaseErrs[0].Error(), true
	}
	return "", "", false
}

// setKstatus derives Reconciling and Stalled from Ready and the deadline, so
// that kstatus readers and kubectl wait --for=condition=Ready agree on
// "done". Stalled is a report that clears itself: nothing here stops work.
func setKstatus(s *scope) {
	ready := meta.FindStatusCondition(s.cluster.Status.Conditions, v1alpha1.ReadyCondition)
	switch {
	case ready.Status == metav1.ConditionTrue:
		setCondition(s, v1alpha1.ReconcilingCondition, metav1.ConditionFalse, v1alpha1.ReconciledReason, ready.Message)
		setCondition(s, v1alpha1.StalledCondition, metav1.ConditionFalse, v1alpha1.ReconciledReason, ready.Message)
	case stalls[ready.Reason], s.restoreRefusal != nil && ready.Reason == s.restoreRefusal.reason:
		setCondition(s, v1alpha1.ReconcilingCondition, metav1.ConditionFalse, ready.Reason, ready.Message)
		setCondition(s, v1alpha1.StalledCondition, metav1.ConditionTrue, ready.Reason, ready.Message)
	case deadlinePassed(s):
		msg := stalledMessage(s)
		setCondition(s, v1alpha1.ReconcilingCondition, metav1.ConditionFalse, v1alpha1.DeadlineExceededReason, msg)
		setCondition(s, v1alpha1.StalledCondition, metav1.ConditionTrue, v1alpha1.DeadlineExceededReason, msg)
	default:
		setCondition(s, v1alpha1.ReconcilingCondition, metav1.ConditionTrue, ready.Reason, ready.Message)
		setCondition(s, v1alpha1.StalledCondition, metav1.ConditionFalse, v1alpha1.WithinDeadlineReason,
			"working towards the target; the progress deadline has not passed")
	}
}

// stalledBy is the reason of a failure that needs a person, or "".
func stalledBy(s *scope) string {
	if reason, _, failed := phaseFailure(s); failed && stalls[reason] {
		return reason
	}
	return ""
}

// stalls are the Ready reasons that need a person, so kstatus readers see a
// failure rather than work in progress.
var stalls = map[string]bool{
	v1alpha1.ObjectNotOwnedReason: true, v1alpha1.VersionChangeRefusedReason: true, v1alpha1.RolloutFailedReason: true,
	v1alpha1.NoSpaceOverQuotaReason: true, v1alpha1.NoSpaceRecoveryDisabledReason: true, v1alpha1.CorruptAlarmReason: true,
	v1alpha1.TLSSourceInvalidReason: true, v1alpha1.NetworkPolicyNotPermittedReason: true,
	v1alpha1.EtcdReplyTooLargeReason: true, v1alpha1.PreUpgradeSnapshotFailedReason: true,
	v1alpha1.AuthSecretInvalidReason: true, v1alpha1.AuthFailedReason: true, v1alpha1.AuthRequiredReason: true,
}

// stalledMessage says what the target is and what it is stuck on.
func stalledMessage(s *scope) string {
	_, doing := progressReason(s)
	what := fmt.Sprintf("the target of %d members was not reached", s.desiredReplicas())
	if !s.cluster.ClusterFormed() {
		what = "the cluster did not form"
	}
	return fmt.Sprintf("%s within %s; still working on it: %s", what, deadlineText(s.cluster), doing)
}

// setVersionsAligned reports whether every member runs the same etcd.
func setVersionsAligned(s *scope) {
	versions := map[string][]string{}
	for _, m := range s.cluster.Status.Members {
		if m.Version != "" {
			versions[m.Version] = append(versions[m.Version], m.Name)
		}
	}
	if len(versions) <= 1 {
		msg := "every running member reports the same etcd version"
		for v := range versions {
			msg = "every running member runs etcd " + v
		}
		setCondition(s, v1alpha1.VersionsAlignedCondition, metav1.ConditionTrue, v1alpha1.SingleVersionReason, msg)
		return
	}
	keys := make([]string, 0, len(versions))
	for v := range versions {
		keys = append(keys, v)
	}
	sort.Strings(keys)
	var parts []string
	for _, v := range keys {
		parts = append(parts, fmt.Sprintf("%s: %s", v, strings.Join(versions[v], ", ")))
	}
	setCondition(s, v1alpha1.VersionsAlignedCondition, metav1.ConditionFalse, v1alpha1.MixedVersionsReason,
		"members run different etcd versions ("+strings.Join(parts, "; ")+")")
}

// setMembersHealthy reports self-heal: which member is broken and why, and
// whether the quorum gate is holding its replacement back.
func setMembersHealthy(s *scope) {
	switch {
	case s.remediationHeld != "":
		setCondition(s, v1alpha1.MembersHealthyCondition, metav1.ConditionFalse, v1alpha1.QuorumGateHoldingReason, s.remediationHeld)
	case len(s.broken) > 0 && s.broken[0].verdict.FenceOnly:
		b := s.broken[0]
		setCondition(s, v1alpha1.MembersHealthyCondition, metav1.ConditionFalse, v1alpha1.MemberFencedReason,
			fmt.Sprintf("%s is fenced (out of client traffic) while its disagreement with the quorum is confirmed: %s", b.member.Name, b.verdict.Detail))
	case len(s.broken) > 0:
		b := s.broken[0]
		setCondition(s, v1alpha1.MembersHealthyCondition, metav1.ConditionFalse, v1alpha1.ReplacingMemberReason,
			fmt.Sprintf("%s: %s: %s", b.member.Name, b.verdict.Reason, b.verdict.Detail))
	case len(s.held) > 0 && s.held[0].verdict.Reason == remediation.CannotJoin:
		b := s.held[0]
		setCondition(s, v1alpha1.MembersHealthyCondition, metav1.ConditionFalse, v1alpha1.MemberCannotJoinReason,
			fmt.Sprintf("%s has not joined: %s; it restarts in place", b.member.Name, b.verdict.Detail))
	case len(s.held) > 0:
		b := s.held[0]
		setCondition(s, v1alpha1.MembersHealthyCondition, metav1.ConditionFalse, v1alpha1.MemberUnschedulableReason,
			fmt.Sprintf("%s cannot be scheduled (%s); a replacement would not be either, so none is made: change the member template's scheduling, or the nodes",
				b.member.Name, b.verdict.Detail))
	case podRefused(s) != nil:
		// Not broken, and not replaced: a replacement's Pod would be
		// refused the same way. Said here too, since users look here first.
		m := podRefused(s)
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.MemberReadyCondition)
		setCondition(s, v1alpha1.MembersHealthyCondition, metav1.ConditionFalse, v1alpha1.MemberPodRefusedReason,
			fmt.Sprintf("%s: %s", m.Name, c.Message))
	default:
		setCondition(s, v1alpha1.MembersHealthyCondition, metav1.ConditionTrue, v1alpha1.AllMembersHealthyReason,
			"no member is broken")
	}
}

// podRefused is the first member whose Pod the API server refuses to
// create, as the member controller reports it, or nil.
func podRefused(s *scope) *v1alpha1.EtcdMember {
	for _, m := range s.members {
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.MemberReadyCondition)
		if c != nil && c.Reason == v1alpha1.MemberPodCreateFailedReason {
			return m
		}
	}
	return nil
}

func deadlineText(c *v1alpha1.EtcdCluster) string {
	seconds := int32(defaultDeadlineSecs)
	if c.Spec.ProgressDeadlineSeconds != nil {
		seconds = *c.Spec.ProgressDeadlineSeconds
	}
	return fmt.Sprintf("%ds", seconds)
}

// setQuorumLost tells a quorum lost for good from one only out of reach,
// and records status.quorumLoss while fewer than a quorum of voters answer.
func setQuorumLost(s *scope) {
	c := s.cluster
	rec := c.Status.Recovery
	switch {
	case rec.Active():
		// What was lost stays on record while the cluster is rebuilt; once
		// the old members are gone there is nothing left to look at.
		if c.ClusterFormed() && rec.ResetAt == nil {
			c.Status.QuorumLoss = quorumLossStatus(s, s.loss)
		}
		setCondition(s, v1alpha1.QuorumLostCondition, metav1.ConditionTrue, v1alpha1.RecoveringReason,
			fmt.Sprintf("EtcdRecovery %s is rebuilding the cluster from %s", rec.Name, recoverySource(rec)))
	case !c.ClusterFormed() || s.dormantMember() != nil:
		c.Status.QuorumLoss = nil
		setCondition(s, v1alpha1.QuorumLostCondition, metav1.ConditionFalse, v1alpha1.NotFormedReason,
			"the cluster has not formed, or is paused: there is no quorum to lose")
	case s.loss.QuorumHeld():
		c.Status.QuorumLoss = nil
		setCondition(s, v1alpha1.QuorumLostCondition, metav1.ConditionFalse, v1alpha1.QuorumHeldReason,
			fmt.Sprintf("%d of %d voters answer with a leader", s.loss.Healthy, s.loss.Voters))
	case s.loss.ForGood():
		c.Status.QuorumLoss = quorumLossStatus(s, s.loss)
		setCondition(s, v1alpha1.QuorumLostCondition, metav1.ConditionTrue, v1alpha1.MembersGoneReason, quorumLostMessage(s, s.loss))
	default:
		c.Status.QuorumLoss = quorumLossStatus(s, s.loss)
		setCondition(s, v1alpha1.QuorumLostCondition, metav1.ConditionFalse, v1alpha1.MembersUnreachableReason, quorumLostMessage(s, s.loss))
	}
}

// authFailure is the reason and message of an identity problem the pass
// ran into, for the Ready condition; ok is false without one. It is the
// one place auth errors become reasons: the root Secret, then etcd's
// refusals, by type.
func authFailure(s *scope) (reason, message string, ok bool) {
	c := s.cluster
	var rs *etcdaccess.RootSecretError
	if c.AuthEnabled() {
		for _, err := range append([]error{s.access.CredentialsErr}, s.phaseErrs...) {
			// The generated Secret is missing only until this pass creates it.
			if errors.As(err, &rs) && (!rs.Missing || c.Spec.Auth.RootSecretName != "") {
				return v1alpha1.AuthSecretInvalidReason, fmt.Sprintf("%v: put root's password under key %s", rs, v1alpha1.RootPasswordKey), true
			}
		}
	}
	refused := s.etcd.err
	if !etcd.IsIdentityRefused(refused) {
		refused = nil
		for _, err := range s.phaseErrs {
			if etcd.IsIdentityRefused(err) {
				refused = err
				break
			}
		}
	}
	switch {
	case refused == nil:
		return "", "", false
	case !c.AuthEnabled():
		return v1alpha1.AuthRequiredReason, fmt.Sprintf(
			"etcd's authentication is on and spec.auth does not enable it (a snapshot of a cluster with it on, or turned on by hand): set spec.auth.enabled and auth.rootSecretName to a Secret with root's password (%v)", refused), true
	case s.access.Identity == etcdaccess.IdentityCertificate:
		return v1alpha1.AuthFailedReason, fmt.Sprintf(
			"etcd refused the operator's client certificate (user %q): the user needs the root role (%v)", s.access.CertificateUser, refused), true
	}
	return v1alpha1.AuthFailedReason, fmt.Sprintf(
		"etcd refused root's password from Secret %s/%s: put root's current password in it (%v)", c.Namespace, c.RootSecretName(), refused), true
}
