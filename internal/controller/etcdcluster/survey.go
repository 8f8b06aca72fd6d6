package etcdcluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// endpoints are the client URLs to dial: members with a running Pod, voters
// first. Learners refuse most requests, so they are only a last resort.
func (r *Reconciler) endpoints(s *scope) []string {
	voters, others := r.endpointGroups(s)
	return append(voters, others...)
}

// endpointGroups are the client URLs of members with a running Pod:
// voters, and the others.
func (r *Reconciler) endpointGroups(s *scope) (voters, others []string) {
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
	return voters, others
}

// inspectEtcd is one pass's look at etcd, bounded as a whole by
// inspectDeadline: the workers are shared by every cluster, and a cluster
// that does not answer must not hold one for longer than that. Without a
// linearizable list the members are asked at once, for their own lists
// and for their metrics, so a member that never answers costs the pass one
// step's timeout, not one per member.
func (r *Reconciler) inspectEtcd(ctx context.Context, s *scope) (view etcdView) {
	view = etcdView{inspected: true, health: map[uint64]memberHealth{}}
	voters, others := r.endpointGroups(s)
	eps := append(append([]string{}, voters...), others...)
	if len(eps) == 0 {
		view.err = fmt.Errorf("no member Pod is running")
		return view
	}
	view.asked = true
	ctx, cancel := context.WithTimeout(ctx, inspectDeadline)
	defer cancel()
	// The metrics are read only when the quorum did not answer, alongside
	// the members' own lists once the linearizable one failed; registered
	// after cancel, so it runs while ctx is still live.
	var reports <-chan map[string]etcd.SelfReport
	readReports := func() {
		ch := make(chan map[string]etcd.SelfReport, 1)
		go func(ctx context.Context) { ch <- r.selfReports(ctx, s) }(ctx)
		reports = ch
	}
	defer func() {
		switch {
		case view.err != nil && reports == nil:
			readReports()
		case view.err == nil && reports != nil:
			// Read for a look that then got its answer: nothing to
			// keep, but the reads must end before s is handed on.
			<-reports
			return
		case view.err == nil:
			return
		}
		view.reports = unansweredOnly(s, view, <-reports)
	}()
	c, err := r.Dialer.Dial(ctx, eps, s.access.Options...)
	if err != nil {
		view.err = fmt.Errorf("failed to dial etcd: %w", err)
		return view
	}
	defer c.Close()
	// A cluster that was silent on its last look is first asked for the
	// members' own lists, and their metrics, at once: a member that
	// answers at all answers these at once, and the linearizable list,
	// which waits its whole timeout for a connection, follows only when
	// one did. A look at a cluster that stays silent costs one step's
	// timeout.
	// The probe's answer is this look's fallback too, should the quorum
	// list then fail: the members are not asked the same thing twice.
	var probed *etcd.MemberList
	if r.memos.get(s.cluster).unreachableStreak().Passes > 0 {
		readReports()
		own, probeErr := firstOwnList(ctx, c, voters, others)
		if probeErr != nil {
			view.err = fmt.Errorf("no member answered since the last look: %w", probeErr)
			return view
		}
		probed = &own
	}
	view.list, err = quorumMemberList(ctx, c)
	if err != nil {
		view.err = fmt.Errorf("failed to list etcd members: %w", err)
		if reports == nil {
			readReports()
		}
		if probed == nil {
			own, ownErr := firstOwnList(ctx, c, voters, others)
			if ownErr != nil {
				return view
			}
			probed = &own
		}
		view.list, view.degraded = *probed, true
	}
	r.surveyMembers(ctx, s, c, &view)
	return view
}

// firstOwnList is a member's own list, the first to answer within one
// step's timeout (see etcd.FirstMemberList: all are asked together, and a
// voter's answer is preferred to a learner's).
func firstOwnList(ctx context.Context, c etcd.Client, voters, others []string) (etcd.MemberList, error) {
	ctx, cancel := context.WithTimeout(ctx, endpointTimeout)
	defer cancel()
	own, _, err := etcd.FirstMemberList(ctx, c, voters, others)
	return own, err
}

// quorumMemberList is the linearizable member list. Each step has its own
// budget: without a quorum the linearizable list waits out its deadline,
// and the fallback must still have time left.
func quorumMemberList(ctx context.Context, c etcd.Client) (etcd.MemberList, error) {
	ctx, cancel := context.WithTimeout(ctx, quorumReadTimeout)
	defer cancel()
	return c.MemberList(ctx)
}

// surveyMembers completes a look that has a member list: each listed
// member's Status, the alarms, and when due each member's own list. Kept
// apart from inspectEtcd, which is about getting a list at all within the
// look's deadline; ctx is that deadline's.
func (r *Reconciler) surveyMembers(ctx context.Context, s *scope, c etcd.Client, view *etcdView) {
	statusCtx, cancelStatus := context.WithTimeout(ctx, endpointTimeout)
	defer cancelStatus()
	// One Status call per started member, at once; the map is filled
	// afterwards by this goroutine alone.
	results := make([]memberHealth, len(view.list.Members))
	var started []int
	var urls []string
	for i, m := range view.list.Members {
		if len(m.ClientURLs) == 0 {
			results[i] = memberHealth{err: fmt.Errorf("member %s has not started", m.IDString())}
			continue
		}
		started, urls = append(started, i), append(urls, m.ClientURLs[0])
	}
	answers := etcd.StatusAll(statusCtx, c, urls, 0)
	if !view.degraded {
		r.reaskLeaderless(ctx, c, urls, answers)
	}
	for j, a := range answers {
		results[started[j]] = memberHealth{status: a.Status, err: a.Err}
	}
	// etcd refusing the operator's identity says nothing of the members'
	// health: the view is unusable (no change is made on it) and the
	// members' metrics stand in for their Status, as without a quorum.
	for _, h := range results {
		if etcd.IsIdentityRefused(h.err) {
			view.err, view.degraded = fmt.Errorf("etcd refused the operator's identity: %w", h.err), true
			break
		}
	}
	view.alarms, view.alarmErr = readAlarms(ctx, c, *view, results)
	for i, m := range view.list.Members {
		results[i].alarms = view.alarms
		view.health[m.ID] = results[i]
	}
	if r.memos.get(s.cluster).viewCheckDue(s.now) {
		view.ownLists = ownMemberLists(statusCtx, c, *view)
	}
}

// selfReports reads the metrics of every member with a Pod (see
// etcd.ReadSelfReports).
func (r *Reconciler) selfReports(ctx context.Context, s *scope) map[string]etcd.SelfReport {
	if r.Metrics == nil {
		return nil
	}
	clientURLs := map[string]string{}
	for _, m := range s.members {
		if p := s.pods[m.Name]; p != nil && p.Status.PodIP != "" {
			clientURLs[m.Name] = r.clientURL(m)
		}
	}
	return etcd.ReadSelfReports(ctx, r.Metrics, clientURLs, v1alpha1.MetricsPort, endpointTimeout)
}

// unansweredOnly keeps the reports of members whose Status did not answer:
// the metrics were read before the Statuses were known, and a member that
// answered is judged from its Status.
func unansweredOnly(s *scope, view etcdView, reports map[string]etcd.SelfReport) map[string]etcd.SelfReport {
	for _, m := range s.members {
		id, err := etcd.ParseMemberID(m.Status.MemberID)
		if h, seen := view.health[id]; err == nil && seen && h.err == nil {
			delete(reports, m.Name)
		}
	}
	return reports
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

// reaskLeaderless asks again, for at most ElectionGrace, the voters that
// answered without a leader. The look's list was read linearizably, so a
// quorum followed a leader a moment before: a voter without one is in an
// election, such as the hand-over etcd makes when its leader's Pod is
// stopped, which ends within a heartbeat or two. Judged on that one answer,
// a drain would count two of three voters unhealthy and report the quorum
// lost that the look's own read had just proved held. A voter still
// without a leader when the time is up is judged on its last answer; a
// voter that did not answer at all is not asked again, its answer having
// cost a timeout already.
func (r *Reconciler) reaskLeaderless(ctx context.Context, c etcd.Client, urls []string, answers []etcd.StatusAnswer) {
	if r.ElectionGrace <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, r.ElectionGrace)
	defer cancel()
	tick := time.NewTicker(r.ElectionGrace / 5)
	defer tick.Stop()
	for {
		var again []int
		for i, a := range answers {
			if a.Err == nil && a.Status.LeaderID == 0 && !a.Status.IsLearner {
				again = append(again, i)
			}
		}
		if len(again) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		eps := make([]string, len(again))
		for j, i := range again {
			eps[j] = urls[i]
		}
		for j, a := range etcd.StatusAll(ctx, c, eps, 0) {
			if a.Err == nil {
				answers[again[j]] = a
			}
		}
	}
}
