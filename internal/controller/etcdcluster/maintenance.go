package etcdcluster

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/memberstatus"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
	"github.com/quorumctl/etcd-operator/internal/maintenance"
)

// maintState is what maintenance observed and decided in one pass, for the
// membership step that acts on it and for the Maintenance condition.
type maintState struct {
	// decided: the cluster was in a state to decide anything (formed,
	// answering, not paused); decision is then maintenance.Next's.
	decided  bool
	decision maintenance.Decision
	// running is the call in flight, if any.
	running *maintJob
	// finished: a call returned and was recorded this pass; the next step
	// waits for a pass that sees the member as it is now.
	finished bool
	// interrupted names a member marked as being defragmented with no call
	// in flight (the operator restarted meanwhile) that has not answered
	// since.
	interrupted string
	scheduleErr error
	alarms      maintenance.Alarms
	// disarmed: this pass disarmed NOSPACE.
	disarmed bool
}

// observeMaintenance runs on every pass: it collects what a background call
// left, keeps each member's maintenance record true, and decides the
// maintenance step (maintenance.Next), which reconcileMaintenance takes if
// the membership phase gets that far. Deciding here, whatever the
// membership phase does, keeps the Maintenance condition steady.
func (r *Reconciler) observeMaintenance(ctx context.Context, s *scope) (ctrl.Result, error) {
	mm := r.memos.get(s.cluster)
	if err := r.collect(ctx, s, mm); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.clearMarkers(ctx, s, mm); err != nil {
		return ctrl.Result{}, err
	}
	s.maint.running = mm.running()
	s.maint.alarms = s.alarmsByMember()
	if !s.cluster.ClusterFormed() || !s.etcd.usable() || s.desiredReplicas() == 0 {
		return ctrl.Result{}, nil
	}
	policy, err := maintenance.PolicyOf(s.cluster.Spec.Maintenance)
	s.maint.scheduleErr = err
	s.maint.decision = maintenance.Next(r.maintenanceView(s, mm), policy)
	s.maint.decided = true
	return ctrl.Result{}, nil
}

// maintenanceView is the cluster as maintenance.Next sees it: the counted
// members etcd lists, their health, usage and quota.
func (r *Reconciler) maintenanceView(s *scope, mm *memo) maintenance.Cluster {
	c := maintenance.Cluster{Alarms: s.maint.alarms, Compacted: mm.compactedAt(), Settling: s.settling(),
		Busy: s.maintenanceBusy(), Now: s.now}
	noSpace := len(c.Alarms.NoSpace) > 0
	leader := s.quorumView().LeaderID
	for _, m := range s.counted() {
		em, listed := s.inEtcd(m)
		if !listed {
			continue
		}
		h := s.etcd.health[em.ID]
		mem := maintenance.Member{
			Name: m.Name, Voter: !em.IsLearner, Leader: em.ID == leader,
			// Under the alarm etcd's own answer decides (see answers).
			Healthy:        s.healthyMember(m) || (noSpace && s.answers(m)),
			Applied:        h.status.RaftAppliedIndex,
			Usage:          maintenance.Usage{DBSize: h.status.DBSize, InUse: h.status.DBSizeInUse, Quota: quotaOf(m, h)},
			RetryAt:        mm.retryAt(memberKey(m)),
			DefragmentedAt: mm.defragmentedAt(memberKey(m)),
		}
		if m.Status.LastDefragTime != nil {
			mem.LastDefrag = m.Status.LastDefragTime.Time
		}
		c.Members = append(c.Members, mem)
		c.Revision = max(c.Revision, h.status.Revision)
	}
	if at := mm.retryAt(compactKey); s.now.Before(at) {
		c.CompactRetryAt = at
	}
	return c
}

// quotaOf is the quota a member runs with: as it reports it (etcd 3.6 and
// later), or as its template gives it.
func quotaOf(m *v1alpha1.EtcdMember, h memberHealth) int64 {
	if h.err == nil && h.status.DBSizeQuota > 0 {
		return h.status.DBSizeQuota
	}
	return pod.QuotaBackendBytes(m.Spec.MemberTemplate)
}

// maintenanceBusy names the work that routine defragmentation waits for: a
// scale, or a rollout that is free to go on (a paused one, or one held by a
// refused version, would hold maintenance back indefinitely).
func (s *scope) maintenanceBusy() string {
	n, desired := len(s.counted()), s.desiredReplicas()
	switch {
	case n < desired:
		return fmt.Sprintf("the scale-up to %d members", desired)
	case n > desired:
		return fmt.Sprintf("the scale-down to %d members", desired)
	case s.cluster.Status.Observed != nil && !s.cluster.Spec.Rollout.Paused && s.versionRefused == nil && s.outdatedCount() > 0:
		return fmt.Sprintf("the rollout (%d of %d members updated)", n-s.outdatedCount(), n)
	}
	return ""
}

// alarmsByMember names the members that raised each active alarm.
func (s *scope) alarmsByMember() maintenance.Alarms {
	var out maintenance.Alarms
	for _, a := range s.etcd.alarms {
		who := etcd.FormatMemberID(a.MemberID)
		if em, ok := s.etcd.byID(a.MemberID); ok {
			if m := s.memberByID(em.ID); m != nil {
				who = m.Name
			} else if em.Name != "" {
				who = em.Name
			}
		}
		switch a.Type {
		case etcd.AlarmNoSpace:
			out.NoSpace = append(out.NoSpace, who)
		case etcd.AlarmCorrupt:
			out.Corrupt = append(out.Corrupt, who)
		}
	}
	return out
}

func (s *scope) memberByID(id uint64) *v1alpha1.EtcdMember {
	for _, m := range append(append([]*v1alpha1.EtcdMember{}, s.members...), s.deleting...) {
		if em, ok := s.inEtcd(m); ok && em.ID == id {
			return m
		}
	}
	return nil
}

// reconcileMaintenance takes the maintenance step decided this pass. It
// comes after every membership change in flight and before the rollout and
// scaling: a call in flight holds those back (a second member must not go
// down while one is blocked), and NOSPACE recovery goes ahead of them, since
// the cluster refuses writes until it is done. Routine defragmentation, in
// turn, waits for them (maintenance.Cluster.Busy).
func (r *Reconciler) reconcileMaintenance(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	switch {
	case s.maint.running != nil:
		j := s.maint.running
		s.setProgress(progressReasonOf(j.noSpace), "%s", describeJob(j))
		return ctrl.Result{RequeueAfter: requeueMaintenance}, true, nil
	case s.maint.finished:
		return ctrl.Result{RequeueAfter: requeueSoon}, true, nil
	case s.maint.interrupted != "":
		s.setProgress(v1alpha1.DefragmentingReason, "waiting for %s, whose defragmentation was interrupted, to answer again", s.maint.interrupted)
		return ctrl.Result{RequeueAfter: requeueUnreachable}, true, nil
	case !s.maint.decided:
		return ctrl.Result{}, false, nil
	}
	mm := r.memos.get(s.cluster)
	d := s.maint.decision
	switch d.Action {
	case maintenance.Compact:
		r.startCompaction(s, mm, d)
		s.setProgress(v1alpha1.NoSpaceRecoveringReason, "compacting at revision %d to recover from NOSPACE", d.Revision)
		return ctrl.Result{RequeueAfter: requeueMaintenance}, true, nil
	case maintenance.MoveLeader:
		from := s.member(d.Member)
		res, err := r.moveLeaderTo(ctx, s, from, etcdMemberOf(s, d.Member), etcdMemberOf(s, d.To), "before defragmenting it")
		if err == nil {
			mm.handOver(d.Member, d.To)
		}
		s.setProgress(progressReasonOf(d.NoSpace), "moving leadership from %s to %s before defragmenting it", d.Member, d.To)
		return res, true, err
	case maintenance.Defragment:
		if err := r.startDefragmentation(ctx, s, mm, d); err != nil {
			return ctrl.Result{}, true, err
		}
		return ctrl.Result{RequeueAfter: requeueMaintenance}, true, nil
	case maintenance.Disarm:
		return r.disarm(ctx, s)
	}
	return ctrl.Result{}, false, nil
}

func progressReasonOf(noSpace bool) string {
	if noSpace {
		return v1alpha1.NoSpaceRecoveringReason
	}
	return v1alpha1.DefragmentingReason
}

func describeJob(j *maintJob) string {
	if j.action == maintenance.Compact {
		return fmt.Sprintf("compacting at revision %d (since %s)", j.revision, j.started.UTC().Format("15:04:05"))
	}
	return fmt.Sprintf("defragmenting %s (%s; since %s): %s", j.member, j.role, j.started.UTC().Format("15:04:05"), j.why)
}

func (r *Reconciler) startCompaction(s *scope, mm *memo, d maintenance.Decision) {
	eps, dial := r.endpoints(s), s.access.Options
	j := &maintJob{action: maintenance.Compact, revision: d.Revision, noSpace: true, started: s.now}
	r.event(s.cluster, corev1.EventTypeNormal, "Compacting", "Compact",
		"Compacting at revision %d to recover from NOSPACE; no key that exists now is touched", d.Revision)
	s.maint.running = j
	mm.start(j, func(ctx context.Context) (*etcd.EndpointStatus, error) {
		c, err := r.Dialer.Dial(ctx, eps, dial...)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		if err := c.Compact(ctx, d.Revision); err != nil && !etcd.IsCompacted(err) {
			return nil, err
		}
		return nil, nil
	}, r.lookAgain(s.cluster))
}

// lookAgain asks for the cluster to be reconciled now. The buffer holds a
// few; a call whose notice does not fit is found by the poll of
// requeueMaintenance instead.
func (r *Reconciler) lookAgain(c *v1alpha1.EtcdCluster) func() {
	key := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name}}
	return func() {
		if r.maintDone == nil {
			return
		}
		select {
		case r.maintDone <- event.GenericEvent{Object: key}:
		default:
		}
	}
}

// startDefragmentation records on the member that it is being
// defragmented, before anything happens to it, so that self-heal expects its
// silence even if the operator restarts meanwhile; then it starts the call.
func (r *Reconciler) startDefragmentation(ctx context.Context, s *scope, mm *memo, d maintenance.Decision) error {
	m := s.member(d.Member)
	em, _ := s.inEtcd(m)
	if len(em.ClientURLs) == 0 {
		return fmt.Errorf("member %s has no client URL to defragment", m.Name)
	}
	m.Status.Maintenance = &v1alpha1.MemberMaintenance{Kind: v1alpha1.MemberMaintenanceDefragment, Since: metav1.NewTime(s.now)}
	if err := memberstatus.Apply(ctx, r.Client, m, memberstatus.Maintenance); err != nil {
		return fmt.Errorf("failed to record the defragmentation of EtcdMember %s: %w", m.Name, err)
	}
	h := s.etcd.health[em.ID]
	role := "follower"
	switch to := mm.takeHandOver(m.Name); {
	case len(s.etcd.voters()) == 1:
		role = "the only member: the cluster is unavailable until it is done"
	case to != "":
		role = "the leader, until it handed over to " + to
	}
	j := &maintJob{action: maintenance.Defragment, member: m.Name, key: memberKey(m), endpoint: em.ClientURLs[0],
		role: role, why: d.Reason, noSpace: d.NoSpace, started: s.now, compacted: mm.compactedAt(),
		before: maintenance.Usage{DBSize: h.status.DBSize, InUse: h.status.DBSizeInUse, Quota: quotaOf(m, h)}}
	ctrl.LoggerFrom(ctx).Info("Defragmenting member", "member", m.Name, "role", role, "why", d.Reason)
	r.event(s.cluster, corev1.EventTypeNormal, "MemberDefragmenting", "Defragment",
		"Defragmenting member %s (%s): %s", m.Name, role, d.Reason)
	s.setProgress(progressReasonOf(d.NoSpace), "%s", describeJob(j))
	s.maint.running = j
	ep, dial := j.endpoint, s.access.Options
	// The member's own endpoint first; with a password, the others let
	// clientv3 get its token elsewhere should this one refuse (a learner
	// does). Defragment and Status name ep and go to it alone.
	eps := []string{ep}
	for _, other := range r.endpoints(s) {
		if other != ep && s.access.Identity == etcdaccess.IdentityPassword {
			eps = append(eps, other)
		}
	}
	mm.start(j, func(ctx context.Context) (*etcd.EndpointStatus, error) {
		c, err := r.Dialer.Dial(ctx, eps, dial...)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		if err := c.Defragment(ctx, ep); err != nil {
			return nil, err
		}
		if st, err := c.Status(ctx, ep); err == nil {
			return &st, nil
		}
		return nil, nil
	}, r.lookAgain(s.cluster))
	return nil
}

// disarm lifts every NOSPACE alarm once the members have room again.
func (r *Reconciler) disarm(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	var disarmed []string
	_, _, err := r.withClient(ctx, s, func(c etcd.Client) (etcd.Member, etcd.MemberList, error) {
		for _, a := range s.etcd.alarms {
			if a.Type != etcd.AlarmNoSpace {
				continue
			}
			if err := c.AlarmDisarm(ctx, a); err != nil {
				return etcd.Member{}, etcd.MemberList{}, fmt.Errorf("failed to disarm NOSPACE on member %s: %w", etcd.FormatMemberID(a.MemberID), err)
			}
			disarmed = append(disarmed, etcd.FormatMemberID(a.MemberID))
		}
		return etcd.Member{}, etcd.MemberList{}, nil
	})
	if err != nil {
		return ctrl.Result{}, true, err
	}
	now := metav1.NewTime(s.now)
	st := s.cluster.Status.Maintenance
	if st == nil {
		st = &v1alpha1.MaintenanceStatus{}
		s.cluster.Status.Maintenance = st
	}
	st.LastNoSpaceRecoveryTime = &now
	s.maint.disarmed = true
	ctrl.LoggerFrom(ctx).Info("Disarmed NOSPACE", "members", disarmed)
	r.event(s.cluster, corev1.EventTypeNormal, "NoSpaceRecovered", "DisarmAlarm",
		"Disarmed NOSPACE on %s: compacted and defragmented, the cluster takes writes again (%s)",
		strings.Join(s.maint.alarms.NoSpace, ", "), usageSummary(s))
	s.setProgress(v1alpha1.NoSpaceRecoveringReason, "disarmed NOSPACE")
	return ctrl.Result{RequeueAfter: requeueSoon}, true, nil
}

// usageSummary lists each member's database against its quota.
func usageSummary(s *scope) string {
	var parts []string
	for _, m := range s.counted() {
		em, ok := s.inEtcd(m)
		if !ok {
			continue
		}
		h := s.etcd.health[em.ID]
		if h.err != nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %s of %s", m.Name, maintenance.FormatBytes(h.status.DBSize), maintenance.FormatBytes(quotaOf(m, h))))
	}
	return strings.Join(parts, ", ")
}

// noSpaceReasons are the Maintenance reasons of an active NOSPACE alarm.
var noSpaceReasons = map[string]bool{
	v1alpha1.NoSpaceRecoveringReason: true, v1alpha1.NoSpaceOverQuotaReason: true, v1alpha1.NoSpaceRecoveryDisabledReason: true,
}

// announceMaintenance records a Warning Event when the cluster runs into a
// state of maintenance a person should hear of at once: a NOSPACE alarm,
// live data over the quota, a CORRUPT alarm, a schedule that does not parse.
// Once per transition, like announceStalled.
func (r *Reconciler) announceMaintenance(before, after *v1alpha1.EtcdCluster) {
	now := meta.FindStatusCondition(after.Status.Conditions, v1alpha1.MaintenanceCondition)
	if now == nil {
		return
	}
	was := ""
	if c := meta.FindStatusCondition(before.Status.Conditions, v1alpha1.MaintenanceCondition); c != nil {
		was = c.Reason
	}
	if now.Reason == was {
		return
	}
	switch {
	case noSpaceReasons[now.Reason] && !noSpaceReasons[was]:
		r.event(after, corev1.EventTypeWarning, "NoSpace", "Alarm", "%s", now.Message)
	case now.Reason == v1alpha1.NoSpaceOverQuotaReason, now.Reason == v1alpha1.CorruptAlarmReason, now.Reason == v1alpha1.InvalidDefragScheduleReason:
		r.event(after, corev1.EventTypeWarning, now.Reason, "Maintain", "%s", now.Message)
	}
}
