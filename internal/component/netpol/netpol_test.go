package netpol_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/backupjob"
	"github.com/quorumctl/etcd-operator/internal/component/netpol"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
)

const (
	ns         = "prod"
	operatorNS = "etcd-operator-system"
	monitorNS  = "monitoring"
)

var operatorLabels = map[string]string{"app.kubernetes.io/name": "etcd-operator", "app.kubernetes.io/instance": "etcd-operator"}

func newCluster(name string, mutate ...func(*v1alpha1.EtcdCluster)) *v1alpha1.EtcdCluster {
	c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)}}
	for _, f := range mutate {
		f(c)
	}
	return c
}

func sources() netpol.Sources {
	return netpol.Sources{
		OperatorNamespace: operatorNS,
		OperatorPodLabels: operatorLabels,
		MetricsNamespaces: &metav1.LabelSelector{MatchLabels: map[string]string{netpol.NamespaceNameLabel: monitorNS}},
	}
}

// source is a Pod that opens a connection: its namespace's labels and its
// own.
type source struct {
	namespace string
	nsLabels  map[string]string
	labels    map[string]string
}

func inNamespace(namespace string, podLabels map[string]string) source {
	return source{namespace: namespace, nsLabels: map[string]string{netpol.NamespaceNameLabel: namespace}, labels: podLabels}
}

// admits evaluates the policy as the NetworkPolicy API defines it, for a
// connection from a Pod (not the node) to port of a Pod the policy selects.
func admits(g *WithT, np *networkingv1.NetworkPolicy, from source, port int32) bool {
	for _, r := range np.Spec.Ingress {
		if !onPort(r.Ports, port) {
			continue
		}
		// Guarded by the tests below too: no rule may admit everyone.
		g.Expect(r.From).NotTo(BeEmpty(), "a rule without peers admits every source")
		for _, p := range r.From {
			if peerMatches(g, np.Namespace, p, from) {
				return true
			}
		}
	}
	return false
}

func onPort(ports []networkingv1.NetworkPolicyPort, port int32) bool {
	for _, p := range ports {
		if p.Port != nil && p.Port.IntVal == port && (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) {
			return true
		}
	}
	return len(ports) == 0
}

func peerMatches(g *WithT, policyNS string, p networkingv1.NetworkPolicyPeer, from source) bool {
	if p.IPBlock != nil {
		return false
	}
	if p.NamespaceSelector == nil {
		if from.namespace != policyNS {
			return false
		}
	} else if !selects(g, p.NamespaceSelector, from.nsLabels) {
		return false
	}
	return p.PodSelector == nil || selects(g, p.PodSelector, from.labels)
}

func selects(g *WithT, s *metav1.LabelSelector, l map[string]string) bool {
	sel, err := metav1.LabelSelectorAsSelector(s)
	g.Expect(err).NotTo(HaveOccurred())
	return sel.Matches(labels.Set(l))
}

func memberPodLabels(cluster, member string) map[string]string {
	m := &v1alpha1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: member, Namespace: ns, UID: "m"},
		Spec:       v1alpha1.EtcdMemberSpec{ClusterName: cluster, MemberTemplate: v1alpha1.MemberTemplate{Version: "3.6.16"}},
	}
	m.Status.Role = v1alpha1.MemberRoleVoter
	return pod.Build(pod.Params{Member: m}).Labels
}

func snapshotPodLabels(cluster string) map[string]string {
	c := newCluster(cluster)
	s := &v1alpha1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ns, UID: "s"},
		Spec: v1alpha1.EtcdSnapshotSpec{ClusterName: cluster}}
	return backupjob.Snapshot(s, c, etcdaccess.Shape{}, nil, "k", "op", false).Spec.Template.Labels
}

func TestOffMeansNoPolicy(t *testing.T) {
	g := NewWithT(t)
	g.Expect(netpol.Build(newCluster("main", func(c *v1alpha1.EtcdCluster) { c.Spec.NetworkPolicy.Enabled = ptr.To(false) }), sources())).To(BeNil())
	g.Expect(netpol.Build(newCluster("main"), sources())).NotTo(BeNil(), "on when unset")
	g.Expect(netpol.Build(newCluster("main", func(c *v1alpha1.EtcdCluster) { c.Spec.NetworkPolicy.Enabled = ptr.To(true) }), sources())).NotTo(BeNil())
}

func TestObject(t *testing.T) {
	g := NewWithT(t)
	np := netpol.Build(newCluster("main"), sources())
	g.Expect(np.Name).To(Equal("main"))
	g.Expect(np.Namespace).To(Equal(ns))
	g.Expect(np.Labels).To(HaveKeyWithValue(v1alpha1.ClusterLabel, "main"), "the operator's cache only holds labelled objects")
	g.Expect(np.OwnerReferences).To(HaveLen(1))
	g.Expect(np.OwnerReferences[0].Kind).To(Equal("EtcdCluster"))
	g.Expect(np.OwnerReferences[0].UID).To(Equal(newCluster("main").UID))
	g.Expect(*np.OwnerReferences[0].Controller).To(BeTrue(), "garbage collection deletes it with the cluster")
	g.Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}), "ingress only")
}

// Each port admits exactly whom it should, judged on the labels the
// operator's own builders put on members and Job Pods.
func TestWhoReachesWhichPort(t *testing.T) {
	g := NewWithT(t)
	np := netpol.Build(newCluster("main"), sources())

	member := inNamespace(ns, memberPodLabels("main", "main-abcde"))
	learner := inNamespace(ns, memberPodLabels("main", "main-fghij"))
	delete(learner.labels, v1alpha1.RoleLabel)
	snapshotJob := inNamespace(ns, snapshotPodLabels("main"))
	operator := inNamespace(operatorNS, operatorLabels)
	prometheus := inNamespace(monitorNS, map[string]string{"app": "prometheus"})
	otherMember := inNamespace(ns, memberPodLabels("other", "other-abcde"))
	otherJob := inNamespace(ns, snapshotPodLabels("other"))
	neighbour := inNamespace(ns, map[string]string{"app": "web"})
	operatorLookalike := inNamespace("default", operatorLabels)
	strangerInOperatorNS := inNamespace(operatorNS, map[string]string{"app": "other"})

	for _, tc := range []struct {
		name                  string
		from                  source
		client, peer, metrics bool
	}{
		{"a voter of the cluster", member, true, true, false},
		{"a learner of the cluster", learner, true, true, false},
		{"the cluster's snapshot Job", snapshotJob, true, false, false},
		{"the operator", operator, true, true, true},
		{"Prometheus in the monitoring namespace", prometheus, false, false, true},
		{"a member of another cluster in the namespace", otherMember, false, false, false},
		{"another cluster's snapshot Job", otherJob, false, false, false},
		{"another Pod of the namespace", neighbour, false, false, false},
		{"the operator's labels in another namespace", operatorLookalike, false, false, false},
		{"another Pod of the operator's namespace", strangerInOperatorNS, false, false, false},
	} {
		g.Expect(admits(g, np, tc.from, v1alpha1.ClientPort)).To(Equal(tc.client), "%s on the client port", tc.name)
		g.Expect(admits(g, np, tc.from, v1alpha1.PeerPort)).To(Equal(tc.peer), "%s on the peer port", tc.name)
		g.Expect(admits(g, np, tc.from, v1alpha1.MetricsPort)).To(Equal(tc.metrics), "%s on the metrics port", tc.name)
		g.Expect(admits(g, np, tc.from, 8080)).To(BeFalse(), "%s on a port no member serves", tc.name)
	}
}

// The policy guards this cluster's members only: not another cluster's in
// the namespace, and not the Job Pods, which serve nothing.
func TestProtectsTheMembersOnly(t *testing.T) {
	g := NewWithT(t)
	np := netpol.Build(newCluster("main"), sources())
	g.Expect(np.Spec.PodSelector).To(Equal(*netpol.MemberSelector("main")))
	g.Expect(selects(g, &np.Spec.PodSelector, memberPodLabels("main", "main-abcde"))).To(BeTrue())
	g.Expect(selects(g, &np.Spec.PodSelector, memberPodLabels("other", "other-abcde"))).To(BeFalse())
	g.Expect(selects(g, &np.Spec.PodSelector, snapshotPodLabels("main"))).To(BeFalse())
}

// Outside the cluster the operator's namespace is unknown: the policy keeps
// the members and Jobs, and without a monitoring selector too the metrics
// port gets no rule, since a rule without peers would admit everyone.
func TestWithoutOperatorOrMonitoring(t *testing.T) {
	g := NewWithT(t)
	np := netpol.Build(newCluster("main"), netpol.Sources{})
	g.Expect(np.Spec.Ingress).To(HaveLen(2))
	for _, r := range np.Spec.Ingress {
		g.Expect(r.From).NotTo(BeEmpty())
		g.Expect(r.Ports).To(HaveLen(1))
		g.Expect(r.Ports[0].Port.IntVal).NotTo(BeEquivalentTo(v1alpha1.MetricsPort))
	}
	g.Expect(admits(g, np, inNamespace(ns, memberPodLabels("main", "main-abcde")), v1alpha1.ClientPort)).To(BeTrue())
	g.Expect(admits(g, np, inNamespace(ns, snapshotPodLabels("main")), v1alpha1.ClientPort)).To(BeTrue())
	g.Expect(admits(g, np, inNamespace(operatorNS, operatorLabels), v1alpha1.ClientPort)).To(BeFalse())
	g.Expect(admits(g, np, inNamespace(monitorNS, nil), v1alpha1.MetricsPort)).To(BeFalse())

	t.Run("monitoring without the operator", func(t *testing.T) {
		g := NewWithT(t)
		np := netpol.Build(newCluster("main"), netpol.Sources{MetricsNamespaces: sources().MetricsNamespaces})
		g.Expect(admits(g, np, inNamespace(monitorNS, nil), v1alpha1.MetricsPort)).To(BeTrue())
		g.Expect(admits(g, np, inNamespace(monitorNS, nil), v1alpha1.ClientPort)).To(BeFalse(), "metrics only")
	})
	t.Run("the operator's namespace without its labels", func(t *testing.T) {
		g := NewWithT(t)
		np := netpol.Build(newCluster("main"), netpol.Sources{OperatorNamespace: operatorNS})
		g.Expect(admits(g, np, inNamespace(operatorNS, map[string]string{"any": "pod"}), v1alpha1.ClientPort)).To(BeTrue(), "every Pod of the namespace")
		g.Expect(admits(g, np, inNamespace("default", operatorLabels), v1alpha1.ClientPort)).To(BeFalse())
	})
}

func TestAllowedClients(t *testing.T) {
	g := NewWithT(t)
	c := newCluster("main", func(c *v1alpha1.EtcdCluster) {
		c.Spec.NetworkPolicy.AllowedClients = []v1alpha1.NetworkPolicyClient{
			{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}},
			{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"etcd-client": "true"}}},
			{IPBlock: &v1alpha1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}},
		}
	})
	np := netpol.Build(c, sources())

	api := inNamespace(ns, map[string]string{"app": "api"})
	teamClient := source{namespace: "team-a", nsLabels: map[string]string{"team": "a"}, labels: map[string]string{"etcd-client": "true"}}
	teamOther := source{namespace: "team-a", nsLabels: map[string]string{"team": "a"}, labels: map[string]string{"app": "web"}}
	apiElsewhere := inNamespace("default", map[string]string{"app": "api"})
	g.Expect(admits(g, np, api, v1alpha1.ClientPort)).To(BeTrue())
	g.Expect(admits(g, np, teamClient, v1alpha1.ClientPort)).To(BeTrue())
	g.Expect(admits(g, np, teamOther, v1alpha1.ClientPort)).To(BeFalse(), "both selectors must match")
	g.Expect(admits(g, np, apiElsewhere, v1alpha1.ClientPort)).To(BeFalse(), "a pod selector alone is the cluster's namespace")
	for _, s := range []source{api, teamClient} {
		g.Expect(admits(g, np, s, v1alpha1.PeerPort)).To(BeFalse(), "clients never reach the peer port")
		g.Expect(admits(g, np, s, v1alpha1.MetricsPort)).To(BeFalse(), "nor the metrics port")
	}

	client := np.Spec.Ingress[0]
	g.Expect(client.Ports[0].Port.IntVal).To(BeEquivalentTo(v1alpha1.ClientPort))
	g.Expect(client.From).To(HaveLen(6), "members, Jobs, the operator, then the spec's clients in order")
	g.Expect(client.From[5]).To(Equal(networkingv1.NetworkPolicyPeer{
		IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}},
	}))
}

// The result shares no memory with the cluster or the sources, so a caller
// may change either.
func TestBuildCopies(t *testing.T) {
	g := NewWithT(t)
	c := newCluster("main", func(c *v1alpha1.EtcdCluster) {
		c.Spec.NetworkPolicy.AllowedClients = []v1alpha1.NetworkPolicyClient{
			{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}},
			{IPBlock: &v1alpha1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}},
		}
	})
	src := sources()
	np := netpol.Build(c, src)
	for _, r := range np.Spec.Ingress {
		for _, p := range r.From {
			if p.PodSelector != nil {
				p.PodSelector.MatchLabels["x"] = "y"
			}
			if p.NamespaceSelector != nil {
				p.NamespaceSelector.MatchLabels["x"] = "y"
			}
			if p.IPBlock != nil {
				p.IPBlock.Except[0] = "changed"
			}
		}
	}
	g.Expect(c.Spec.NetworkPolicy.AllowedClients[0].PodSelector.MatchLabels).NotTo(HaveKey("x"))
	g.Expect(c.Spec.NetworkPolicy.AllowedClients[1].IPBlock.Except[0]).To(Equal("10.1.0.0/16"))
	g.Expect(src.OperatorPodLabels).NotTo(HaveKey("x"))
	g.Expect(src.MetricsNamespaces.MatchLabels).NotTo(HaveKey("x"))
	g.Expect(netpol.Build(c, src)).NotTo(Equal(np), "a fresh build is unaffected")
	g.Expect(netpol.Build(c, src)).To(Equal(netpol.Build(c, src)), "and deterministic")
}
