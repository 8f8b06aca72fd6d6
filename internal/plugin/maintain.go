package plugin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/quorumctl/etcd-operator/internal/etcd"
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

// runDefrag defragments every member, one at a time, followers first and
// the leader last: defragmenting blocks a member, and blocking the leader
// costs the whole cluster its writes, so that happens once, at the end,
// when the followers are known to have come back.
func runDefrag(ctx context.Context, env *Env, w io.Writer, name string) error {
	s, err := env.connect(ctx, name)
	if err != nil {
		return err
	}
	defer s.Close()
	plan, err := defragPlan(s.collect(ctx))
	if err != nil {
		return fmt.Errorf("refusing to defragment EtcdCluster %s: %w", s.ref(), err)
	}
	var done []string
	for _, v := range plan {
		role := "follower"
		switch {
		case v.learner():
			role = "learner"
		case v.status.IsLeader():
			role = "leader"
		}
		if _, err := fmt.Fprintf(w, "Defragmenting %s (%s)...\n", v.name, role); err != nil {
			return fmt.Errorf("failed to write output: %w", err)
		}
		if err := s.client.Defragment(ctx, v.endpoint); err != nil {
			return fmt.Errorf("failed to defragment member %s of EtcdCluster %s (done so far: %s): %w",
				v.name, s.ref(), orDash(strings.Join(done, ", ")), s.explainUnreachable(v.name, err))
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
		done = append(done, v.name)
	}
	return nil
}

// defragPlan orders the members for defragmentation, or says why the
// cluster is not healthy enough for it: defragmenting blocks each member in
// turn, so with a member already down or a leader missing it can cost
// quorum, and an active alarm means someone must look at the cluster first.
func defragPlan(snap *snapshot) ([]memberView, error) {
	if snap.listErr != nil {
		return nil, snap.listErr
	}
	if snap.alarmErr != nil {
		return nil, snap.alarmErr
	}
	if len(snap.alarms) > 0 {
		var active []string
		for _, a := range snap.alarms {
			who := etcd.FormatMemberID(a.MemberID)
			if v, ok := snap.byID(a.MemberID); ok && v.name != "" {
				who = v.name
			}
			active = append(active, a.Type+" on "+who)
		}
		slices.Sort(active)
		return nil, fmt.Errorf("alarms are active (%s); for NOSPACE, compact, disarm the alarm and defragment again (kubectl etcd alarms disarm)", strings.Join(active, ", "))
	}
	if snap.leaderID == 0 {
		return nil, fmt.Errorf("no member knows a leader")
	}
	var followers []memberView
	var leader *memberView
	for _, v := range snap.members {
		if v.member == nil {
			continue // a Pod that is not a member has nothing to defragment for the cluster
		}
		if v.status == nil {
			return nil, fmt.Errorf("member %s does not answer: %w", v.label(), v.err)
		}
		if v.status.LeaderID != snap.leaderID {
			return nil, fmt.Errorf("member %s sees leader %s, others see %s: an election may be in progress",
				v.name, etcd.FormatMemberID(v.status.LeaderID), etcd.FormatMemberID(snap.leaderID))
		}
		if v.id() == snap.leaderID {
			leader = &v
			continue
		}
		followers = append(followers, v)
	}
	if leader == nil {
		return nil, fmt.Errorf("the leader %s is not in the member list", etcd.FormatMemberID(snap.leaderID))
	}
	// snap.members is sorted by name, so followers are too.
	return append(followers, *leader), nil
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
