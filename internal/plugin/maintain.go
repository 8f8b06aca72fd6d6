package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/maintenance"
)

// runCompact compacts the key space up to revision; 0 means the current
// revision, the highest any member reports.
func runCompact(ctx context.Context, env *Env, w io.Writer, name string, revision int64) error {
	s, err := env.connect(ctx, name)
	if err != nil {
		return err
	}
	defer s.Close()
	if revision == 0 {
		for _, r := range s.statuses(ctx) {
			if r.status != nil && r.status.Revision > revision {
				revision = r.status.Revision
			}
		}
		if revision == 0 {
			return fmt.Errorf("no member of EtcdCluster %s reported its revision", s.ref())
		}
	}
	err = s.client.Compact(ctx, revision)
	switch {
	case etcd.IsCompacted(err):
		_, err = fmt.Fprintf(w, "EtcdCluster %s is already compacted at or beyond revision %d; nothing to do.\n", s.ref(), revision)
		return err
	case err != nil:
		return fmt.Errorf("failed to compact EtcdCluster %s to revision %d: %w", s.ref(), revision, err)
	}
	_, err = fmt.Fprintf(w, "Compacted EtcdCluster %s to revision %d.\nRun kubectl etcd defrag %s to return the freed space to the file system.\n", s.ref(), revision, s.cluster.Name)
	return err
}

// runDefrag defragments every member, one at a time, in the operator's order
// (maintenance.Order): everyone but the leader by name, then the leader,
// after leadership has moved to a member already done. Defragmenting blocks
// a member, and blocking the leader would cost the whole cluster its writes.
// For each member it reports what the operator's rule (the cluster's
// spec.maintenance.defrag) makes of it, so that a person can see why the
// operator did or did not defragment it by itself.
func runDefrag(ctx context.Context, env *Env, w io.Writer, name string) error {
	s, err := env.connect(ctx, name)
	if err != nil {
		return err
	}
	defer s.Close()
	snap := s.collect(ctx)
	plan, alarms, err := defragPlan(snap)
	if err != nil {
		return fmt.Errorf("refusing to defragment EtcdCluster %s: %w", s.ref(), err)
	}
	rule := maintenance.RuleOf(s.cluster.Spec.Maintenance.Defrag)
	members := s.maintenanceMembers(plan)
	done := map[string]bool{}
	for i, v := range plan {
		role := "follower"
		switch {
		case v.learner():
			role = "learner"
		case v.status.IsLeader():
			role = "leader"
			if to, ok := maintenance.Transferee(members, func(m maintenance.Member) bool { return done[m.Name] }); ok {
				if err := s.handOver(ctx, w, v, to, snap); err != nil {
					return err
				}
				role = "the leader, until it handed over to " + to
			}
		}
		verdict := rule.Evaluate(members[i].Usage)
		due := "not due"
		if verdict.Due {
			due = "due"
		}
		if _, err := fmt.Fprintf(w, "Defragmenting %s (%s)...\n  the operator's rule: %s: %s\n", v.name, role, due, verdict.Why); err != nil {
			return fmt.Errorf("failed to write output: %w", err)
		}
		if err := s.client.Defragment(ctx, v.endpoint); err != nil {
			return fmt.Errorf("failed to defragment member %s of EtcdCluster %s (done so far: %s): %w",
				v.name, s.ref(), orDash(strings.Join(doneNames(plan, done), ", ")), s.explainUnreachable(v.name, err))
		}
		after, err := s.client.Status(ctx, v.endpoint)
		if err != nil {
			return fmt.Errorf("member %s of EtcdCluster %s did not answer after defragmenting; stopping before the remaining members: %w",
				v.name, s.ref(), s.explainUnreachable(v.name, err))
		}
		if _, err := fmt.Fprintf(w, "  DB size %s -> %s (in use %s -> %s)\n",
			humanBytes(v.status.DBSize), humanBytes(after.DBSize), humanBytes(v.status.DBSizeInUse), humanBytes(after.DBSizeInUse)); err != nil {
			return fmt.Errorf("failed to write output: %w", err)
		}
		if after.LeaderID == 0 {
			return fmt.Errorf("member %s of EtcdCluster %s knows no leader after defragmenting; stopping before the remaining members", v.name, s.ref())
		}
		done[v.name] = true
	}
	if len(alarms.NoSpace) > 0 {
		_, err := fmt.Fprintf(w, "NOSPACE is still active on %s: etcd takes writes again once it is disarmed (kubectl etcd alarms disarm %s), "+
			"which the operator does by itself after compacting and defragmenting (spec.maintenance.noSpaceRecovery).\n",
			strings.Join(alarms.NoSpace, ", "), s.cluster.Name)
		return err
	}
	return nil
}

// handOver moves leadership from the leader to the named member before the
// leader is defragmented.
func (s *session) handOver(ctx context.Context, w io.Writer, leader memberView, to string, snap *snapshot) error {
	if _, err := fmt.Fprintf(w, "Moving leadership from %s to %s before defragmenting it...\n", leader.name, to); err != nil {
		return fmt.Errorf("failed to write output: %w", err)
	}
	var id uint64
	for _, v := range snap.members {
		if v.name == to {
			id = v.id()
		}
	}
	if err := s.client.MoveLeader(ctx, id); err != nil {
		return fmt.Errorf("failed to move the leadership of EtcdCluster %s from %s to %s before defragmenting it: %w", s.ref(), leader.name, to, err)
	}
	return nil
}

func doneNames(plan []memberView, done map[string]bool) []string {
	var out []string
	for _, v := range plan {
		if done[v.name] {
			out = append(out, v.name)
		}
	}
	return out
}

// maintenanceMembers is the plan as the operator's rule and order see it,
// each member measured against the quota it runs with.
func (s *session) maintenanceMembers(plan []memberView) []maintenance.Member {
	template := s.cluster.Spec.MemberTemplate
	if o := s.cluster.Status.Observed; o != nil {
		template = o.MemberTemplate
	}
	out := make([]maintenance.Member, 0, len(plan))
	for _, v := range plan {
		quota := v.status.DBSizeQuota
		if quota == 0 {
			quota = pod.QuotaBackendBytes(template)
		}
		out = append(out, maintenance.Member{
			Name: v.name, Voter: !v.learner(), Leader: v.status.IsLeader(), Healthy: true, Applied: v.status.RaftAppliedIndex,
			Usage: maintenance.Usage{DBSize: v.status.DBSize, InUse: v.status.DBSizeInUse, Quota: quota},
		})
	}
	return out
}

// defragPlan orders the members for defragmentation as the operator does,
// or says why the cluster is not healthy enough for it: defragmenting blocks
// each member in turn, so with a member already down or a leader missing it
// can cost quorum, and a CORRUPT alarm means someone must look at the
// cluster first. NOSPACE does not stop it: defragmenting (after compacting)
// is how a cluster comes back from it.
func defragPlan(snap *snapshot) ([]memberView, maintenance.Alarms, error) {
	var alarms maintenance.Alarms
	if snap.listErr != nil {
		return nil, alarms, snap.listErr
	}
	if snap.alarmErr != nil {
		return nil, alarms, snap.alarmErr
	}
	for _, a := range snap.alarms {
		who := etcd.FormatMemberID(a.MemberID)
		if v, ok := snap.byID(a.MemberID); ok && v.name != "" {
			who = v.name
		}
		switch a.Type {
		case etcd.AlarmNoSpace:
			alarms.NoSpace = append(alarms.NoSpace, who)
		case etcd.AlarmCorrupt:
			alarms.Corrupt = append(alarms.Corrupt, who)
		default:
			return nil, alarms, fmt.Errorf("an alarm etcd calls %s is active on %s", a.Type, who)
		}
	}
	slices.Sort(alarms.NoSpace)
	slices.Sort(alarms.Corrupt)
	if why, blocked := alarms.Blocking(); blocked {
		return nil, alarms, errors.New(why)
	}
	if snap.leaderID == 0 {
		return nil, alarms, fmt.Errorf("no member knows a leader")
	}
	byName := map[string]memberView{}
	var members []maintenance.Member
	leaderListed := false
	for _, v := range snap.members {
		if v.member == nil {
			continue // a Pod that is not a member has nothing to defragment for the cluster
		}
		if v.status == nil {
			return nil, alarms, fmt.Errorf("member %s does not answer: %w", v.label(), v.err)
		}
		if v.status.LeaderID != snap.leaderID {
			return nil, alarms, fmt.Errorf("member %s sees leader %s, others see %s: an election may be in progress",
				v.name, etcd.FormatMemberID(v.status.LeaderID), etcd.FormatMemberID(snap.leaderID))
		}
		leaderListed = leaderListed || v.id() == snap.leaderID
		byName[v.name] = v
		members = append(members, maintenance.Member{Name: v.name, Leader: v.id() == snap.leaderID})
	}
	if !leaderListed {
		return nil, alarms, fmt.Errorf("the leader %s is not in the member list", etcd.FormatMemberID(snap.leaderID))
	}
	var plan []memberView
	for _, m := range maintenance.Order(members) {
		plan = append(plan, byName[m.Name])
	}
	return plan, alarms, nil
}

// runMoveLeader hands leadership to the member named by to.
func runMoveLeader(ctx context.Context, env *Env, w io.Writer, name, to string) error {
	s, err := env.connect(ctx, name)
	if err != nil {
		return err
	}
	defer s.Close()
	snap := s.collect(ctx)
	if snap.listErr != nil {
		return snap.listErr
	}
	target, err := resolveMember(*snap.list, s.cluster.Name, to)
	if err != nil {
		return fmt.Errorf("cannot move the leadership of EtcdCluster %s: %w", s.ref(), err)
	}
	targetName := memberName(target, s.cluster.Name)
	if target.IsLearner {
		return fmt.Errorf("cannot move the leadership of EtcdCluster %s to %s: it is a learner, and learners do not vote", s.ref(), targetName)
	}
	if snap.leaderID == 0 {
		return fmt.Errorf("cannot move the leadership of EtcdCluster %s: no member knows a leader", s.ref())
	}
	if snap.leaderID == target.ID {
		_, err := fmt.Fprintf(w, "%s (%s) already leads EtcdCluster %s; nothing to do.\n", targetName, target.IDString(), s.ref())
		return err
	}
	// Only the leader accepts MoveLeader, and the client finds it among its
	// endpoints; failing that it would dial the leader's advertised URL,
	// which does not resolve outside the cluster. So the leader must have
	// answered through its tunnel.
	leader, ok := snap.byID(snap.leaderID)
	if !ok || leader.status == nil {
		who, reason := etcd.FormatMemberID(snap.leaderID), fmt.Errorf("etcd does not list it")
		if ok {
			who, reason = leader.label(), leader.err
		}
		return fmt.Errorf("cannot move the leadership of EtcdCluster %s: the leader %s is not reachable through a port-forward: %w",
			s.ref(), who, reason)
	}
	if err := s.client.MoveLeader(ctx, target.ID); err != nil {
		return fmt.Errorf("failed to move the leadership of EtcdCluster %s from %s to %s: %w", s.ref(), leader.label(), targetName, err)
	}
	_, err = fmt.Fprintf(w, "Moved the leadership of EtcdCluster %s from %s (%s) to %s (%s).\n",
		s.ref(), leader.label(), etcd.FormatMemberID(leader.id()), targetName, target.IDString())
	return err
}

// resolveMember finds a member by name, or else by hex ID: member names are
// Pod names and always contain a dash, so they never parse as an ID.
func resolveMember(list etcd.MemberList, cluster, ref string) (etcd.Member, error) {
	for _, m := range list.Members {
		if memberName(m, cluster) == ref {
			return m, nil
		}
	}
	if id, err := etcd.ParseMemberID(ref); err == nil {
		if m, ok := list.Find(id); ok {
			return m, nil
		}
	}
	known := make([]string, 0, len(list.Members))
	for _, m := range list.Members {
		known = append(known, orDash(memberName(m, cluster))+" ("+m.IDString()+")")
	}
	slices.Sort(known)
	return etcd.Member{}, fmt.Errorf("no member is named or has the ID %q; members are %s", ref, strings.Join(known, ", "))
}
