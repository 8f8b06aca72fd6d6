package etcdcluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
	"github.com/quorumctl/etcd-operator/internal/etcdversion"
	"github.com/quorumctl/etcd-operator/internal/recovery"
)

// scope is everything one reconcile pass observed, plus what the pass decided
// to report. Decisions are made from it alone, never from conditions written
// by an earlier pass.
type scope struct {
	cluster *v1alpha1.EtcdCluster
	// members are the cluster's EtcdMembers not being deleted, oldest first.
	members []*v1alpha1.EtcdMember
	// deleting are members on their way out through the finalizer.
	deleting []*v1alpha1.EtcdMember
	// pods maps member name to its Pod.
	pods map[string]*corev1.Pod
	// leftoverPods are Pods of members that no longer exist, still going.
	leftoverPods []string
	etcd         etcdView
	now          time.Time

	// peerURLs maps member name to its peer URL, for every member including
	// those being deleted.
	peerURLs map[string]string
	// nodes maps node name to the Node each member lives on, nil for a
	// name no Node has.
	nodes map[string]*corev1.Node
	// heard maps the name of a node that stopped reporting to its
	// kubelet's last Lease renewal, when that could be read.
	heard map[string]time.Time
	// replacedBy maps a member's name to the member created to replace it.
	replacedBy map[string]*v1alpha1.EtcdMember
	// reached records whether the pass began with the target reached.
	reached bool
	// broken are members self-heal judged beyond restarting.
	broken []brokenMember
	// held are members with a failure that no replacement would cure (a
	// Pod that cannot be scheduled): reported, never replaced.
	held []brokenMember
	// loss is how the voters stand: who answers, who is gone and why.
	loss recovery.Loss
	// unfence are fenced members whose view agrees with the quorum's again.
	unfence []*v1alpha1.EtcdMember
	// remediationHeld says why a broken member is not being replaced.
	remediationHeld string
	// progress is what the pass did or waits for, for the conditions.
	progress progress
	// phaseErrs are the failures of this pass's phases, each of which ran
	// regardless of the others.
	phaseErrs []error
	// promoteTried: the pass asked etcd to promote a learner already.
	promoteTried bool
	// addRefused: etcd refused this pass's add (too many learners, or its
	// health window) and nothing changed; see addBeforePromoting.
	addRefused bool
	// versionRefused is set when the target version breaks etcd's upgrade
	// rules for the versions the members are on.
	versionRefused *etcdversion.Refusal
	// preUpgradeFailed says why the snapshot a version upgrade waits for
	// failed (spec.rollout.snapshotBeforeUpgrade), if it did.
	preUpgradeFailed string
	// access is how this pass reaches etcd (scheme, TLS, credentials);
	// tls is what the TLS phase decided.
	access etcdaccess.Access
	tls    *tlsView
	// restoreRefusal is why a restore from a snapshot is refused, if it is.
	restoreRefusal *progress
	// maint is what maintenance observed and decided this pass.
	maint maintState
	// retryDelay is how long the cluster waits for its next look, at the
	// least, while no member answers; zero when one did (see
	// unreachable.Streak).
	retryDelay time.Duration
}

type progress struct {
	reason  string
	message string
}

func (s *scope) setProgress(reason, format string, args ...any) {
	s.progress = progress{reason: reason, message: fmt.Sprintf(format, args...)}
}

// etcdView is etcd's own account of the membership and of each member's health.
type etcdView struct {
	// inspected is false when the pass did not talk to etcd at all.
	inspected bool
	// asked: some member had a running Pod to ask.
	asked bool
	err   error
	// degraded is set when the quorum did not answer and list is one
	// member's own, serializable view: enough to name broken members and
	// report on them, never enough to change the membership.
	degraded bool
	list     etcd.MemberList
	// health by etcd member ID.
	health map[uint64]memberHealth
	// ownLists are members' own (serializable) member lists, read at most
	// every viewCheckInterval, for the divergence check.
	ownLists map[uint64]*etcd.MemberList
	// alarms are the cluster's active alarms, read when a member reports
	// errors; alarmErr says why they are not known.
	alarms   []etcd.Alarm
	alarmErr error
	// reports are, by EtcdMember name, what the metrics endpoints of
	// members whose Status did not answer said, read only while no quorum
	// answers (see etcd.SelfReport).
	reports map[string]etcd.SelfReport
}

type memberHealth struct {
	status etcd.EndpointStatus
	err    error
	// alarms are the cluster's, which a NOSPACE alarm among does not make
	// the member unhealthy: it still replicates and serves reads.
	alarms []etcd.Alarm
}

func (h memberHealth) ok() bool { return h.err == nil && h.status.HealthyDespiteNoSpace(h.alarms) }

// usable: etcd answered linearizably; membership may be changed.
func (v etcdView) usable() bool { return v.inspected && v.err == nil }

// listed: some member list is known, authoritative or not.
func (v etcdView) listed() bool { return v.inspected && (v.err == nil || v.degraded) }

// silent: members were asked and none answered, through etcd or its
// metrics. Such a pass costs its worker the most, and tells nothing new;
// it is what backoff counts (see unreachable.Streak). A reply too large is
// an answer: it came at once, and is reported as such.
func (v etcdView) silent() bool {
	return v.asked && !v.listed() && len(v.reports) == 0 && !etcd.IsReplyTooLarge(v.err)
}

func (v etcdView) byPeerURL(url string) (etcd.Member, bool) {
	for _, m := range v.list.Members {
		for _, u := range m.PeerURLs {
			if u == url {
				return m, true
			}
		}
	}
	return etcd.Member{}, false
}

func (v etcdView) voters() []etcd.Member {
	var out []etcd.Member
	for _, m := range v.list.Members {
		if !m.IsLearner {
			out = append(out, m)
		}
	}
	return out
}

func (v etcdView) learners() []etcd.Member {
	var out []etcd.Member
	for _, m := range v.list.Members {
		if m.IsLearner {
			out = append(out, m)
		}
	}
	return out
}

func (v etcdView) healthyVoters() int {
	n := 0
	for _, m := range v.voters() {
		if v.health[m.ID].ok() {
			n++
		}
	}
	return n
}

// leaderID is the leader named by the member that answered in the highest
// term; of equal terms, by the member with the lowest ID.
func (v etcdView) leaderID() uint64 {
	var answered []etcd.EndpointStatus
	for _, id := range slices.Sorted(maps.Keys(v.health)) {
		if h := v.health[id]; h.err == nil {
			answered = append(answered, h.status)
		}
	}
	if i := etcd.HighestTerm(answered); i >= 0 {
		return answered[i].LeaderID
	}
	return 0
}

func (v etcdView) byID(id uint64) (etcd.Member, bool) {
	for _, m := range v.list.Members {
		if m.ID == id {
			return m, true
		}
	}
	return etcd.Member{}, false
}

// inEtcd finds a member in etcd's list: by the ID latched from an earlier
// list, and only while none is latched by its recorded peer URL.
func (s *scope) inEtcd(m *v1alpha1.EtcdMember) (etcd.Member, bool) {
	if m.Status.MemberID != "" {
		if id, err := etcd.ParseMemberID(m.Status.MemberID); err == nil {
			return s.etcd.byID(id)
		}
	}
	return s.etcd.byPeerURL(s.peerURLs[m.Name])
}

// peerURL is a member's peer URL: the one recorded at its creation, or, for
// a member created before URLs were recorded, the one its name gives.
func (r *Reconciler) peerURL(m *v1alpha1.EtcdMember) string {
	return m.PeerURLIn(r.ClusterDomain)
}

func (r *Reconciler) clientURL(m *v1alpha1.EtcdMember) string {
	return m.ClientURLIn(r.ClusterDomain)
}

// newScope lists the cluster's members and Pods and, once the cluster has
// formed, asks etcd for its membership and each member's status.
func (r *Reconciler) newScope(ctx context.Context, cluster *v1alpha1.EtcdCluster) (*scope, error) {
	s := &scope{cluster: cluster, pods: map[string]*corev1.Pod{}, peerURLs: map[string]string{},
		nodes: map[string]*corev1.Node{}, heard: map[string]time.Time{}, replacedBy: map[string]*v1alpha1.EtcdMember{}, now: r.now()}
	var members v1alpha1.EtcdMemberList
	sel := client.MatchingLabels{v1alpha1.ClusterLabel: cluster.Name}
	if err := r.List(ctx, &members, client.InNamespace(cluster.Namespace), sel); err != nil {
		return nil, fmt.Errorf("failed to list EtcdMembers of %s: %w", cluster.Name, err)
	}
	for i := range members.Items {
		m := &members.Items[i]
		if !isControlledBy(m, cluster) {
			continue
		}
		s.peerURLs[m.Name] = r.peerURL(m)
		if m.DeletionTimestamp.IsZero() {
			s.members = append(s.members, m)
		} else {
			s.deleting = append(s.deleting, m)
		}
	}
	sort.Slice(s.members, func(i, j int) bool {
		a, b := s.members[i], s.members[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(cluster.Namespace), sel); err != nil {
		return nil, fmt.Errorf("failed to list Pods of %s: %w", cluster.Name, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if name := p.Labels[v1alpha1.MemberLabel]; name != "" {
			s.pods[name] = p
		}
	}
	for name := range s.pods {
		if _, current := s.peerURLs[name]; !current || isDeleting(s.deleting, name) {
			s.leftoverPods = append(s.leftoverPods, name)
		}
	}
	sort.Strings(s.leftoverPods)
	for _, m := range s.members {
		if m.Spec.Replaces != "" && s.exists(m.Spec.Replaces) {
			s.replacedBy[m.Spec.Replaces] = m
		}
	}
	if err := r.observeNodes(ctx, s); err != nil {
		return nil, err
	}
	access, err := etcdaccess.For(ctx, r.Client, r.APIReader, cluster, append(append([]*v1alpha1.EtcdMember{}, s.members...), s.deleting...))
	if err != nil {
		return nil, err
	}
	s.access = access
	if cluster.ClusterFormed() {
		s.etcd = r.inspectEtcd(ctx, s)
	}
	// A recovery restarts its survivor and waits for it to answer: its
	// steps are timed by the recovery, never backed off.
	silent := s.etcd.silent() && !cluster.Status.Recovery.Active()
	s.retryDelay = r.memos.get(cluster).observeReach(silent, cluster.Generation)
	s.broken = r.assessMembers(s)
	s.loss = r.assessQuorum(s)
	s.reached = s.targetReached()
	return s, nil
}

// judgeVersion applies the version policy to the adopted target. It runs
// after the target is adopted, at the start of the membership phase.
func (s *scope) judgeVersion() {
	s.versionRefused = nil
	if s.cluster.Status.Observed != nil && s.cluster.ClusterFormed() {
		s.versionRefused = s.versionCheck()
	}
}

// observeNodes reads the Node of each member's Pod, or of the node the
// member was last scheduled to when its Pod is gone or not placed.
func (r *Reconciler) observeNodes(ctx context.Context, s *scope) error {
	for _, m := range append(append([]*v1alpha1.EtcdMember{}, s.members...), s.deleting...) {
		name := s.nodeOf(m)
		if name == "" {
			continue
		}
		if _, seen := s.nodes[name]; seen {
			continue
		}
		n := &corev1.Node{}
		err := r.Get(ctx, client.ObjectKey{Name: name}, n)
		switch {
		case apierrors.IsNotFound(err):
			s.nodes[name] = nil
		case err != nil:
			return fmt.Errorf("failed to get Node %s: %w", name, err)
		default:
			s.nodes[name] = n
			if nodeReady(n) == corev1.ConditionUnknown {
				s.heard[name] = r.lastRenewal(ctx, name)
			}
		}
	}
	return nil
}

// lastRenewal is when the node's kubelet last renewed its Lease, read past
// the cache (only nodes that stopped reporting are asked about, so a watch
// on every node's Lease would cost far more than it saves). It is zero when
// the Lease cannot be read: the bound then counts from the Node's condition,
// which is later, so a missing permission delays a replacement and never
// hastens one.
func (r *Reconciler) lastRenewal(ctx context.Context, node string) time.Time {
	l := &coordinationv1.Lease{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node}, l); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("node lease unreadable; counting node loss from its condition", "node", node, "error", err.Error())
		return time.Time{}
	}
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// nodeOf is the node a member lives on: its Pod's, or the one recorded.
func (s *scope) nodeOf(m *v1alpha1.EtcdMember) string {
	if p := s.pods[m.Name]; p != nil && p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	return m.Status.NodeName
}

// exists: the named member is live or being deleted.
func (s *scope) exists(name string) bool {
	_, ok := s.peerURLs[name]
	return ok
}

// counted are the members that count towards the target: not being
// deleted, and not being replaced by another (whose place they hold until
// they leave).
func (s *scope) counted() []*v1alpha1.EtcdMember {
	var out []*v1alpha1.EtcdMember
	for _, m := range s.members {
		if s.replacedBy[m.Name] == nil {
			out = append(out, m)
		}
	}
	return out
}

// podReady reports whether a member's Pod passes its readiness probe.
func (s *scope) podReady(name string) bool {
	p := s.pods[name]
	if p == nil || !p.DeletionTimestamp.IsZero() {
		return false
	}
	// A Pod on its way out (built from an older spec, its restart
	// approved) is still ready until it goes: the rollout does not take it
	// for its successor (see restarting), and the member controller
	// restarts it only while the others keep a quorum.
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (s *scope) seed() *v1alpha1.EtcdMember {
	for _, m := range s.members {
		if m.Spec.Bootstrap {
			return m
		}
	}
	return nil
}

func (s *scope) pendingMember() *v1alpha1.EtcdMember {
	for _, m := range s.members {
		if m.Pending() {
			return m
		}
	}
	return nil
}

func (s *scope) desiredReplicas() int {
	if s.cluster.Status.Observed == nil {
		return int(s.cluster.DesiredReplicas())
	}
	return int(s.cluster.Status.Observed.Replicas)
}

func isDeleting(deleting []*v1alpha1.EtcdMember, name string) bool {
	for _, m := range deleting {
		if m.Name == name {
			return true
		}
	}
	return false
}

func isControlledBy(m *v1alpha1.EtcdMember, c *v1alpha1.EtcdCluster) bool {
	for _, ref := range m.OwnerReferences {
		if ref.Controller != nil && *ref.Controller && ref.UID == c.UID {
			return true
		}
	}
	return false
}
