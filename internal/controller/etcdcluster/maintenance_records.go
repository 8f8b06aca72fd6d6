package etcdcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/memberstatus"
	"github.com/quorumctl/etcd-operator/internal/maintenance"
)

// collect records what a call that has returned did: the member's record is
// cleared, its defragmentation time and the bytes it gave back are noted,
// and a failure is retried later rather than at once.
func (r *Reconciler) collect(ctx context.Context, s *scope, mm *memo) error {
	j := mm.takeFinished()
	if j == nil {
		return nil
	}
	s.maint.finished = true
	log := ctrl.LoggerFrom(ctx)
	if j.action == maintenance.Compact {
		if j.err != nil {
			mm.setRetryAt(compactKey, s.now.Add(retryFailedCall))
			log.Error(j.err, "Compaction failed", "revision", j.revision)
			r.event(s.cluster, corev1.EventTypeWarning, "CompactFailed", "Compact",
				"Compacting at revision %d failed, trying again in %s: %v", j.revision, retryFailedCall, j.err)
			return nil
		}
		mm.setCompacted(j.revision)
		r.event(s.cluster, corev1.EventTypeNormal, "Compacted", "Compact", "Compacted at revision %d", j.revision)
		return nil
	}
	m := s.memberByKey(j.key)
	if m == nil {
		log.Info("A defragmented member is gone", "member", j.member, "error", fmt.Sprint(j.err))
		return nil
	}
	if j.err != nil {
		retry := maintenance.MinInterval
		if j.noSpace {
			retry = retryFailedCall
		}
		mm.setRetryAt(j.key, s.now.Add(retry))
		log.Error(j.err, "Defragmentation failed", "member", m.Name)
		r.event(s.cluster, corev1.EventTypeWarning, "DefragmentFailed", "Defragment",
			"Defragmenting member %s failed, trying again in %s: %v", m.Name, retry, j.err)
		return r.setMaintenanceRecord(ctx, m, nil, nil)
	}
	mm.setDefragmentedAt(j.key, j.compacted)
	now := metav1.NewTime(s.now)
	if s.cluster.Status.Maintenance == nil {
		s.cluster.Status.Maintenance = &v1alpha1.MaintenanceStatus{}
	}
	s.cluster.Status.Maintenance.LastDefragTime = &now
	after := "it did not answer afterwards"
	if j.after != nil {
		after = fmt.Sprintf("%s reclaimed, database %s -> %s (%s in use)",
			maintenance.FormatBytes(max(j.before.DBSize-j.after.DBSize, 0)), maintenance.FormatBytes(j.before.DBSize),
			maintenance.FormatBytes(j.after.DBSize), maintenance.FormatBytes(j.after.DBSizeInUse))
	}
	log.Info("Defragmented member", "member", m.Name, "took", s.now.Sub(j.started).String(), "result", after)
	r.event(s.cluster, corev1.EventTypeNormal, "MemberDefragmented", "Defragment",
		"Defragmented member %s (%s) in %s: %s", m.Name, j.role, s.now.Sub(j.started).Round(timeRounding), after)
	return r.setMaintenanceRecord(ctx, m, nil, &now)
}

// clearMarkers keeps the members' maintenance records true. A member marked
// as being defragmented with no call in flight is left from a process that
// stopped meanwhile: it keeps the mark, and with it self-heal's patience,
// until it answers again or maintenanceTimeout has passed, by when etcd has
// finished whatever defragmentation it was doing. A volume expansion's mark
// goes once the member runs on its grown volume.
func (r *Reconciler) clearMarkers(ctx context.Context, s *scope, mm *memo) error {
	running := mm.running()
	for _, m := range s.members {
		rec := m.Status.Maintenance
		if rec == nil {
			continue
		}
		switch rec.Kind {
		case v1alpha1.MemberMaintenanceDefragment:
			if running != nil && running.key == memberKey(m) {
				continue
			}
			if !s.answers(m) && s.now.Sub(rec.Since.Time) < maintenanceTimeout {
				s.maint.interrupted = m.Name
				continue
			}
			ctrl.LoggerFrom(ctx).Info("Clearing the record of a defragmentation no call is running for", "member", m.Name, "since", rec.Since.Time)
		case v1alpha1.MemberMaintenanceExpandVolume:
			if s.cluster.Status.Observed != nil && !equality.Semantic.DeepEqual(m.Spec.Storage, s.cluster.Status.Observed.Storage) {
				continue
			}
		}
		if err := r.setMaintenanceRecord(ctx, m, nil, m.Status.LastDefragTime); err != nil {
			return err
		}
	}
	return nil
}

// setMaintenanceRecord writes a member's maintenance record and, when last
// differs from what m holds, its last defragmentation time. They are two
// concerns, so that a record's write never restates a time it read; the
// time goes first, so that a finished defragmentation whose record then
// stays is one clearMarkers clears, not one that is forgotten.
func (r *Reconciler) setMaintenanceRecord(ctx context.Context, m *v1alpha1.EtcdMember, rec *v1alpha1.MemberMaintenance, last *metav1.Time) error {
	if !equality.Semantic.DeepEqual(m.Status.LastDefragTime, last) {
		m.Status.LastDefragTime = last
		if err := memberstatus.Apply(ctx, r.Client, m, memberstatus.Defrag); err != nil {
			return client.IgnoreNotFound(wrapMaintenance(m, err))
		}
	}
	m.Status.Maintenance = rec
	if err := memberstatus.Apply(ctx, r.Client, m, memberstatus.Maintenance); err != nil {
		return client.IgnoreNotFound(wrapMaintenance(m, err))
	}
	return nil
}

func wrapMaintenance(m *v1alpha1.EtcdMember, err error) error {
	return fmt.Errorf("failed to record the maintenance of EtcdMember %s: %w", m.Name, err)
}

// answers: etcd lists the member, its Pod exists, and it answers and
// follows the quorum's leader; a NOSPACE alarm does not count against it.
// Its Pod's readiness is not asked: a Pod built before the probe excluded
// NOSPACE is unready under the alarm whatever its etcd does.
func (s *scope) answers(m *v1alpha1.EtcdMember) bool {
	em, ok := s.inEtcd(m)
	if !ok || s.pods[m.Name] == nil {
		return false
	}
	h := s.etcd.health[em.ID]
	return h.ok() && h.status.LeaderID == s.quorumView().LeaderID
}

func (s *scope) memberByKey(key string) *v1alpha1.EtcdMember {
	for _, m := range s.members {
		if memberKey(m) == key {
			return m
		}
	}
	return nil
}

// inMaintenance: the operator is defragmenting the member, by a call in
// flight or (after a restart) by its record, so its silence is expected.
func (r *Reconciler) inMaintenance(s *scope, m *v1alpha1.EtcdMember) bool {
	if j := r.memos.get(s.cluster).running(); j != nil && j.key == memberKey(m) {
		return true
	}
	rec := m.Status.Maintenance
	return rec != nil && rec.Kind == v1alpha1.MemberMaintenanceDefragment && s.now.Sub(rec.Since.Time) < maintenanceTimeout
}
