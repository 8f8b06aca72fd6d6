package etcdcluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/netpol"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// testNetworkPolicy is the operator-wide policy setting of the tests: the
// operator may keep policies, and runs in its own namespace.
var testNetworkPolicy = NetworkPolicyOptions{Permitted: true, Sources: netpol.Sources{
	OperatorNamespace: "operator", OperatorPodLabels: map[string]string{"app": "operator"},
}}

const (
	testNS     = "ns"
	testName   = "demo"
	testDomain = "cluster.local"
)

// harness runs the reconciler against controller-runtime's fake client and
// the scriptable etcd fake.
type harness struct {
	t      *testing.T
	g      *WithT
	c      client.Client
	etcd   *etcdfake.Fake
	r      *Reconciler
	now    time.Time
	events *events.FakeRecorder
	// tracker is what the fake API server stores; reading it directly
	// costs no JSON round trip.
	tracker clienttesting.ObjectTracker
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	// Only the kinds the controller touches: the fake client builds a REST
	// mapper of the whole scheme on every write, which for client-go's full
	// scheme dominates the state-space test's time.
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = coordinationv1.AddToScheme(scheme)
	_ = policyv1.AddToScheme(scheme)
	_ = discoveryv1.AddToScheme(scheme)
	_ = networkingv1.AddToScheme(scheme)
	_ = storagev1.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	_ = cmapi.AddToScheme(scheme)
	// A plain tracker: the default one keeps managed fields, at a cost per
	// write that dominates the state-space test; applyMemberStatus stands
	// in for the one apply the controllers send.
	tracker := clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())
	fake := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjectTracker(tracker).
		WithStatusSubresource(&v1alpha1.EtcdCluster{}, &v1alpha1.EtcdMember{}, &v1alpha1.EtcdRecovery{}).Build()
	h := &harness{t: t, g: NewWithT(t), etcd: etcdfake.New(), now: time.Unix(1_700_000_000, 0),
		events: events.NewFakeRecorder(100), tracker: tracker}
	c := interceptor.NewClient(fake, interceptor.Funcs{
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			if done, err := h.applyMemberStatus(sub, obj, opts...); done {
				return err
			}
			return c.SubResource(sub).Apply(ctx, obj, opts...)
		},
	})
	h.c = c
	h.r = &Reconciler{Client: c, APIReader: c, Dialer: h.etcd, ClusterDomain: testDomain, Recorder: h.events,
		Now: func() time.Time { return h.now }, NetworkPolicy: testNetworkPolicy}
	return h
}

func (h *harness) createCluster(replicas int32) *v1alpha1.EtcdCluster {
	h.t.Helper()
	c := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: testName, Namespace: testNS, UID: types.UID("uid-" + testName), Generation: 1},
		Spec:       v1alpha1.EtcdClusterSpec{Replicas: ptr.To(replicas)},
	}
	h.g.Expect(h.c.Create(context.Background(), c)).To(Succeed())
	return c
}

func (h *harness) reconcile() ctrl.Result {
	h.t.Helper()
	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNS, Name: testName}})
	h.g.Expect(err).NotTo(HaveOccurred())
	return res
}

func (h *harness) cluster() *v1alpha1.EtcdCluster {
	h.t.Helper()
	c := &v1alpha1.EtcdCluster{}
	h.g.Expect(h.c.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: testName}, c)).To(Succeed())
	return c
}

func (h *harness) members() []v1alpha1.EtcdMember {
	h.t.Helper()
	var list v1alpha1.EtcdMemberList
	h.g.Expect(h.c.List(context.Background(), &list, client.InNamespace(testNS))).To(Succeed())
	return list.Items
}

func (h *harness) member(name string) *v1alpha1.EtcdMember {
	h.t.Helper()
	m := &v1alpha1.EtcdMember{}
	h.g.Expect(h.c.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: name}, m)).To(Succeed())
	return m
}

func peerURL(name string) string   { return v1alpha1.PeerURL(name, testName, testNS, testDomain) }
func clientURL(name string) string { return v1alpha1.ClientURL(name, testName, testNS, testDomain) }

// addMember creates an EtcdMember the way the controller does, optionally
// with its etcd-side add already finished.
func (h *harness) addMember(name string, age time.Duration, seed, pending bool) *v1alpha1.EtcdMember {
	h.t.Helper()
	cl := h.cluster()
	m := &v1alpha1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNS, Labels: v1alpha1.ClusterLabels(testName),
			CreationTimestamp: metav1.NewTime(h.now.Add(-age)),
		},
		Spec: v1alpha1.EtcdMemberSpec{ClusterName: testName, Bootstrap: seed, ClusterToken: "tok",
			MemberTemplate: v1alpha1.MemberTemplate{Version: v1alpha1.DefaultEtcdVersion}},
	}
	if !pending {
		m.Spec.InitialCluster = name + "=" + peerURL(name)
	}
	h.g.Expect(controllerutil.SetControllerReference(cl, m, h.c.Scheme())).To(Succeed())
	h.g.Expect(h.c.Create(context.Background(), m)).To(Succeed())
	return m
}

// readyPod creates the member's Pod, passing its readiness probe.
func (h *harness) readyPod(name string) {
	h.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: v1alpha1.MemberLabels(testName, name)},
		Status: corev1.PodStatus{
			PodIP:      "10.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(h.now)}}}},
		},
	}
	h.g.Expect(h.c.Create(context.Background(), p)).To(Succeed())
}

// formed builds a formed cluster of ready voters in Kubernetes and in etcd.
func (h *harness) formed(replicas int32, names ...string) {
	h.t.Helper()
	h.createCluster(replicas)
	for i, n := range names {
		m := h.addMember(n, time.Duration(len(names)-i)*time.Minute, i == 0, false)
		h.readyPod(n)
		h.labelVoter(n)
		em := h.etcd.AddVoter(n, peerURL(n), clientURL(n))
		h.setMemberStatus(m, em.IDString(), v1alpha1.MemberRoleVoter)
	}
	cl := h.cluster()
	cl.Status.ClusterID = fmt.Sprintf("%016x", etcdfake.DefaultClusterID)
	cl.Status.ClusterToken = "tok"
	cl.Status.Observed = &v1alpha1.ObservedClusterSpec{
		Replicas: replicas, MemberTemplate: v1alpha1.MemberTemplate{Version: v1alpha1.DefaultEtcdVersion},
	}
	deadline := metav1.NewTime(h.now.Add(10 * time.Minute))
	cl.Status.ProgressDeadline = &deadline
	h.g.Expect(h.c.Status().Update(context.Background(), cl)).To(Succeed())
}

// setReplicas edits spec.replicas as a user would, bumping the generation as
// the API server does.
func (h *harness) setReplicas(n int32) {
	h.t.Helper()
	cl := h.cluster()
	cl.Spec.Replicas = ptrInt32(n)
	cl.Generation++
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
}

func (h *harness) setMemberStatus(m *v1alpha1.EtcdMember, id string, role v1alpha1.MemberRole) {
	h.t.Helper()
	m = h.member(m.Name)
	m.Status.MemberID, m.Status.Role = id, role
	m.Status.PodName = m.Name
	h.g.Expect(h.c.Status().Update(context.Background(), m)).To(Succeed())
}

func (h *harness) condition(t string) metav1.Condition {
	h.t.Helper()
	for _, c := range h.cluster().Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	h.t.Fatalf("condition %s not set", t)
	return metav1.Condition{}
}

type etcdStatus = etcd.EndpointStatus

func (h *harness) pod(name string) *corev1.Pod {
	h.t.Helper()
	p := &corev1.Pod{}
	h.g.Expect(h.c.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: name}, p)).To(Succeed())
	return p
}

// labelVoter does what the member controller does once a member is a voter.
func (h *harness) labelVoter(name string) {
	h.t.Helper()
	p := h.pod(name)
	p.Labels[v1alpha1.RoleLabel] = v1alpha1.RoleLabelVoter
	h.g.Expect(h.c.Update(context.Background(), p)).To(Succeed())
}
