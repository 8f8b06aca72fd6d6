package etcdmember

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// toTLS gives the member the spec of turning TLS on's second pass (TLS with
// https URLs) and the etcd ID it runs under, as the cluster controller
// does, and marks the cluster's transition under way or not.
func (f *fixture) toTLS(name string, transition bool) {
	ctx := context.Background()
	m := f.member(name)
	m.Spec.Version = v1alpha1.DefaultEtcdVersion
	m.Spec.PeerURL = strings.Replace(v1alpha1.PeerURL(name, "demo", ns, domain), "http://", "https://", 1)
	m.Spec.ClientURL = strings.Replace(v1alpha1.ClientURL(name, "demo", ns, domain), "http://", "https://", 1)
	m.Spec.TLS = &v1alpha1.MemberTLS{Peer: &v1alpha1.MemberTLSEndpoint{TrustBundle: "p"}, Client: &v1alpha1.MemberTLSEndpoint{TrustBundle: "c"}}
	f.g.Expect(f.c.Update(ctx, m)).To(Succeed())
	for _, em := range f.etcd.Members() {
		if em.Name == name {
			m = f.member(name)
			m.Status.MemberID = em.IDString()
			f.g.Expect(f.c.Status().Update(ctx, m)).To(Succeed())
		}
	}
	cl := &v1alpha1.EtcdCluster{}
	f.g.Expect(f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "demo"}, cl)).To(Succeed())
	cl.Status.TLS = nil
	if transition {
		cl.Status.TLS = &v1alpha1.TLSStatus{Transition: &v1alpha1.TLSTransitionStatus{Phase: "RefusingPlaintext"}}
	}
	f.g.Expect(f.c.Update(ctx, cl)).To(Succeed())
	// The member's certificates and trust bundles, which the Pod waits for.
	secret, configMaps := pod.TLSMaterialNames(m)
	f.g.Expect(f.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: ns}})).To(Succeed())
	for _, cm := range configMaps {
		f.g.Expect(f.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm, Namespace: ns}})).To(Succeed())
	}
}

func (f *fixture) peerURLInEtcd(name string) string {
	for _, em := range f.etcd.Members() {
		if em.Name == name {
			return em.PeerURLs[0]
		}
	}
	return ""
}

// While TLS is turned on, a member stopped for the second pass is known to
// etcd by its https peer URL before its new Pod (https alone) starts.
func TestPeerURL_MovedBeforeThePodStarts(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	f.toTLS("demo-a", true)
	f.g.Expect(f.peerURLInEtcd("demo-a")).To(HavePrefix("http://"))
	f.reconcile("demo-a")
	_, created := f.pod("demo-a")
	f.g.Expect(created).To(BeTrue())
	f.g.Expect(f.peerURLInEtcd("demo-a")).To(Equal(f.member("demo-a").Spec.PeerURL))
}

// Outside a transition nothing is asked of etcd before a Pod starts.
func TestPeerURL_NotMovedOutsideATransition(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	f.toTLS("demo-a", false)
	f.reconcile("demo-a")
	_, created := f.pod("demo-a")
	f.g.Expect(created).To(BeTrue())
	f.g.Expect(f.peerURLInEtcd("demo-a")).To(HavePrefix("http://"))
	f.g.Expect(f.etcd.Dialed).To(BeEmpty())
}

// Without a quorum to agree, the Pod starts all the same.
func TestPeerURL_PodStartsWhenEtcdDoesNotAnswer(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	f.toTLS("demo-a", true)
	f.etcd.FailNext("MemberList", etcdfake.ErrUnreachable)
	f.reconcile("demo-a")
	_, created := f.pod("demo-a")
	f.g.Expect(created).To(BeTrue())
	f.g.Expect(f.peerURLInEtcd("demo-a")).To(HavePrefix("http://"))
}
