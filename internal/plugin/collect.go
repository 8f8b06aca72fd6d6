package plugin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// Kinds of memberProblem, short enough for a table cell.
const (
	problemNoPod       = "no Pod"
	problemPodNotReady = "Pod not running"
	problemForward     = "port-forward failed"
	problemUnreachable = "unreachable"
	problemNotMember   = "not a member"
)

// memberProblem is why the plugin could not see a member fully.
type memberProblem struct {
	kind string
	err  error
}

func (p *memberProblem) Error() string {
	if p.err == nil {
		return p.kind
	}
	return p.kind + ": " + p.err.Error()
}

func (p *memberProblem) Unwrap() error { return p.err }

func problemKind(err error) string {
	if p, ok := errors.AsType[*memberProblem](err); ok {
		return p.kind
	}
	return problemUnreachable
}

// memberView is one member as the plugin sees it: etcd's membership entry,
// its Pod, and what the member said about itself.
type memberView struct {
	name     string
	member   *etcd.Member // nil when etcd does not list it, or the list failed
	pod      *corev1.Pod  // nil when the member has no Pod
	endpoint string       // forwarded endpoint; empty without a tunnel
	status   *etcd.EndpointStatus
	err      error // why status is nil, or why the member is suspicious
}

// id is the member ID from the membership, or else from the member itself.
func (v memberView) id() uint64 {
	if v.member != nil {
		return v.member.ID
	}
	if v.status != nil {
		return v.status.MemberID
	}
	return 0
}

// label names the member in messages: by name, or by ID before it has one.
func (v memberView) label() string {
	if v.name != "" {
		return v.name
	}
	return etcd.FormatMemberID(v.id())
}

// learner reports the role from the membership, which is authoritative,
// falling back to what the member says.
func (v memberView) learner() bool {
	if v.member != nil {
		return v.member.IsLearner
	}
	return v.status != nil && v.status.IsLearner
}

// snapshot is everything the read-only commands show, taken once.
type snapshot struct {
	list     *etcd.MemberList
	listErr  error
	alarms   []etcd.Alarm
	alarmErr error
	// leaderID is the leader according to the member that answered in the
	// highest raft term; 0 when no answering member knows a leader.
	leaderID uint64
	members  []memberView
}

func (s *snapshot) byID(id uint64) (memberView, bool) {
	for _, v := range s.members {
		if id != 0 && v.id() == id {
			return v, true
		}
	}
	return memberView{}, false
}

// collect asks etcd for its membership and alarms, and every forwarded
// member for its status. Failures are recorded, not returned: a read-only
// command shows whatever part of the cluster answered.
func (s *session) collect(ctx context.Context) *snapshot {
	snap := &snapshot{}
	var statuses map[string]statusResult
	var wg sync.WaitGroup
	wg.Go(func() { statuses = s.statuses(ctx) })
	wg.Go(func() {
		list, err := s.client.MemberList(ctx)
		if err != nil {
			snap.listErr = fmt.Errorf("failed to list the members of EtcdCluster %s: %w", s.ref(), err)
			return
		}
		snap.list = &list
	})
	wg.Go(func() {
		alarms, err := s.client.AlarmList(ctx)
		if err != nil {
			snap.alarmErr = fmt.Errorf("failed to list the alarms of EtcdCluster %s: %w", s.ref(), err)
			return
		}
		snap.alarms = alarms
	})
	wg.Wait()

	views := map[string]*memberView{}
	var unnamed []memberView
	if snap.list != nil {
		for _, m := range snap.list.Members {
			name := memberName(m, s.cluster.Name)
			if name == "" {
				unnamed = append(unnamed, memberView{member: &m, err: &memberProblem{kind: problemNoPod, err: errors.New("the member has not started and its peer URL names no Pod")}})
				continue
			}
			views[name] = &memberView{name: name, member: &m}
		}
	}
	for name, pod := range s.pods {
		v, ok := views[name]
		if !ok {
			v = &memberView{name: name}
			views[name] = v
		}
		v.pod = pod
	}
	for name, v := range views {
		s.observe(v, statuses[name], snap.list != nil)
	}
	if best, ok := statuses[bestName(statuses)]; ok {
		snap.leaderID = best.status.LeaderID
	}
	for _, v := range views {
		snap.members = append(snap.members, *v)
	}
	slices.SortFunc(snap.members, func(a, b memberView) int { return strings.Compare(a.name, b.name) })
	slices.SortFunc(unnamed, func(a, b memberView) int { return cmp.Compare(a.id(), b.id()) })
	snap.members = append(snap.members, unnamed...)
	return snap
}

// observe fills in the Pod-side facts of one member.
func (s *session) observe(v *memberView, st statusResult, listed bool) {
	v.endpoint, _ = s.endpoint(v.name)
	switch {
	case v.pod == nil:
		v.err = &memberProblem{kind: problemNoPod, err: fmt.Errorf("etcd lists member %s but it has no Pod", v.name)}
	case v.pod.Status.Phase != corev1.PodRunning:
		v.err = &memberProblem{kind: problemPodNotReady, err: fmt.Errorf("member Pod %s is %s", v.name, cmp.Or(string(v.pod.Status.Phase), "not scheduled"))}
	case s.unreachable[v.name] != nil:
		v.err = &memberProblem{kind: problemForward, err: s.unreachable[v.name]}
	case st.err != nil:
		v.err = &memberProblem{kind: problemUnreachable, err: s.explainUnreachable(v.name, st.err)}
	default:
		v.status = st.status
		if listed && v.member == nil {
			// A Pod whose etcd is not (or no longer) in the membership, such
			// as one being added or one removed behind the operator's back.
			v.err = &memberProblem{kind: problemNotMember, err: fmt.Errorf("member Pod %s runs etcd member %s, which etcd does not list", v.name, etcd.FormatMemberID(st.status.MemberID))}
		}
	}
}

type statusResult struct {
	status *etcd.EndpointStatus
	err    error
}

// statuses asks every forwarded member about itself, in parallel, so one
// member timing out costs the call timeout once.
func (s *session) statuses(ctx context.Context) map[string]statusResult {
	out := make(map[string]statusResult, len(s.endpoints))
	names := slices.Sorted(maps.Keys(s.endpoints))
	eps := make([]string, len(names))
	for i, name := range names {
		eps[i] = s.endpoints[name]
	}
	for i, a := range etcd.StatusAll(ctx, s.client, eps, 0) {
		if a.Err != nil {
			out[names[i]] = statusResult{err: a.Err}
			continue
		}
		out[names[i]] = statusResult{status: &a.Status}
	}
	return out
}

// bestName is the member that answered in the highest raft term while
// knowing a leader: during a partition a stale member can still name an old
// leader, and the higher term wins, as etcd's own findLeader decides.
func bestName(statuses map[string]statusResult) string {
	var names []string
	for name, r := range statuses {
		if r.status != nil {
			names = append(names, name)
		}
	}
	// Sorted, so that of equal terms the first name wins.
	slices.Sort(names)
	answered := make([]etcd.EndpointStatus, len(names))
	for i, name := range names {
		answered[i] = *statuses[name].status
	}
	if i := etcd.HighestTerm(answered); i >= 0 {
		return names[i]
	}
	return ""
}

// memberName is the member's Pod name. A member that was added but has not
// started has no name yet; its peer URL is a pure function of the member
// name (v1alpha1.PeerURL: NAME.PEER-SERVICE.NAMESPACE.svc...), so the first
// DNS label names the Pod it belongs to.
func memberName(m etcd.Member, cluster string) string {
	if m.Name != "" {
		return m.Name
	}
	for _, raw := range m.PeerURLs {
		if name, domain := v1alpha1.MemberOfPeerURL(raw); strings.HasPrefix(domain, v1alpha1.PeerServiceName(cluster)+".") {
			return name
		}
	}
	return ""
}
