package etcdmember

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// markPod labels the member's Pod, so that a re-created Pod is told from the
// same one (the fake API server assigns no UIDs).
func (f *fixture) markPod(name string) {
	p, ok := f.pod(name)
	f.g.Expect(ok).To(BeTrue())
	p.Labels["test/mark"] = "kept"
	f.g.Expect(f.c.Update(context.Background(), p)).To(Succeed())
}

// start gives each member a version, as the cluster controller does when it
// creates them, and lets the member controller create its Pod.
func (f *fixture) start(names ...string) {
	for _, n := range names {
		m := f.member(n)
		m.Spec.Version = v1alpha1.DefaultEtcdVersion
		f.g.Expect(f.c.Update(context.Background(), m)).To(Succeed())
		f.reconcile(n)
	}
}

func (f *fixture) podKept(name string) bool {
	p, ok := f.pod(name)
	return ok && p.Labels["test/mark"] == "kept"
}

// Recording the URLs of members created before URLs were recorded is no
// template change: nothing restarts, whatever hash the Pod was given.
// (Before the URLs left the hash, the cluster controller recorded them into
// every member in one pass, and every Pod was re-created at once.)
func TestRestart_RecordingIdentityRestartsNothing(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	f.start("demo-a", "demo-b", "demo-c")
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		f.markPod(n)
	}
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		m := f.member(n)
		m.Spec.PeerURL = v1alpha1.PeerURL(n, "demo", ns, domain)
		m.Spec.ClientURL = v1alpha1.ClientURL(n, "demo", ns, domain)
		f.g.Expect(f.c.Update(ctx, m)).To(Succeed())
		f.reconcile(n)
		f.g.Expect(f.podKept(n)).To(BeTrue(), "%s keeps its Pod", n)
	}
}

// A Pod hashed the way the operator before this one hashed (template and
// recorded URLs) is current while its template is: upgrading the operator
// restarts nothing, and the annotation is brought to today's form.
func TestRestart_AnOperatorUpgradeRestartsNothing(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false, "demo-a")
	m := f.member("demo-a")
	m.Spec.Version = v1alpha1.DefaultEtcdVersion
	m.Spec.PeerURL = v1alpha1.PeerURL("demo-a", "demo", ns, domain)
	m.Spec.ClientURL = v1alpha1.ClientURL("demo-a", "demo", ns, domain)
	f.g.Expect(f.c.Update(ctx, m)).To(Succeed())
	f.reconcile("demo-a")
	f.markPod("demo-a")
	p, _ := f.pod("demo-a")
	// What the previous operator wrote: the FNV-64a of
	// {"template":...,"peerURL":...,"clientURL":...}.
	legacy := legacyHashOf(f.member("demo-a"))
	f.g.Expect(legacy).NotTo(Equal(pod.TemplateHash(f.member("demo-a"))))
	p.Annotations[pod.TemplateHashAnnotation] = legacy
	f.g.Expect(f.c.Update(ctx, p)).To(Succeed())

	f.reconcile("demo-a")
	f.g.Expect(f.podKept("demo-a")).To(BeTrue())
	p, _ = f.pod("demo-a")
	f.g.Expect(p.Annotations).To(HaveKeyWithValue(pod.TemplateHashAnnotation, pod.TemplateHash(f.member("demo-a"))))
}

// A template change reaches the Pod only once the cluster controller has
// approved the restart for exactly that spec.
func TestRestart_OnlyWhenTheClusterControllerApproves(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false, "demo-a")
	f.start("demo-a")
	f.markPod("demo-a")

	m := f.member("demo-a")
	m.Spec.Version = "3.6.17"
	f.g.Expect(f.c.Update(ctx, m)).To(Succeed())
	f.reconcile("demo-a")
	f.g.Expect(f.podKept("demo-a")).To(BeTrue(), "not approved: the Pod stays")

	m = f.member("demo-a")
	m.Status.RestartApproved = "0123456789abcdef"
	f.g.Expect(f.c.Status().Update(ctx, m)).To(Succeed())
	f.reconcile("demo-a")
	f.g.Expect(f.podKept("demo-a")).To(BeTrue(), "approved for another spec: the Pod stays")

	m = f.member("demo-a")
	m.Status.RestartApproved = pod.TemplateHash(m)
	f.g.Expect(f.c.Status().Update(ctx, m)).To(Succeed())
	f.reconcile("demo-a")
	_, ok := f.pod("demo-a")
	f.g.Expect(ok).To(BeFalse(), "approved: the outdated Pod is deleted")
	f.reconcile("demo-a")
	p, ok := f.pod("demo-a")
	f.g.Expect(ok).To(BeTrue())
	f.g.Expect(p.Annotations).To(HaveKeyWithValue(pod.TemplateHashAnnotation, pod.TemplateHash(f.member("demo-a"))))
}

// outdate gives the member a new template and approves its restart, as the
// cluster controller does.
func (f *fixture) outdate(name string) {
	ctx := context.Background()
	m := f.member(name)
	m.Spec.Version = "3.6.17"
	f.g.Expect(f.c.Update(ctx, m)).To(Succeed())
	m = f.member(name)
	m.Status.RestartApproved = pod.TemplateHash(m)
	f.g.Expect(f.c.Status().Update(ctx, m)).To(Succeed())
}

// An approved restart still waits while etcd, asked now, would be left
// without a quorum: the approval came from a look that may be behind.
func TestRestart_ApprovedButHeldWhileAnotherVoterIsDown(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	f.start("demo-a", "demo-b", "demo-c")
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		f.markPod(n)
	}
	f.etcd.SetEndpointError(v1alpha1.ClientURL("demo-b", "demo", ns, domain), etcdfake.ErrUnreachable)
	f.outdate("demo-c")
	res, err := f.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "demo-c"}})
	f.g.Expect(err).NotTo(HaveOccurred())
	f.g.Expect(f.podKept("demo-c")).To(BeTrue(), "one voter of three down already: the restart waits")
	f.g.Expect(res.RequeueAfter).To(BeNumerically(">", 0), "and is looked at again")

	f.etcd.SetEndpointError(v1alpha1.ClientURL("demo-b", "demo", ns, domain), nil)
	f.reconcile("demo-c")
	_, ok := f.pod("demo-c")
	f.g.Expect(ok).To(BeFalse(), "the others are healthy again: the restart goes ahead")
}

// A member restarted a moment ago still answers while its Pod shuts down; a
// removal that follows does not count on it (the race of a user's delete
// with a rollout the cluster controller decided from a stale cache).
func TestRestart_ARemovalDoesNotCountOnAMemberBeingRestarted(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	f.start("demo-a", "demo-b", "demo-c")
	f.outdate("demo-b")
	f.reconcile("demo-b")
	_, ok := f.pod("demo-b")
	f.g.Expect(ok).To(BeFalse(), "demo-b's restart went ahead")

	f.deleteAndReconcile("demo-a")
	f.g.Expect(f.gone("demo-a")).To(BeFalse(), "demo-a stays: with demo-b restarting, its removal would leave one healthy voter of two")
	f.g.Expect(f.etcd.Members()).To(HaveLen(3))
}

// A member that answers for another cluster (it formed one of its own) is
// not a healthy voter of this one: a removal does not count on it.
func TestFinalizer_AMemberOfAnotherClusterIsNotCountedHealthy(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	c := v1alpha1.ClientURL("demo-c", "demo", ns, domain)
	st, err := f.etcd.Status(ctx, c)
	f.g.Expect(err).NotTo(HaveOccurred())
	st.ClusterID++
	f.etcd.SetStatus(c, st)
	f.deleteAndReconcile("demo-a")
	f.g.Expect(f.gone("demo-a")).To(BeFalse(), "one healthy voter of two would be left")
}

// The member controller keeps a cluster's entry only while a restart is in
// flight: a pass with nothing restarting leaves none, and the members'
// finalizers, released as the cluster is deleted, drop the last of it.
func TestRestart_ClusterStateIsDroppedWhenTheClusterIsDeleted(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	f.start("demo-a", "demo-b", "demo-c")
	f.g.Expect(f.r.disruptions.clusters()).To(BeZero(), "nothing restarting: nothing kept")

	f.outdate("demo-b")
	f.reconcile("demo-b")
	_, ok := f.pod("demo-b")
	f.g.Expect(ok).To(BeFalse(), "demo-b's restart went ahead")
	f.g.Expect(f.r.disruptions.clusters()).To(Equal(1), "the restart in flight is remembered")

	cluster := &v1alpha1.EtcdCluster{}
	f.g.Expect(f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "demo"}, cluster)).To(Succeed())
	f.g.Expect(f.c.Delete(ctx, cluster)).To(Succeed())
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		f.deleteAndReconcile(n)
		f.g.Expect(f.gone(n)).To(BeTrue())
	}
	f.g.Expect(f.r.disruptions.clusters()).To(BeZero())
}
