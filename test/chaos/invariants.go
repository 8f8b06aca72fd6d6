package chaos

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// EtcdEntry is one member in a member list.
type EtcdEntry struct {
	Name      string
	ID        uint64
	IsLearner bool
}

func (e EtcdEntry) String() string {
	return fmt.Sprintf("%s %016x learner=%t", e.Name, e.ID, e.IsLearner)
}

// EtcdView is one member's own account of the cluster, asked on its own
// endpoint: its status and its serializable member list.
type EtcdView struct {
	// Err is why the member did not answer; empty when it did.
	Err       string
	ID        uint64
	ClusterID uint64
	Leader    uint64
	IsLearner bool
	Members   []EtcdEntry
}

// Observation is everything the invariants are checked against: the
// cluster's objects as the API server has them and each member's own view.
type Observation struct {
	Cluster    *v1alpha1.EtcdCluster
	Members    []v1alpha1.EtcdMember
	Pods       []corev1.Pod
	Claims     []corev1.PersistentVolumeClaim
	ConfigMaps []corev1.ConfigMap
	// Slices are the client Service's EndpointSlices.
	Slices []discoveryv1.EndpointSlice
	// Views are by member name, for every member that is not being deleted.
	Views map[string]EtcdView
}

// Violation is one invariant that does not hold.
type Violation struct {
	Invariant string `json:"invariant"`
	Detail    string `json:"detail"`
}

func (v Violation) String() string { return v.Invariant + ": " + v.Detail }

// The invariants, by name.
const (
	InvReady      = "ready"
	InvAgreement  = "voters-agree"
	InvStatus     = "status-matches-etcd"
	InvService    = "service-serves-voters"
	InvStale      = "no-stale-objects"
	InvRecovered  = "recovered"
	InvIdentity   = "no-rejoin-after-wipe"
	InvLinearized = "linearizable"
	InvLost       = "no-lost-writes"
)

// CheckInvariants returns every invariant the observation breaks: the
// cluster is Ready with its desired number of voters; every voter, asked on
// its own endpoint, gives the same member list, leader and cluster ID; the
// status names the members etcd lists, with their IDs; nothing but
// non-fenced voters is behind the client Service; and no EtcdMember, Pod,
// claim or startup ConfigMap is left of a member that is gone.
func CheckInvariants(o Observation) []Violation {
	var out []Violation
	out = append(out, checkReady(o)...)
	list, agreement := checkAgreement(o)
	out = append(out, agreement...)
	if list != nil {
		out = append(out, checkStatus(o, list)...)
		out = append(out, checkService(o, list)...)
	}
	out = append(out, checkStale(o)...)
	return out
}

func violation(inv, format string, args ...any) Violation {
	return Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)}
}

func checkReady(o Observation) []Violation {
	cl := o.Cluster
	var out []Violation
	ready := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ReadyCondition)
	switch {
	case cl.Status.ObservedGeneration != cl.Generation:
		out = append(out, violation(InvReady, "status describes generation %d, the spec is at %d", cl.Status.ObservedGeneration, cl.Generation))
	case ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != cl.Generation:
		out = append(out, violation(InvReady, "not Ready: %s", describe(ready)))
	}
	if want := cl.DesiredReplicas(); int32(len(cl.Status.Members)) != want {
		out = append(out, violation(InvReady, "status lists %d members, the spec wants %d", len(cl.Status.Members), want))
	}
	for _, m := range cl.Status.Members {
		if !m.Ready || m.Role != v1alpha1.MemberRoleVoter {
			out = append(out, violation(InvReady, "member %s is ready=%t, role %q", m.Name, m.Ready, m.Role))
		}
	}
	return out
}

func describe(c *metav1.Condition) string {
	if c == nil {
		return "no Ready condition"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

// liveMembers are the EtcdMembers not being deleted, by name.
func liveMembers(o Observation) map[string]*v1alpha1.EtcdMember {
	out := map[string]*v1alpha1.EtcdMember{}
	for i := range o.Members {
		if m := &o.Members[i]; m.DeletionTimestamp.IsZero() {
			out[m.Name] = m
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func canonical(list []EtcdEntry) string {
	var s []string
	for _, e := range list {
		s = append(s, e.String())
	}
	slices.Sort(s)
	return strings.Join(s, ", ")
}

// checkAgreement compares the voters' own views and returns the member list
// they agree on, or nil if they do not.
func checkAgreement(o Observation) ([]EtcdEntry, []Violation) {
	var out []Violation
	var first string
	var agreed []EtcdEntry
	var leader, clusterID uint64
	disagree := false
	for _, name := range sortedKeys(liveMembers(o)) {
		v, ok := o.Views[name]
		switch {
		case !ok:
			out = append(out, violation(InvAgreement, "%s was not asked", name))
			disagree = true
			continue
		case v.Err != "":
			out = append(out, violation(InvAgreement, "%s does not answer on its own endpoint: %s", name, v.Err))
			disagree = true
			continue
		case v.IsLearner:
			out = append(out, violation(InvAgreement, "%s is a learner", name))
			continue
		}
		if v.Leader == 0 {
			out = append(out, violation(InvAgreement, "%s follows no leader", name))
			disagree = true
		}
		if first == "" {
			first, agreed, leader, clusterID = name, v.Members, v.Leader, v.ClusterID
			continue
		}
		if got, want := canonical(v.Members), canonical(agreed); got != want {
			out = append(out, violation(InvAgreement, "%s lists [%s], %s lists [%s]", name, got, first, want))
			disagree = true
		}
		if v.Leader != leader {
			out = append(out, violation(InvAgreement, "%s follows leader %016x, %s follows %016x", name, v.Leader, first, leader))
			disagree = true
		}
		if v.ClusterID != clusterID {
			out = append(out, violation(InvAgreement, "%s is in cluster %016x, %s in %016x", name, v.ClusterID, first, clusterID))
			disagree = true
		}
	}
	if first == "" || disagree {
		return nil, out
	}
	known := false
	for _, e := range agreed {
		if e.IsLearner {
			out = append(out, violation(InvAgreement, "etcd lists %s as a learner", e.Name))
		}
		known = known || e.ID == leader
	}
	if !known {
		out = append(out, violation(InvAgreement, "the leader %016x is not in the member list [%s]", leader, canonical(agreed)))
	}
	return agreed, out
}

func parseID(s string) (uint64, bool) {
	id, err := strconv.ParseUint(s, 16, 64)
	return id, err == nil && s != ""
}

// checkStatus: status.members and each EtcdMember's latched ID against the
// member list the voters agree on, and the cluster ID.
func checkStatus(o Observation, list []EtcdEntry) []Violation {
	var out []Violation
	etcd := map[string]uint64{}
	for _, e := range list {
		etcd[e.Name] = e.ID
	}
	status := map[string]string{}
	for _, m := range o.Cluster.Status.Members {
		status[m.Name] = m.ID
	}
	for _, name := range sortedKeys(etcd) {
		sid, ok := status[name]
		if !ok {
			out = append(out, violation(InvStatus, "etcd lists %s (%016x), the status does not", name, etcd[name]))
			continue
		}
		if id, ok := parseID(sid); !ok || id != etcd[name] {
			out = append(out, violation(InvStatus, "status gives %s the ID %q, etcd %016x", name, sid, etcd[name]))
		}
	}
	for _, name := range sortedKeys(status) {
		if _, ok := etcd[name]; !ok {
			out = append(out, violation(InvStatus, "the status lists %s, etcd does not", name))
		}
	}
	for name, m := range liveMembers(o) {
		if id, ok := parseID(m.Status.MemberID); ok && etcd[name] != 0 && id != etcd[name] {
			out = append(out, violation(InvStatus, "EtcdMember %s latched ID %s, etcd has %016x", name, m.Status.MemberID, etcd[name]))
		}
	}
	if o.Cluster.Status.ClusterID != "" {
		for _, name := range sortedKeys(o.Views) {
			v := o.Views[name]
			if id, ok := parseID(o.Cluster.Status.ClusterID); v.Err == "" && (!ok || id != v.ClusterID) {
				out = append(out, violation(InvStatus, "status.clusterID is %q, %s is in %016x", o.Cluster.Status.ClusterID, name, v.ClusterID))
				break
			}
		}
	}
	return out
}

// checkService: every endpoint the client Service routes to is a Pod of a
// live member that etcd lists as a voter and the operator has not fenced.
func checkService(o Observation, list []EtcdEntry) []Violation {
	var out []Violation
	live := liveMembers(o)
	roles := map[string]bool{}
	for _, e := range list {
		roles[e.Name] = e.IsLearner
	}
	for _, s := range o.Slices {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
				out = append(out, violation(InvService, "endpoint %v of %s is not a Pod", ep.Addresses, s.Name))
				continue
			}
			name := ep.TargetRef.Name
			m, ok := live[name]
			learner, listed := roles[name]
			switch {
			case !ok:
				out = append(out, violation(InvService, "the client Service routes to %s, which is no live member", name))
			case !listed:
				out = append(out, violation(InvService, "the client Service routes to %s, which etcd does not list", name))
			case learner:
				out = append(out, violation(InvService, "the client Service routes to the learner %s", name))
			case m.Status.Fenced != "":
				out = append(out, violation(InvService, "the client Service routes to %s, fenced: %s", name, m.Status.Fenced))
			}
		}
	}
	return out
}

// checkStale: nothing is left of a member that is gone, nothing is being
// deleted, and the EtcdMembers are the status's members.
func checkStale(o Observation) []Violation {
	var out []Violation
	live := liveMembers(o)
	for _, m := range o.Members {
		if !m.DeletionTimestamp.IsZero() {
			out = append(out, violation(InvStale, "EtcdMember %s is being deleted", m.Name))
		}
	}
	inStatus := map[string]bool{}
	for _, m := range o.Cluster.Status.Members {
		inStatus[m.Name] = true
		if live[m.Name] == nil {
			out = append(out, violation(InvStale, "the status lists %s, which is no live EtcdMember", m.Name))
		}
	}
	for _, name := range sortedKeys(live) {
		if !inStatus[name] {
			out = append(out, violation(InvStale, "EtcdMember %s is not in the status", name))
		}
	}
	pods := map[string]int{}
	for _, p := range o.Pods {
		member := p.Labels[v1alpha1.MemberLabel]
		pods[member]++
		switch {
		case live[member] == nil:
			out = append(out, violation(InvStale, "Pod %s is left of a member that is gone", p.Name))
		case p.DeletionTimestamp != nil:
			out = append(out, violation(InvStale, "Pod %s is being deleted", p.Name))
		}
	}
	for _, name := range sortedKeys(live) {
		if pods[name] != 1 {
			out = append(out, violation(InvStale, "member %s has %d Pods", name, pods[name]))
		}
	}
	memory := o.Cluster.Spec.Storage.Medium == v1alpha1.StorageMediumMemory
	for _, c := range o.Claims {
		member := c.Labels[v1alpha1.MemberLabel]
		switch {
		case memory:
			out = append(out, violation(InvStale, "claim %s in a Memory cluster", c.Name))
		case live[member] == nil || c.Name != v1alpha1.DataVolumeClaimName(member):
			out = append(out, violation(InvStale, "claim %s is left of a member that is gone", c.Name))
		case c.DeletionTimestamp != nil:
			out = append(out, violation(InvStale, "claim %s is being deleted", c.Name))
		}
	}
	if !memory {
		claims := map[string]bool{}
		for _, c := range o.Claims {
			claims[c.Name] = true
		}
		for _, name := range sortedKeys(live) {
			if !claims[v1alpha1.DataVolumeClaimName(name)] {
				out = append(out, violation(InvStale, "member %s has no claim", name))
			}
		}
	}
	for _, cm := range o.ConfigMaps {
		member := cm.Labels[v1alpha1.MemberLabel]
		if live[member] == nil || cm.Name != v1alpha1.StartupConfigName(member) {
			out = append(out, violation(InvStale, "ConfigMap %s is left of a member that is gone", cm.Name))
		}
	}
	return out
}
