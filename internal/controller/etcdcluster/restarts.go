package etcdcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/memberstatus"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/remediation"
)

// A rollout restarts a member by approving its restart to one template hash
// (status.restartApproved, which the member controller waits for before it
// re-creates the Pod) and recording when (status.rolledAt). From then until
// the member is a healthy voter on that template, it is restarting: the
// rollout restarts nothing else, whatever one look at the member says. The
// look may predate the restart (a cache behind the API server still shows
// the old Pod, ready), or a loaded node may fail a look at a member that is
// fine; neither may let a second member go down while the first comes back.

// expectRestart remembers that the rollout restarted m to the template hash.
func (mm *memo) expectRestart(m *v1alpha1.EtcdMember, hash string) {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	mm.restarts[memberKey(m)] = hash
}

// restartOf is the hash the rollout restarted m to, if it has not yet seen
// the member back on it.
func (mm *memo) restartOf(m *v1alpha1.EtcdMember) (string, bool) {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	h, ok := mm.restarts[memberKey(m)]
	return h, ok
}

// settleRestarts drops the restarts of members that are back or gone.
func (mm *memo) settleRestarts(keep map[string]bool) {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	for k := range mm.restarts {
		if !keep[k] {
			delete(mm.restarts, k)
		}
	}
}

// restartedTo is the template hash a restart of the member in flight goes
// to, if one is: the operator's own memory of it, or, after an operator
// restart, the member's record of it.
func (r *Reconciler) restartedTo(s *scope, m *v1alpha1.EtcdMember) (string, bool) {
	if h, ok := r.memos.get(s.cluster).restartOf(m); ok {
		return h, true
	}
	if m.Status.RolledAt == nil {
		return "", false
	}
	if m.Status.RestartApproved != "" {
		return m.Status.RestartApproved, true
	}
	// Rolled by an operator from before approvals.
	return pod.TemplateHash(m), true
}

// restartedToTarget: the rollout has already given the member the target
// template and trust bundles, and approved its restart to them, even if
// this pass's look, from a cache that has not caught up, still shows the
// member or its Pod on the old ones. Such a member is not outdated: taking
// it for one would restart it a second time (its restart counts as down),
// rewrite its approval, and report it updating twice. A member restarted
// to an earlier target is still outdated, and goes to the new one at once.
func (r *Reconciler) restartedToTarget(s *scope, m *v1alpha1.EtcdMember) bool {
	h, ok := r.restartedTo(s, m)
	return ok && h == s.targetHash(m)
}

// targetHash is the template hash restartMember approves for the member:
// its own, if it is on the target already, else that of the member given
// the target.
func (s *scope) targetHash(m *v1alpha1.EtcdMember) string {
	if !s.outdated(m) {
		return pod.TemplateHash(m)
	}
	t := m.DeepCopy()
	s.toTarget(t)
	return pod.TemplateHash(t)
}

// toTarget gives the member the target template and trust bundles.
func (s *scope) toTarget(m *v1alpha1.EtcdMember) {
	tls := s.targetTLS(m)
	m.Spec.MemberTemplate = *s.cluster.Status.Observed.MemberTemplate.DeepCopy()
	m.Spec.TLS = tls
}

// backOn: the member's Pod is built from the template hash, ready by the
// kubelet's probe, and etcd has the member as a voter that answers and
// follows the quorum's leader.
func (s *scope) backOn(m *v1alpha1.EtcdMember, hash string) bool {
	p := s.pods[m.Name]
	if p == nil || !p.DeletionTimestamp.IsZero() || !kubeletReady(p) {
		return false
	}
	// A Pod without the hash predates hashing (see pod.Outdated); the
	// member controller hashes it, and every Pod it builds, at once.
	// A restart an older operator approved carries its hash, which the
	// member controller has since rewritten on the Pod in today's form.
	if h, ok := p.Annotations[pod.TemplateHashAnnotation]; ok && h != hash &&
		(h != pod.TemplateHash(m) || !pod.LegacyHashOf(m, hash)) {
		return false
	}
	em, listed := s.inEtcd(m)
	if !listed || em.IsLearner || em.Name == "" {
		return false
	}
	h := s.etcd.health[em.ID]
	return h.ok() && h.status.LeaderID == s.quorumView().LeaderID && h.status.LeaderID != 0
}

// builtFor: the member's Pod carries the template hash.
func (s *scope) builtFor(m *v1alpha1.EtcdMember, hash string) bool {
	p := s.pods[m.Name]
	return p != nil && hash != "" && p.Annotations[pod.TemplateHashAnnotation] == hash
}

// restarting names the members the rollout restarted that are not back yet,
// and forgets the restarts of those that are.
func (r *Reconciler) restarting(s *scope) []string {
	var out []string
	keep := map[string]bool{}
	for _, m := range s.members {
		h, ok := r.restartedTo(s, m)
		if !ok || s.backOn(m, h) {
			continue
		}
		keep[memberKey(m)] = true
		out = append(out, m.Name)
	}
	r.memos.get(s.cluster).settleRestarts(keep)
	return out
}

// podOutdated: the member's Pod was built from another spec than the
// member's, and no restart to the member's spec has been approved: the
// rollout takes it in turn like a template change.
func (s *scope) podOutdated(m *v1alpha1.EtcdMember) bool {
	p := s.pods[m.Name]
	return p != nil && pod.Outdated(m, p) && !pod.RestartApproved(m)
}

// downFor is how long the kubelet has reported the member's Pod not ready:
// from its Ready condition's last change, or from the Pod's creation if it
// never had one (it was never scheduled, say). Zero for a ready Pod, and for
// none at all: the member controller is about to create it.
func (s *scope) downFor(m *v1alpha1.EtcdMember) time.Duration {
	p := s.pods[m.Name]
	if p == nil || !p.DeletionTimestamp.IsZero() || kubeletReady(p) {
		return 0
	}
	since := p.CreationTimestamp.Time
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && !c.LastTransitionTime.IsZero() {
			since = c.LastTransitionTime.Time
		}
	}
	if since.IsZero() || s.now.Before(since) {
		return 0
	}
	return s.now.Sub(since)
}

func kubeletReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// restartMember gives the member the target template and trust bundles and
// approves its restart to them. The template goes first: a member
// controller that sees it without the approval waits, and if the approval
// then fails, the next pass finds the member's Pod outdated and approves it
// in turn. The operator
// remembers the restart only once both are written (see restarting).
func (r *Reconciler) restartMember(ctx context.Context, s *scope, m *v1alpha1.EtcdMember) error {
	hash := s.targetHash(m)
	if s.outdated(m) {
		patch := client.MergeFrom(m.DeepCopy())
		s.toTarget(m)
		if err := r.Patch(ctx, m, patch); err != nil {
			return fmt.Errorf("failed to update the template of EtcdMember %s: %w", m.Name, err)
		}
	}
	now := metav1.NewTime(s.now)
	m.Status.RolledAt = &now
	m.Status.RestartApproved = hash
	if err := memberstatus.Apply(ctx, r.Client, m, memberstatus.Restart); err != nil {
		return fmt.Errorf("failed to approve the restart of EtcdMember %s: %w", m.Name, err)
	}
	if m.Status.RestartApproved != hash {
		// The API server dropped the field: its CRD predates it, and the
		// member controller would wait for an approval that never comes.
		return fmt.Errorf("the API server did not keep status.restartApproved of EtcdMember %s: the EtcdMember CRD is older than the operator; "+
			"apply the chart's CRDs (kubectl apply --server-side --force-conflicts -f charts/etcd-operator/crds/)", m.Name)
	}
	r.memos.get(s.cluster).expectRestart(m, hash)
	return nil
}

// refreshIdle handles, one per pass, members that hold nothing (never
// started), cannot start as they are, and are not on the target: they cost
// nothing to change, and waiting for them would wait for ever on what the
// target has given up (a node selector that no node meets, say, which keeps
// a learner from starting, and so from the promotion everything else waits
// for). One that can start is left alone: self-heal gives a replacement the
// template of the member it replaces on purpose, so that a bad pending edit
// cannot keep it from starting.
//
// A replacement the rollout made for a member that is on the target again
// (the change was set back before it joined) is dropped; any other such
// member is given the target template and its Pod re-created.
func (r *Reconciler) refreshIdle(ctx context.Context, s *scope) (bool, error) {
	if s.cluster.Spec.Rollout.Paused || s.versionRefused != nil {
		return false, nil
	}
	for x, y := range s.replacedBy {
		orig := s.member(x)
		if orig == nil || !s.holdsNothing(y) || s.outdated(orig) || s.podOutdated(orig) || s.isBroken(orig) {
			continue
		}
		r.event(s.cluster, corev1.EventTypeNormal, "ReplacementAbandoned", "RemoveMember",
			"Removing member %s, which never started: %s, which it was to replace, is on the target template again", y.Name, x)
		s.setProgress(v1alpha1.RollingUpdateReason, "removing %s: %s no longer needs replacing", y.Name, x)
		if err := r.Delete(ctx, y); client.IgnoreNotFound(err) != nil {
			return true, fmt.Errorf("failed to delete EtcdMember %s: %w", y.Name, err)
		}
		return true, nil
	}
	for _, m := range s.members {
		if !s.holdsNothing(m) || !s.outdated(m) && !s.podOutdated(m) || !s.cannotRun(m) {
			continue
		}
		if err := r.restartMember(ctx, s, m); err != nil {
			return true, err
		}
		r.event(s.cluster, corev1.EventTypeNormal, "MemberUpdating", "RollMember",
			"Giving member %s, which has never started, the new template at once", m.Name)
		s.setProgress(v1alpha1.RollingUpdateReason, "giving %s, which has never started, the new template", m.Name)
		return true, nil
	}
	return false, nil
}

// isBroken: self-heal judged the member broken this pass.
func (s *scope) isBroken(m *v1alpha1.EtcdMember) bool {
	if m == nil {
		return false
	}
	for _, b := range s.broken {
		if b.member.Name == m.Name {
			return true
		}
	}
	return false
}

// cannotRun: the scheduler finds no place for the member's Pod, or its etcd
// container cannot start its image, or keeps failing.
func (s *scope) cannotRun(m *v1alpha1.EtcdMember) bool {
	p := s.pods[m.Name]
	if p == nil {
		return false
	}
	if !remediation.UnschedulableSince(p).IsZero() {
		return true
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && imageFailures[w.Reason] || cs.RestartCount >= rolloutCrashRestarts {
			return true
		}
	}
	return false
}
