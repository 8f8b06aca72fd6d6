package plugin

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

const testNS = "ns1"

// fakeForwarder hands out one endpoint per Pod. The fake etcd members use
// the same endpoints as their client URLs, so a call reaches a member only
// when it goes through that member's tunnel.
type fakeForwarder struct {
	mu        sync.Mutex
	endpoints map[string]string // Pod name → endpoint
	errs      map[string]error  // Pod name → Forward error
	open      int
	forwarded []string
}

func (f *fakeForwarder) Forward(_ context.Context, namespace, pod string, port int) (Tunnel, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if port != v1alpha1.ClientPort {
		return nil, fmt.Errorf("forwarded port %d, want the client port", port)
	}
	f.forwarded = append(f.forwarded, namespace+"/"+pod)
	if err := f.errs[pod]; err != nil {
		return nil, err
	}
	ep, ok := f.endpoints[pod]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, pod)
	}
	f.open++
	return &fakeTunnel{f: f, endpoint: ep}, nil
}

func (f *fakeForwarder) openTunnels() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open
}

type fakeTunnel struct {
	f        *fakeForwarder
	endpoint string
	closed   bool
	lastErr  error
}

func (t *fakeTunnel) Endpoint() string { return t.endpoint }
func (t *fakeTunnel) LastError() error { return t.lastErr }
func (t *fakeTunnel) Close() error {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	if !t.closed {
		t.closed = true
		t.f.open--
	}
	return nil
}

// world is one namespace with EtcdClusters, their Pods and one fake etcd.
type world struct {
	t       *testing.T
	etcd    *etcdfake.Fake
	fwd     *fakeForwarder
	objs    []client.Object
	members map[string]etcd.Member
	funcs   interceptor.Funcs
	port    int
	flags   []KubeFlags
}

func newWorld(t *testing.T) *world {
	return &world{
		t:       t,
		etcd:    etcdfake.New(),
		fwd:     &fakeForwarder{endpoints: map[string]string{}, errs: map[string]error{}},
		members: map[string]etcd.Member{},
		port:    30000,
	}
}

func (w *world) cluster(name string) {
	w.objs = append(w.objs, &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS}})
}

func (w *world) endpoint(pod string) string {
	ep, ok := w.fwd.endpoints[pod]
	if !ok {
		w.port++
		ep = fmt.Sprintf("http://127.0.0.1:%d", w.port)
		w.fwd.endpoints[pod] = ep
	}
	return ep
}

func peerURL(cluster, member string) string {
	return v1alpha1.PeerURL(member, cluster, testNS, "cluster.local")
}

// voter adds a started voting member and its running, ready Pod.
func (w *world) voter(cluster, name string) etcd.Member {
	m := w.etcd.AddVoter(name, peerURL(cluster, name), w.endpoint(name))
	w.members[name] = m
	w.pod(cluster, name, corev1.PodRunning, true)
	return m
}

// learner adds a learner; started learners publish their name and get a
// running Pod, unstarted ones a Pending Pod.
func (w *world) learner(cluster, name string, started bool) etcd.Member {
	m := w.etcd.AddLearner(peerURL(cluster, name))
	if started {
		w.etcd.StartMember(m.ID, name, w.endpoint(name))
		w.pod(cluster, name, corev1.PodRunning, true)
	} else {
		w.pod(cluster, name, corev1.PodPending, false)
	}
	w.members[name] = m
	return m
}

func (w *world) pod(cluster, name string, phase corev1.PodPhase, ready bool) {
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	w.objs = append(w.objs, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: v1alpha1.MemberLabels(cluster, name)},
		Status: corev1.PodStatus{
			Phase:      phase,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}},
		},
	})
}

func (w *world) id(name string) string { return w.members[name].IDString() }

func (w *world) env() *Env {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		w.t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		w.t.Fatal(err)
	}
	kube := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(w.objs...).WithInterceptorFuncs(w.funcs).Build()
	return &Env{Kube: kube, Namespace: testNS, Forwarder: w.fwd, Dialer: w.etcd}
}

type result struct {
	out, err string
	code     int
}

// run runs a command line and checks that nothing is left open, whatever
// the outcome.
func (w *world) run(args ...string) result {
	w.t.Helper()
	var out, errOut bytes.Buffer
	app := &App{Out: &out, Err: &errOut, NewEnv: func(f KubeFlags, _ ...etcd.Option) (*Env, error) {
		w.flags = append(w.flags, f)
		return w.env(), nil
	}}
	code := app.Run(context.Background(), args)
	if n := w.fwd.openTunnels(); n != 0 {
		w.t.Errorf("%v left %d tunnels open", args, n)
	}
	if n := w.etcd.OpenClients(); n != 0 {
		w.t.Errorf("%v left %d etcd clients open", args, n)
	}
	return result{out: out.String(), err: errOut.String(), code: code}
}

func forbidden(resource, name string) error {
	gr := schema.ParseGroupResource(resource)
	return apierrors.NewForbidden(gr, name, fmt.Errorf(`User "bob" cannot do that`))
}
