package etcdmember

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
)

// markPod labels the member's Pod, so that a re-created Pod is told from the
// same one (the fake API server assigns no UIDs).
func (f *fixture) markPod(name string) {
	p, ok := f.pod(name)
	f.g.Expect(ok).To(BeTrue())
	p.Labels["test/mark"] = "kept"
	f.g.Expect(f.c.Update(context.Background(), p)).To(Succeed())
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
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		m := f.member(n)
		m.Spec.Version = v1alpha1.DefaultEtcdVersion
		f.g.Expect(f.c.Update(ctx, m)).To(Succeed())
		f.reconcile(n)
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
	m := f.member("demo-a")
	m.Spec.Version = v1alpha1.DefaultEtcdVersion
	f.g.Expect(f.c.Update(ctx, m)).To(Succeed())
	f.reconcile("demo-a")
	f.markPod("demo-a")

	m = f.member("demo-a")
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
