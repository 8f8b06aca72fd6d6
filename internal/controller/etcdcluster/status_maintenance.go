package etcdcluster

// The Maintenance condition, computed here and called from updateStatus in
// status.go with the others.

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/maintenance"
)

// setMaintenance reports defragmentation and NOSPACE recovery: what is due,
// under way, or stuck.
func setMaintenance(s *scope) {
	reason, msg, active := maintenanceCondition(s)
	status := metav1.ConditionFalse
	switch {
	case active:
		status = metav1.ConditionTrue
	case reason == v1alpha1.EtcdUnreachableReason, reason == v1alpha1.EtcdReplyTooLargeReason:
		status = metav1.ConditionUnknown
	}
	setCondition(s, v1alpha1.MaintenanceCondition, status, reason, msg)
}

// maintenanceCondition is the Maintenance condition's reason and message,
// and whether it is True: maintenance is due, under way, or stuck.
func maintenanceCondition(s *scope) (string, string, bool) {
	m, d := s.maint, s.maint.decision
	switch {
	case m.running != nil && m.running.noSpace:
		return v1alpha1.NoSpaceRecoveringReason, fmt.Sprintf("etcd raised NOSPACE on %s and refuses writes until it is disarmed; %s",
			strings.Join(m.alarms.NoSpace, ", "), describeJob(m.running)), true
	case m.running != nil:
		return v1alpha1.DefragmentingReason, describeJob(m.running), true
	case m.disarmed:
		return v1alpha1.MaintenanceIdleReason, "NOSPACE is disarmed: the cluster takes writes again", false
	case !m.decided && s.cluster.ClusterFormed() && !s.etcd.usable():
		reason, msg := unanswered(s)
		return reason, msg, false
	case !m.decided:
		return v1alpha1.MaintenanceIdleReason, "nothing to maintain: the cluster has not formed, or is paused", false
	}
	switch d.Action {
	case maintenance.Blocked:
		return v1alpha1.CorruptAlarmReason, d.Reason, true
	case maintenance.RecoveryOff:
		return v1alpha1.NoSpaceRecoveryDisabledReason, d.Reason, true
	case maintenance.OverQuota:
		return v1alpha1.NoSpaceOverQuotaReason, d.Reason, true
	}
	switch {
	case d.NoSpace:
		return v1alpha1.NoSpaceRecoveringReason, d.Reason, true
	case m.scheduleErr != nil:
		return v1alpha1.InvalidDefragScheduleReason, fmt.Sprintf("spec.maintenance.defrag.schedule: %v; no member is defragmented until it is fixed (NOSPACE recovery still runs)", m.scheduleErr), true
	case m.interrupted != "":
		return v1alpha1.DefragmentingReason, fmt.Sprintf("waiting for %s, whose defragmentation was interrupted, to answer again", m.interrupted), true
	case d.Action == maintenance.Defragment:
		return v1alpha1.DefragmentingReason, fmt.Sprintf("defragmenting %s: %s", d.Member, d.Reason), true
	case d.Action == maintenance.MoveLeader:
		return v1alpha1.DefragmentingReason, fmt.Sprintf("moving leadership from %s to %s before defragmenting it", d.Member, d.To), true
	case d.Action == maintenance.Wait:
		return v1alpha1.DefragDueReason, d.Reason, true
	case !s.cluster.Spec.Maintenance.Defrag.On():
		return v1alpha1.DefragDisabledReason, d.Reason, false
	}
	msg := "no member is due for defragmentation; " + ruleText(maintenance.RuleOf(s.cluster.Spec.Maintenance.Defrag))
	if st := s.cluster.Status.Maintenance; st != nil && st.LastDefragTime != nil {
		msg += "; last defragmentation " + st.LastDefragTime.UTC().Format(time.RFC3339)
	}
	return v1alpha1.MaintenanceIdleReason, msg, false
}

// ruleText says when a member is due, in words.
func ruleText(r maintenance.Rule) string {
	return fmt.Sprintf("one is when %d%% of its database file, and at least %s, is free, or when the file reaches %d%% of its quota",
		r.FreePercent, maintenance.FormatBytes(r.MinReclaim), r.QuotaPercent)
}

// noSpace: a NOSPACE alarm is active and was not disarmed this pass.
func noSpace(s *scope) bool { return len(s.maint.alarms.NoSpace) > 0 && !s.maint.disarmed }
