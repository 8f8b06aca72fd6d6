//go:build !race

package etcdcluster

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// observed is the truth at one moment: what the API server holds and what
// etcd is, past every cache.
type observed struct {
	members []v1alpha1.EtcdMember
	pods    map[string]*corev1.Pod
	nodes   map[string]*corev1.Node
	cms     []corev1.ConfigMap
	pvcs    []corev1.PersistentVolumeClaim
	etcd    []etcd.Member
	leader  uint64
	// up is, by member name, whether its etcd runs on a ready Pod and
	// answers for the cluster.
	up map[string]bool
	// leaving: the member's restart is approved and its Pod not yet gone.
	leaving map[string]bool
	// lagging are the endpoints whose Status still lags behind.
	lagging []string
}

func (w *world) observe() *observed {
	o := w.observeAPI()
	w.observeEtcd(o)
	return o
}

func (w *world) observeAPI() *observed {
	o := &observed{pods: map[string]*corev1.Pod{}, nodes: map[string]*corev1.Node{}}
	var ms v1alpha1.EtcdMemberList
	var ps corev1.PodList
	var ns corev1.NodeList
	var cs corev1.ConfigMapList
	var vs corev1.PersistentVolumeClaimList
	w.h.list(&ms, &ps, &ns, &cs, &vs)
	o.members, o.cms, o.pvcs = ms.Items, cs.Items, vs.Items
	sort.Slice(o.members, func(i, j int) bool { return o.members[i].Name < o.members[j].Name })
	sort.Slice(o.cms, func(i, j int) bool { return o.cms[i].Name < o.cms[j].Name })
	for i := range ps.Items {
		o.pods[ps.Items[i].Name] = &ps.Items[i]
	}
	for i := range ns.Items {
		o.nodes[ns.Items[i].Name] = &ns.Items[i]
	}
	return o
}

func (w *world) observeEtcd(o *observed) {
	o.etcd, o.leader = w.h.etcd.Members(), w.h.etcd.Leader()
	sort.Slice(o.etcd, func(i, j int) bool { return o.etcd[i].ID < o.etcd[j].ID })
	o.up, o.leaving = map[string]bool{}, map[string]bool{}
	for _, m := range o.members {
		// A Pod built from an older spec runs until the member controller
		// deletes it, which it does only for an approved restart, and only
		// while etcd keeps a quorum without the member; the cluster
		// controller's approval is what the safety checks judge it by.
		o.up[m.Name] = o.podUp(&m) && w.faults[m.Name] == noFault
		if p := o.pods[m.Name]; p != nil && pod.Leaving(&m, p) {
			o.leaving[m.Name] = true
		}
	}
	o.lagging = o.lagging[:0]
	for url := range w.resetStatusAt {
		o.lagging = append(o.lagging, url)
	}
	sort.Strings(o.lagging)
}

// podUp: the member's Pod runs ready on a Ready node.
func (o *observed) podUp(m *v1alpha1.EtcdMember) bool {
	p := o.pods[m.Name]
	if p == nil || !p.DeletionTimestamp.IsZero() || !podIsReady(p) {
		return false
	}
	n := o.nodes[p.Spec.NodeName]
	return n != nil && nodeReady(n) == corev1.ConditionTrue
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (o *observed) member(name string) *v1alpha1.EtcdMember {
	for i := range o.members {
		if o.members[i].Name == name {
			return &o.members[i]
		}
	}
	return nil
}

func (o *observed) memberByPeerURL(url string) *v1alpha1.EtcdMember {
	for i := range o.members {
		if o.members[i].Spec.PeerURL == url {
			return &o.members[i]
		}
	}
	return nil
}

// fingerprint is the state the operator works on, without its reports (the
// cluster's status) and without clocks: a pass that leaves it unchanged took
// no step.
func (o *observed) fingerprint() string {
	var b strings.Builder
	for _, m := range o.members {
		fmt.Fprintf(&b, "m %s %s r=%s ic=%t del=%t role=%s id=%s booted=%t fenced=%t\n", m.Name, pod.TemplateHash(&m),
			m.Spec.Replaces, m.Spec.InitialCluster != "", !m.DeletionTimestamp.IsZero(), m.Status.Role,
			m.Status.MemberID, m.HasBooted(), m.Status.Fenced != "")
	}
	names := make([]string, 0, len(o.pods))
	for n := range o.pods {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := o.pods[n]
		fmt.Fprintf(&b, "p %s %s node=%s ready=%t role=%s\n", n, p.Annotations[pod.TemplateHashAnnotation], p.Spec.NodeName,
			podIsReady(p), p.Labels[v1alpha1.RoleLabel])
	}
	for _, c := range o.cms {
		keys := make([]string, 0, len(c.Data))
		for k := range c.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, "c %s", c.Name)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%s", k, c.Data[k])
		}
		b.WriteString("\n")
	}
	for _, em := range o.etcd {
		fmt.Fprintf(&b, "e %x learner=%t started=%t\n", em.ID, em.IsLearner, em.Name != "")
	}
	fmt.Fprintf(&b, "leader %x lagging %v\n", o.leader, o.lagging)
	return b.String()
}

// downVoters names the members etcd counts as voters that are down.
func (o *observed) downVoters() []string {
	return o.votersWhere(func(n string) bool { return !o.up[n] })
}

// goingDownVoters names the voters that are down, or that the cluster
// controller has approved a restart of (their Pod no longer matches their
// spec): what a pass decided, whatever the member controller then does.
func (o *observed) goingDownVoters() []string {
	return o.votersWhere(func(n string) bool { return !o.up[n] || o.leaving[n] })
}

func (o *observed) votersWhere(f func(string) bool) []string {
	var out []string
	for _, em := range o.etcd {
		if em.IsLearner {
			continue
		}
		if m := o.memberByPeerURL(em.PeerURLs[0]); m != nil && f(m.Name) {
			out = append(out, m.Name)
		}
	}
	return out
}

// leaderName is the member etcd has as leader, "" if none.
func (o *observed) leaderName() string {
	for _, em := range o.etcd {
		if em.ID == o.leader {
			if m := o.memberByPeerURL(em.PeerURLs[0]); m != nil {
				return m.Name
			}
		}
	}
	return ""
}

// booted says, by etcd ID, whether the member's first boot is latched in
// the API server.
func (o *observed) booted() map[uint64]bool {
	out := map[uint64]bool{}
	for _, em := range o.etcd {
		if m := o.memberByPeerURL(em.PeerURLs[0]); m != nil {
			out[em.ID] = m.HasBooted()
		}
	}
	return out
}

// checkSafety holds after every pass, whatever the state: the pass took
// down at most one voter, never one while another is down, never the
// leader before a handoff, and promoted only learners whose first boot the
// API server has.
func checkSafety(h *harness, pass int, before, after *observed) {
	h.t.Helper()
	for _, id := range h.etcd.Promoted {
		m := "?"
		for _, em := range before.etcd {
			if em.ID == id {
				if mm := before.memberByPeerURL(em.PeerURLs[0]); mm != nil {
					m = mm.Name
				}
			}
		}
		h.g.Expect(before.booted()[id]).To(BeTrue(),
			"pass %d: learner %s promoted before FirstReadyTime was recorded in the API server", pass, m)
	}
	downBefore, downAfter := before.goingDownVoters(), after.goingDownVoters()
	var taken []string
	for _, n := range downAfter {
		if !slices.Contains(downBefore, n) {
			taken = append(taken, n)
		}
	}
	if leader := before.leaderName(); leader != "" && slices.Contains(taken, leader) {
		h.g.Expect(after.leader).NotTo(Equal(before.leader),
			"pass %d: leader %s restarted without a handoff (down before the pass: %v)", pass, leader, downBefore)
	}
	if len(taken) > 0 {
		h.g.Expect(len(downAfter)).To(BeNumerically("<", 2),
			"pass %d: two voters down at once after a pass: %v, of which the pass took down %v", pass, downAfter, taken)
	}
}

// checkQuorum holds after every world step: the member controller, acting
// on what the cluster controller decided, never leaves fewer than a quorum
// of voters up. Every state starts with a quorum and the world breaks
// nothing by itself, so a quorum lost is the operator's doing.
func checkQuorum(h *harness, pass int, before, after *observed) {
	h.t.Helper()
	voters, down := 0, after.downVoters()
	for _, em := range after.etcd {
		if !em.IsLearner {
			voters++
		}
	}
	var removed []string
	for _, id := range h.etcd.Removed {
		for _, em := range before.etcd {
			if m := before.memberByPeerURL(em.PeerURLs[0]); em.ID == id && m != nil {
				removed = append(removed, m.Name)
			}
		}
	}
	h.g.Expect(2*(voters-len(down))).To(BeNumerically(">", voters),
		"quorum lost after pass %d: %v down of %d voters, after the member controller removed %v from etcd (down before: %v)",
		pass, down, voters, removed, before.downVoters())
}

// stuck says what keeps the cluster from its spec; nothing when it is there:
// the spec's number of members, each a voter on the spec's template, running
// and answering, none leaving, and a leader.
func (w *world) stuck(o *observed) []string {
	cl := w.h.storedCluster()
	want := cl.Spec.MemberTemplate.DeepCopy()
	if want.Version == "" {
		want.Version = v1alpha1.DefaultEtcdVersion
	}
	var out []string
	live := 0
	for _, m := range o.members {
		if !m.DeletionTimestamp.IsZero() {
			out = append(out, fmt.Sprintf("member %s%s never left", m.Name, faultNames[w.faults[m.Name]]))
			continue
		}
		live++
		em, listed := etcdByPeerURL(o.etcd, m.Spec.PeerURL)
		role := "member"
		if listed && em.IsLearner {
			role = "learner"
		}
		outdated := !equality.Semantic.DeepEqual(m.Spec.MemberTemplate, *want)
		p := o.pods[m.Name]
		switch {
		case p != nil && unschedulable(p) && outdated:
			out = append(out, fmt.Sprintf("outdated unschedulable %s %s never re-created", role, m.Name))
		case p != nil && unschedulable(p):
			out = append(out, fmt.Sprintf("%s %s cannot be scheduled", role, m.Name))
		case outdated:
			out = append(out, fmt.Sprintf("%s %s not rolled to the spec's template", role, m.Name))
		case !listed:
			out = append(out, fmt.Sprintf("member %s not in etcd", m.Name))
		case em.IsLearner:
			out = append(out, fmt.Sprintf("learner %s never promoted", m.Name))
		case !o.up[m.Name]:
			out = append(out, fmt.Sprintf("member %s is down", m.Name))
		}
	}
	if want := int(cl.DesiredReplicas()); live != want || len(o.etcd) != want {
		out = append(out, fmt.Sprintf("%d members and %d in etcd for %d replicas", live, len(o.etcd), want))
	}
	if o.leader == 0 {
		out = append(out, "no leader")
	}
	return out
}

var faultNames = map[fault]string{faultDataDirLost: ", whose data is gone,",
	faultUnresponsive: ", which never answers,", faultForeign: ", which answers for another cluster,"}

func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

func etcdByPeerURL(ms []etcd.Member, url string) (etcd.Member, bool) {
	for _, em := range ms {
		if slices.Contains(em.PeerURLs, url) {
			return em, true
		}
	}
	return etcd.Member{}, false
}
