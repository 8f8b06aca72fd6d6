package etcdrecovery

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
	"github.com/quorumctl/etcd-operator/internal/recovery"
	"github.com/quorumctl/etcd-operator/internal/remediation"
)

// endpointTimeout bounds each member's answer: a member on a lost node does
// not answer at all, and must not hold up the others.
const endpointTimeout = 3 * time.Second

// answer is what one member's own endpoint said.
type answer struct {
	status etcd.EndpointStatus
	err    error
	list   *etcd.MemberList
	// report is what the metrics endpoint said when Status did not answer.
	report *etcd.SelfReport
	// metricsURL is where the report came from.
	metricsURL string
}

// probe asks every member of the cluster, on its own endpoint, about itself
// and about the membership it knows, and combines that with self-heal's
// verdicts as the cluster last reported them (status.quorumLoss). Nothing
// here goes through a quorum: there may be none.
func (r *Reconciler) probe(ctx context.Context, cluster *v1alpha1.EtcdCluster) (recovery.Cluster, error) {
	c := recovery.Cluster{
		Name:      cluster.Name,
		ClusterID: cluster.Status.ClusterID,
		Memory:    cluster.Spec.Storage.Medium == v1alpha1.StorageMediumMemory,
		Paused:    cluster.DesiredReplicas() == 0,
	}
	members, err := r.membersOf(ctx, cluster)
	if err != nil {
		return c, err
	}
	answers := r.ask(ctx, cluster, members)
	verdicts := map[string]v1alpha1.GoneMember{}
	if ql := cluster.Status.QuorumLoss; ql != nil {
		for _, g := range ql.Gone {
			verdicts[g.Name] = g
		}
	}
	// The membership as the most advanced member that answers knows it;
	// with nobody answering, as the operator last recorded it.
	var list *etcd.MemberList
	var best etcd.EndpointStatus
	for _, a := range answers {
		if a.list != nil && (list == nil || a.status.RaftAppliedIndex > best.RaftAppliedIndex) {
			list, best = a.list, a.status
		}
	}
	byID := map[uint64]*v1alpha1.EtcdMember{}
	for _, m := range members {
		if id, err := etcd.ParseMemberID(m.Status.MemberID); err == nil {
			byID[id] = m
		}
	}
	add := func(m *v1alpha1.EtcdMember, id uint64, voter bool) {
		rm := recovery.Member{ID: id, Voter: voter}
		if m != nil {
			rm.Name = m.Name
			if a, ok := answers[m.Name]; ok && a.err == nil {
				rm.Answered, rm.Status = true, a.status
			} else if ok && a.report != nil && id != 0 && a.report.MemberID == id {
				// A report is only the member's if it carries the ID etcd
				// lists for it: the metrics say nothing of the cluster ID.
				rm.Report(*a.report, a.metricsURL)
			}
			if g, ok := verdicts[m.Name]; ok {
				rm.Verdict, rm.Detail = remediation.Reason(g.Reason), g.Detail
			}
		}
		c.Members = append(c.Members, rm)
	}
	if list != nil {
		for _, em := range list.Members {
			add(r.memberFor(members, byID, em), em.ID, !em.IsLearner)
		}
		return c, nil
	}
	for _, m := range members {
		id, _ := etcd.ParseMemberID(m.Status.MemberID)
		add(m, id, m.Status.Role == v1alpha1.MemberRoleVoter)
	}
	return c, nil
}

// membersOf lists the cluster's live EtcdMembers.
func (r *Reconciler) membersOf(ctx context.Context, cluster *v1alpha1.EtcdCluster) ([]*v1alpha1.EtcdMember, error) {
	var list v1alpha1.EtcdMemberList
	if err := r.List(ctx, &list, client.InNamespace(cluster.Namespace),
		client.MatchingLabels{v1alpha1.ClusterLabel: cluster.Name}); err != nil {
		return nil, fmt.Errorf("failed to list EtcdMembers of %s: %w", cluster.Name, err)
	}
	var out []*v1alpha1.EtcdMember
	for i := range list.Items {
		m := &list.Items[i]
		if m.DeletionTimestamp.IsZero() && m.Spec.ClusterName == cluster.Name && metav1.IsControlledBy(m, cluster) {
			out = append(out, m)
		}
	}
	return out, nil
}

// ask calls Status, and MemberListAt where Status answered, on every
// member's own endpoint at once. A member that answers for another cluster
// ID is not one of this cluster's survivors.
func (r *Reconciler) ask(ctx context.Context, cluster *v1alpha1.EtcdCluster, members []*v1alpha1.EtcdMember) map[string]answer {
	out := map[string]answer{}
	var eps []string
	for _, m := range members {
		eps = append(eps, r.clientURL(m))
	}
	if len(eps) == 0 {
		return out
	}
	access, err := etcdaccess.For(ctx, r.Client, r.APIReader, cluster, members)
	if err != nil {
		for _, m := range members {
			out[m.Name] = answer{err: err}
		}
		return out
	}
	c, err := r.Dialer.Dial(ctx, eps, access.Options...)
	if err != nil {
		// A dial with root's password exchanges it for a token through
		// raft, which a cluster without a quorum cannot do: the members'
		// metrics are what is left, as for a member whose Status fails.
		for _, m := range members {
			a := answer{err: err}
			a.report, a.metricsURL = r.selfReport(ctx, m)
			out[m.Name] = a
		}
		return out
	}
	defer c.Close()
	results := make([]answer, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() {
			callCtx, cancel := context.WithTimeout(ctx, endpointTimeout)
			defer cancel()
			ep := r.clientURL(m)
			st, err := c.Status(callCtx, ep)
			if err == nil && cluster.Status.ClusterID != "" && etcd.FormatMemberID(st.ClusterID) != cluster.Status.ClusterID {
				err = fmt.Errorf("member %s answers for cluster %s, not %s", m.Name, etcd.FormatMemberID(st.ClusterID), cluster.Status.ClusterID)
			}
			results[i] = answer{status: st, err: err}
			if err != nil {
				results[i].report, results[i].metricsURL = r.selfReport(ctx, m)
				return
			}
			if l, err := c.MemberListAt(callCtx, ep); err == nil {
				results[i].list = &l
			}
		})
	}
	wg.Wait()
	for i, m := range members {
		out[m.Name] = results[i]
	}
	return out
}

// selfReport reads a member's metrics (see etcd.ReadSelfReport).
func (r *Reconciler) selfReport(ctx context.Context, m *v1alpha1.EtcdMember) (*etcd.SelfReport, string) {
	if r.Metrics == nil {
		return nil, ""
	}
	return etcd.ReadSelfReport(ctx, r.Metrics, r.clientURL(m), v1alpha1.MetricsPort, endpointTimeout)
}

// memberFor finds the EtcdMember of an etcd member: by latched ID, then by
// recorded peer URL.
func (r *Reconciler) memberFor(members []*v1alpha1.EtcdMember, byID map[uint64]*v1alpha1.EtcdMember, em etcd.Member) *v1alpha1.EtcdMember {
	if m := byID[em.ID]; m != nil {
		return m
	}
	for _, m := range members {
		for _, u := range em.PeerURLs {
			if u == m.PeerURLIn(r.ClusterDomain) {
				return m
			}
		}
	}
	return nil
}

func (r *Reconciler) clientURL(m *v1alpha1.EtcdMember) string {
	return m.ClientURLIn(r.ClusterDomain)
}
