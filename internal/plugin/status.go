package plugin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	tt "github.com/quorumctl/etcd-operator/internal/tlstransition"
)

// runStatus prints the status of the named cluster, or of every cluster in
// the namespace. It prints whatever it could see and then fails when some
// member or cluster could not be seen, so scripts notice a degraded cluster.
func runStatus(ctx context.Context, env *Env, w io.Writer, format string, names []string) error {
	var clusters []v1alpha1.EtcdCluster
	if len(names) == 1 {
		c, err := env.getCluster(ctx, names[0])
		if err != nil {
			return err
		}
		clusters = append(clusters, *c)
	} else {
		var err error
		if clusters, err = env.listClusters(ctx); err != nil {
			return err
		}
		if len(clusters) == 0 && format == OutputTable {
			_, err := fmt.Fprintf(w, "No EtcdClusters found in namespace %s.\n", env.Namespace)
			return err
		}
	}

	report := StatusReport{Clusters: []ClusterStatus{}}
	for i := range clusters {
		cs, err := clusterStatus(ctx, env, &clusters[i])
		if err != nil {
			// A single cluster's failure is the answer; with several, the
			// others are still worth showing, unless RBAC refuses them all.
			if len(names) == 1 || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				return err
			}
			cs = ClusterStatus{Name: clusters[i].Name, Namespace: clusters[i].Namespace, Members: []MemberStatus{}, Errors: []string{err.Error()}}
			// The operator's view does not need etcd: still worth showing.
			cs.TLSTransition = tlsTransition(&clusters[i])
		}
		report.Clusters = append(report.Clusters, cs)
	}

	done, err := printStructured(w, format, report)
	if err != nil {
		return err
	}
	if !done {
		for i, cs := range report.Clusters {
			if i > 0 {
				if _, err := fmt.Fprintln(w); err != nil {
					return fmt.Errorf("failed to write output: %w", err)
				}
			}
			if err := writeStatusTable(w, cs); err != nil {
				return err
			}
		}
	}
	return incompleteStatus(report)
}

func clusterStatus(ctx context.Context, env *Env, c *v1alpha1.EtcdCluster) (ClusterStatus, error) {
	s, err := env.connectTo(ctx, c)
	if err != nil {
		return ClusterStatus{}, err
	}
	defer s.Close()
	return buildStatus(c, s.collect(ctx)), nil
}

// buildStatus turns a snapshot into the printed status.
func buildStatus(c *v1alpha1.EtcdCluster, snap *snapshot) ClusterStatus {
	cs := ClusterStatus{Name: c.Name, Namespace: c.Namespace, Members: make([]MemberStatus, 0, len(snap.members)), TLSTransition: tlsTransition(c)}
	alarms := map[uint64][]string{}
	for _, a := range snap.alarms {
		alarms[a.MemberID] = append(alarms[a.MemberID], a.Type)
	}
	if snap.list != nil {
		cs.ClusterID = etcd.FormatMemberID(snap.list.ClusterID)
	}
	if leader, ok := snap.byID(snap.leaderID); ok {
		cs.Leader = leader.name
	}
	updated := map[string]bool{}
	for _, m := range c.Status.Members {
		updated[m.Name] = m.Updated
	}
	for _, v := range snap.members {
		ms := MemberStatus{Name: v.name, Alarms: []string{}, Updated: updated[v.name]}
		if id := v.id(); id != 0 {
			ms.ID = etcd.FormatMemberID(id)
			ms.Leader = id == snap.leaderID
			ms.Alarms = append(ms.Alarms, alarms[id]...)
			slices.Sort(ms.Alarms)
		}
		if v.member != nil || v.status != nil {
			ms.Role = roleName(v.learner())
		}
		if st := v.status; st != nil {
			ms.Reachable = true
			ms.Version = st.Version
			ms.DBSize, ms.DBSizeInUse = st.DBSize, st.DBSizeInUse
			ms.RaftTerm, ms.RaftIndex = st.RaftTerm, st.RaftIndex
			if cs.ClusterID == "" {
				cs.ClusterID = etcd.FormatMemberID(st.ClusterID)
			}
		}
		if v.pod != nil {
			ms.PodPhase = string(v.pod.Status.Phase)
			ms.PodReady = podReady(v.pod)
		}
		if v.err != nil {
			ms.Error = v.err.Error()
			ms.problem = problemKind(v.err)
		}
		cs.Members = append(cs.Members, ms)
	}
	for _, err := range []error{snap.listErr, snap.alarmErr} {
		if err != nil {
			cs.Errors = append(cs.Errors, err.Error())
		}
	}
	return cs
}

func roleName(learner bool) string {
	if learner {
		return "learner"
	}
	return "voter"
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func writeStatusTable(w io.Writer, cs ClusterStatus) error {
	title := fmt.Sprintf("EtcdCluster %s/%s", cs.Namespace, cs.Name)
	if cs.ClusterID != "" {
		title += ", cluster ID " + cs.ClusterID
	}
	if len(cs.Members) > 0 {
		title += ", leader " + orDash(cs.Leader)
	}
	if _, err := fmt.Fprintln(w, title); err != nil {
		return fmt.Errorf("failed to write output: %w", err)
	}
	if tr := cs.TLSTransition; tr != nil {
		if _, err := fmt.Fprintln(w, transitionLine(cs.Name, tr)); err != nil {
			return fmt.Errorf("failed to write output: %w", err)
		}
	}
	if len(cs.Members) > 0 {
		t := newTable("NAME", "ID", "ROLE", "LEADER", "VERSION", "UPDATED", "DB SIZE", "DB IN USE", "RAFT TERM", "RAFT INDEX", "ALARMS", "POD READY", "ERROR")
		for _, m := range cs.Members {
			t.add(statusRow(m)...)
		}
		if err := t.write(w); err != nil {
			return err
		}
	}
	for _, e := range cs.Errors {
		if _, err := fmt.Fprintf(w, "error: %s\n", e); err != nil {
			return fmt.Errorf("failed to write output: %w", err)
		}
	}
	return nil
}

func statusRow(m MemberStatus) []string {
	leader := "no"
	if m.Leader {
		leader = "yes"
	}
	version, size, inUse, term, index := "-", "-", "-", "-", "-"
	if m.Reachable {
		version = orDash(m.Version)
		size, inUse = humanBytes(m.DBSize), humanBytes(m.DBSizeInUse)
		term, index = strconv.FormatUint(m.RaftTerm, 10), strconv.FormatUint(m.RaftIndex, 10)
	}
	ready := "-"
	if m.PodPhase != "" {
		ready = strconv.FormatBool(m.PodReady)
	}
	alarms := "-"
	if len(m.Alarms) > 0 {
		alarms = strings.Join(m.Alarms, ",")
	}
	updated := "no"
	if m.Updated {
		updated = "yes"
	}
	return []string{orDash(m.Name), orDash(m.ID), orDash(m.Role), leader, version, updated, size, inUse, term, index, alarms, ready, orDash(m.problem)}
}

// incompleteError lists what status could not see, after the output.
type incompleteError struct{ problems []string }

func (e *incompleteError) Error() string {
	msg := "not every member could be seen:"
	for _, p := range e.problems {
		msg += "\n  " + p
	}
	return msg
}

func incompleteStatus(r StatusReport) error {
	var problems []string
	for _, cs := range r.Clusters {
		ref := cs.Namespace + "/" + cs.Name
		for _, e := range cs.Errors {
			problems = append(problems, "EtcdCluster "+ref+": "+e)
		}
		for _, m := range cs.Members {
			if m.Error != "" {
				problems = append(problems, fmt.Sprintf("EtcdCluster %s member %s: %s", ref, orDash(m.Name), m.Error))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return &incompleteError{problems: problems}
}

func tlsTransition(c *v1alpha1.EtcdCluster) *TLSTransition {
	tr := transitionOf(c)
	if tr == nil {
		return nil
	}
	return &TLSTransition{Phase: tr.Phase, Wait: tr.Wait, ClientsHTTPS: tr.ClientsHTTPS}
}

// transitionLine says where turning TLS on stands and, when the user holds
// it, what to do: the one wait only the user can end is PlaintextInUse.
func transitionLine(cluster string, tr *TLSTransition) string {
	line := "TLS transition: phase " + orDash(tr.Phase)
	if tr.Wait == "" {
		return line
	}
	line += ", waiting: " + tr.Wait
	switch tt.Reason(tr.Wait) {
	case tt.ReasonPlaintextInUse:
		line += " (move clients to https, then: kubectl etcd release-plaintext " + cluster + ")"
	case tt.ReasonPaused:
		line += " (spec.rollout.paused)"
	case tt.ReasonRestarting:
		line += " (a member is not back yet, or another change runs first)"
	case tt.ReasonQuorum:
		line += " (a peer URL moves only while every other member serves)"
	}
	return line
}
