package etcdmember

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// voter records the members as voters, as the cluster controller does, so
// that their Pods carry the label the client Service selects.
func (f *fixture) voter(names ...string) {
	for _, n := range names {
		m := f.member(n)
		m.Status.Role = v1alpha1.MemberRoleVoter
		f.g.Expect(f.c.Status().Update(context.Background(), m)).To(Succeed())
		f.reconcile(n)
		p, _ := f.pod(n)
		f.g.Expect(p.Labels).To(HaveKeyWithValue(v1alpha1.RoleLabel, v1alpha1.RoleLabelVoter), "%s serves clients", n)
	}
}

// routeTo makes the client Service's EndpointSlice list the members' Pods
// as ready, as the endpoint controller does for labelled, ready Pods.
func (f *fixture) routeTo(names ...string) {
	ctx := context.Background()
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-client-abcde", Namespace: ns,
			Labels: map[string]string{discoveryv1.LabelServiceName: v1alpha1.ClientServiceName("demo")}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, n := range names {
		p, ok := f.pod(n)
		f.g.Expect(ok).To(BeTrue())
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{"10.0.0.1"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: p.Name, UID: p.UID},
		})
	}
	existing := &discoveryv1.EndpointSlice{}
	if err := f.c.Get(ctx, client.ObjectKeyFromObject(s), existing); err == nil {
		existing.Endpoints = s.Endpoints
		f.g.Expect(f.c.Update(ctx, existing)).To(Succeed())
		return
	}
	f.g.Expect(f.c.Create(ctx, s)).To(Succeed())
}

// An approved restart takes the Pod out of the client Service first and
// deletes it only once the Service's EndpointSlices no longer route to it.
func TestRestart_DrainsTheClientServiceFirst(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	f.start("demo-a", "demo-b", "demo-c")
	f.voter("demo-a", "demo-b", "demo-c")
	f.markPod("demo-c")
	f.routeTo("demo-a", "demo-b", "demo-c")
	f.outdate("demo-c")

	f.reconcile("demo-c")
	p, ok := f.pod("demo-c")
	f.g.Expect(ok).To(BeTrue(), "still routed to: the Pod stays")
	f.g.Expect(f.podKept("demo-c")).To(BeTrue())
	f.g.Expect(p.Labels).NotTo(HaveKey(v1alpha1.RoleLabel), "but it has left the client Service's selector")
	f.reconcile("demo-c")
	f.g.Expect(f.podKept("demo-c")).To(BeTrue(), "and stays while the slice lists it")

	f.routeTo("demo-a", "demo-b")
	f.reconcile("demo-c")
	_, ok = f.pod("demo-c")
	f.g.Expect(ok).To(BeFalse(), "no longer routed to: the restart goes ahead")

	f.reconcile("demo-c")
	p, ok = f.pod("demo-c")
	f.g.Expect(ok).To(BeTrue())
	f.g.Expect(p.Labels).To(HaveKeyWithValue(v1alpha1.RoleLabel, v1alpha1.RoleLabelVoter), "the new Pod serves clients again")
}

// A slow endpoint controller holds a restart for drainTimeout at most.
func TestRestart_DrainGivesUpAfterItsTimeout(t *testing.T) {
	f := newFixture(t, false, "demo-a")
	f.start("demo-a")
	f.voter("demo-a")
	f.markPod("demo-a")
	f.routeTo("demo-a")
	f.outdate("demo-a")
	f.reconcile("demo-a")
	f.g.Expect(f.podKept("demo-a")).To(BeTrue())

	p, _ := f.pod("demo-a")
	f.r.drains.mu.Lock()
	f.r.drains.since[p.UID] = time.Now().Add(-drainTimeout)
	f.r.drains.mu.Unlock()
	f.reconcile("demo-a")
	_, ok := f.pod("demo-a")
	f.g.Expect(ok).To(BeFalse(), "the wait is over: the restart goes ahead")
}

// A restart that the quorum holds back puts the Pod back in the client
// Service: the hold may last.
func TestRestart_AHeldRestartServesClientsMeanwhile(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	f.start("demo-a", "demo-b", "demo-c")
	f.voter("demo-a", "demo-b", "demo-c")
	f.routeTo("demo-a", "demo-b", "demo-c")
	f.outdate("demo-c")
	f.reconcile("demo-c")
	p, _ := f.pod("demo-c")
	f.g.Expect(p.Labels).NotTo(HaveKey(v1alpha1.RoleLabel), "draining")

	f.etcd.SetEndpointError(v1alpha1.ClientURL("demo-b", "demo", ns, domain), etcdfake.ErrUnreachable)
	f.reconcile("demo-c")
	p, ok := f.pod("demo-c")
	f.g.Expect(ok).To(BeTrue(), "held: demo-b is down")
	f.g.Expect(p.Labels).To(HaveKeyWithValue(v1alpha1.RoleLabel, v1alpha1.RoleLabelVoter), "and back in the client Service while held")
}

func TestRoutedTo(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-a", UID: "new"}}
	ep := func(name, uid string, ready *bool) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{{
			Conditions: discoveryv1.EndpointConditions{Ready: ready},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: name, UID: types.UID(uid)},
		}}}
	}
	for _, tc := range []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		want   bool
	}{
		{"none", nil, false},
		{"ready", []discoveryv1.EndpointSlice{ep("demo-a", "new", ptr.To(true))}, true},
		{"readiness unknown counts as ready", []discoveryv1.EndpointSlice{ep("demo-a", "", nil)}, true},
		{"not ready", []discoveryv1.EndpointSlice{ep("demo-a", "new", ptr.To(false))}, false},
		{"an earlier Pod of the same name", []discoveryv1.EndpointSlice{ep("demo-a", "old", ptr.To(true))}, false},
		{"another Pod", []discoveryv1.EndpointSlice{ep("demo-b", "", ptr.To(true))}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(routedTo(tc.slices, p)).To(Equal(tc.want))
		})
	}
}
