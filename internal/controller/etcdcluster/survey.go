package etcdcluster

import (
	"context"
	"fmt"
	"sync"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// endpoints are the client URLs to dial: members with a running Pod, voters
// first. Learners refuse most requests, so they are only a last resort.
func (r *Reconciler) endpoints(s *scope) []string {
	var voters, others []string
	for _, m := range s.members {
		if p := s.pods[m.Name]; p == nil || p.Status.PodIP == "" {
			continue
		}
		if m.Status.Role == v1alpha1.MemberRoleVoter {
			voters = append(voters, s.access.URL(r.clientURL(m)))
		} else {
			others = append(others, s.access.URL(r.clientURL(m)))
		}
	}
	return append(voters, others...)
}

func (r *Reconciler) inspectEtcd(ctx context.Context, s *scope) (view etcdView) {
	view = etcdView{inspected: true, health: map[uint64]memberHealth{}}
	eps := r.endpoints(s)
	if len(eps) == 0 {
		view.err = fmt.Errorf("no member Pod is running")
		return view
	}
	// ctx is narrowed below, and cancelled before this runs.
	outer := ctx
	defer func() {
		if view.err != nil {
			view.reports = r.selfReports(outer, s, view)
		}
	}()
	c, err := r.Dialer.Dial(ctx, eps, s.access.Options...)
	if err != nil {
		view.err = fmt.Errorf("failed to dial etcd: %w", err)
		return view
	}
	defer c.Close()
	// Each step has its own budget: without a quorum the linearizable list
	// waits out its deadline, and the fallback must still have time left.
	listCtx, cancel := context.WithTimeout(ctx, quorumReadTimeout)
	view.list, err = c.MemberList(listCtx)
	cancel()
	if err != nil {
		view.err = fmt.Errorf("failed to list etcd members: %w", err)
		for _, ep := range eps {
			epCtx, cancel := context.WithTimeout(ctx, endpointTimeout)
			own, ownErr := c.MemberListAt(epCtx, ep)
			cancel()
			if ownErr == nil {
				view.list, view.degraded = own, true
				break
			}
		}
		if !view.degraded {
			return view
		}
	}
	parent := ctx
	ctx, cancel = context.WithTimeout(ctx, endpointTimeout)
	defer cancel()
	// One Status call per started member, concurrently, each writing its
	// own slot; the map is filled afterwards by this goroutine alone.
	results := make([]memberHealth, len(view.list.Members))
	var wg sync.WaitGroup
	for i, m := range view.list.Members {
		if len(m.ClientURLs) == 0 {
			results[i] = memberHealth{err: fmt.Errorf("member %s has not started", m.IDString())}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := c.Status(ctx, m.ClientURLs[0])
			results[i] = memberHealth{status: st, err: err}
		}()
	}
	wg.Wait()
	// etcd refusing the operator's identity says nothing of the members'
	// health: the view is unusable (no change is made on it) and the
	// members' metrics stand in for their Status, as without a quorum.
	for _, h := range results {
		if etcd.IsAuthFailed(h.err) || etcd.IsAuthRequired(h.err) {
			view.err, view.degraded = fmt.Errorf("etcd refused the operator's identity: %w", h.err), true
			break
		}
	}
	view.alarms, view.alarmErr = readAlarms(parent, c, view, results)
	for i, m := range view.list.Members {
		results[i].alarms = view.alarms
		view.health[m.ID] = results[i]
	}
	if r.memos.get(s.cluster).viewCheckDue(s.now) {
		view.ownLists = ownMemberLists(ctx, c, view)
	}
	return view
}

// selfReports reads, at once and each under its own budget, the metrics
// endpoint of every member with a Pod whose Status did not answer. Without
// a quorum, a member restarted on its data serves no client request, and
// its metrics are the only place it says how far it got.
func (r *Reconciler) selfReports(ctx context.Context, s *scope, view etcdView) map[string]etcd.SelfReport {
	if r.Metrics == nil {
		return nil
	}
	answered := map[uint64]bool{}
	for id, h := range view.health {
		answered[id] = h.err == nil
	}
	var ask []*v1alpha1.EtcdMember
	for _, m := range s.members {
		if p := s.pods[m.Name]; p == nil || p.Status.PodIP == "" {
			continue
		}
		if id, err := etcd.ParseMemberID(m.Status.MemberID); err == nil && answered[id] {
			continue
		}
		ask = append(ask, m)
	}
	reports := make([]*etcd.SelfReport, len(ask))
	var wg sync.WaitGroup
	for i, m := range ask {
		url, err := etcd.MetricsURLFor(r.clientURL(m), v1alpha1.MetricsPort)
		if err != nil {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, endpointTimeout)
			defer cancel()
			if rep, err := r.Metrics.SelfReport(ctx, url); err == nil {
				reports[i] = &rep
			}
		})
	}
	wg.Wait()
	out := map[string]etcd.SelfReport{}
	for i, m := range ask {
		if reports[i] != nil {
			out[m.Name] = *reports[i]
		}
	}
	return out
}

// readAlarms lists the cluster's alarms when a member that follows a leader
// reports errors: etcd lists every active alarm in each member's Status, so
// with none reported there is none, and a healthy cluster costs no extra
// request. Without a quorum the list (a raft request) cannot be answered.
func readAlarms(ctx context.Context, c etcd.Client, view etcdView, results []memberHealth) ([]etcd.Alarm, error) {
	if view.degraded {
		return nil, nil
	}
	for _, h := range results {
		if h.err == nil && h.status.LeaderID != 0 && len(h.status.Errors) > 0 {
			ctx, cancel := context.WithTimeout(ctx, quorumReadTimeout)
			defer cancel()
			alarms, err := c.AlarmList(ctx)
			if err != nil {
				return nil, fmt.Errorf("failed to list etcd's alarms: %w", err)
			}
			return alarms, nil
		}
	}
	return nil, nil
}

// ownMemberLists asks each started member for its own view of the membership.
func ownMemberLists(ctx context.Context, c etcd.Client, view etcdView) map[uint64]*etcd.MemberList {
	out := map[uint64]*etcd.MemberList{}
	results := make([]*etcd.MemberList, len(view.list.Members))
	var wg sync.WaitGroup
	for i, m := range view.list.Members {
		if len(m.ClientURLs) == 0 || m.IsLearner {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l, err := c.MemberListAt(ctx, m.ClientURLs[0]); err == nil {
				results[i] = &l
			}
		}()
	}
	wg.Wait()
	for i, m := range view.list.Members {
		if results[i] != nil {
			out[m.ID] = results[i]
		}
	}
	return out
}
