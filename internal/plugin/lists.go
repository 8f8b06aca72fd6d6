package plugin

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// runMembers prints etcd's own member list.
func runMembers(ctx context.Context, env *Env, w io.Writer, format, name string) error {
	s, err := env.connect(ctx, name)
	if err != nil {
		return err
	}
	defer s.Close()
	list, err := s.client.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("failed to list the members of EtcdCluster %s: %w", s.ref(), err)
	}
	report := memberListReport(s.cluster.Name, s.cluster.Namespace, list)
	if done, err := printStructured(w, format, report); done {
		return err
	}
	return writeMembersTable(w, report)
}

func memberListReport(cluster, namespace string, list etcd.MemberList) MemberListReport {
	r := MemberListReport{
		Cluster: cluster, Namespace: namespace,
		ClusterID: etcd.FormatMemberID(list.ClusterID),
		Members:   make([]EtcdMember, 0, len(list.Members)),
	}
	for _, m := range list.Members {
		r.Members = append(r.Members, EtcdMember{
			ID:         m.IDString(),
			Name:       m.Name,
			PeerURLs:   append([]string{}, m.PeerURLs...),
			ClientURLs: append([]string{}, m.ClientURLs...),
			IsLearner:  m.IsLearner,
		})
	}
	// Unstarted members have no name yet; they go last, by ID.
	slices.SortFunc(r.Members, func(a, b EtcdMember) int {
		return cmp.Or(compareBool(a.Name == "", b.Name == ""), strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	})
	return r
}

func writeMembersTable(w io.Writer, r MemberListReport) error {
	t := newTable("ID", "NAME", "PEER URLS", "CLIENT URLS", "LEARNER")
	for _, m := range r.Members {
		name := m.Name
		if name == "" {
			name = "(not started)"
		}
		t.add(m.ID, name, orDash(strings.Join(m.PeerURLs, ",")), orDash(strings.Join(m.ClientURLs, ",")), strconv.FormatBool(m.IsLearner))
	}
	return t.write(w)
}

// runAlarmList prints the active alarms with the names of their members.
func runAlarmList(ctx context.Context, env *Env, w io.Writer, format, name string) error {
	s, err := env.connect(ctx, name)
	if err != nil {
		return err
	}
	defer s.Close()
	alarms, err := s.client.AlarmList(ctx)
	if err != nil {
		return fmt.Errorf("failed to list the alarms of EtcdCluster %s: %w", s.ref(), err)
	}
	// Names are a convenience: without the member list the IDs still say it.
	list, _ := s.client.MemberList(ctx)
	report := alarmReport(s.cluster.Name, s.cluster.Namespace, alarms, list)
	if done, err := printStructured(w, format, report); done {
		return err
	}
	if len(report.Alarms) == 0 {
		_, err := fmt.Fprintf(w, "No active alarms in EtcdCluster %s.\n", s.ref())
		return err
	}
	t := newTable("MEMBER", "MEMBER ID", "ALARM")
	for _, a := range report.Alarms {
		t.add(orDash(a.Member), a.MemberID, a.Type)
	}
	return t.write(w)
}

func alarmReport(cluster, namespace string, alarms []etcd.Alarm, list etcd.MemberList) AlarmReport {
	r := AlarmReport{Cluster: cluster, Namespace: namespace, Alarms: make([]Alarm, 0, len(alarms))}
	for _, a := range alarms {
		out := Alarm{MemberID: etcd.FormatMemberID(a.MemberID), Type: a.Type}
		if m, ok := list.Find(a.MemberID); ok {
			out.Member = memberName(m, cluster)
		}
		r.Alarms = append(r.Alarms, out)
	}
	slices.SortFunc(r.Alarms, func(a, b Alarm) int {
		return cmp.Or(strings.Compare(a.Member, b.Member), strings.Compare(a.MemberID, b.MemberID), strings.Compare(a.Type, b.Type))
	})
	return r
}

// runAlarmDisarm disarms every active alarm, one by one, and reports each.
func runAlarmDisarm(ctx context.Context, env *Env, w io.Writer, name string) error {
	s, err := env.connect(ctx, name)
	if err != nil {
		return err
	}
	defer s.Close()
	alarms, err := s.client.AlarmList(ctx)
	if err != nil {
		return fmt.Errorf("failed to list the alarms of EtcdCluster %s: %w", s.ref(), err)
	}
	if len(alarms) == 0 {
		_, err := fmt.Fprintf(w, "No active alarms in EtcdCluster %s; nothing to disarm.\n", s.ref())
		return err
	}
	list, _ := s.client.MemberList(ctx)
	slices.SortFunc(alarms, func(a, b etcd.Alarm) int {
		return cmp.Or(cmp.Compare(a.MemberID, b.MemberID), strings.Compare(a.Type, b.Type))
	})
	var failed []string
	nospace := false
	for _, a := range alarms {
		who := etcd.FormatMemberID(a.MemberID)
		if m, ok := list.Find(a.MemberID); ok && memberName(m, s.cluster.Name) != "" {
			who = memberName(m, s.cluster.Name) + " (" + who + ")"
		}
		if err := s.client.AlarmDisarm(ctx, a); err != nil {
			failed = append(failed, fmt.Sprintf("%s alarm of member %s: %v", a.Type, who, err))
			continue
		}
		nospace = nospace || a.Type == etcd.AlarmNoSpace
		if _, err := fmt.Fprintf(w, "Disarmed %s alarm of member %s.\n", a.Type, who); err != nil {
			return fmt.Errorf("failed to write output: %w", err)
		}
	}
	if nospace {
		// etcd raises NOSPACE again at the next write while the database is
		// still over its quota.
		if _, err := fmt.Fprintf(w, "Note: NOSPACE returns unless the database is compacted and defragmented below its quota.\n"); err != nil {
			return fmt.Errorf("failed to write output: %w", err)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("failed to disarm %d of %d alarms of EtcdCluster %s:\n  %s", len(failed), len(alarms), s.ref(), strings.Join(failed, "\n  "))
	}
	return nil
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
