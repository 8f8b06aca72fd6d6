//go:build !race

package etcdcluster

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/controller/etcdmember"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// The world of the state-space test: everything around the cluster
// controller that moves by itself between its passes. The member controller
// (the real one, finalizer included) makes each member's Pod, ConfigMap and
// volume and latches its first boot; the garbage collector removes what a
// gone member owned; a scheduler and kubelet place and start Pods; and etcd
// starts members whose Pod runs, catches learners up, and elects a leader
// among the voters that are up. Both controllers read through caches that
// lag behind the API server.

// fault is what stays wrong with a member whatever is done to its Pod.
type fault int

const (
	noFault fault = iota
	// faultDataDirLost: every start of its etcd fails; the data is gone.
	faultDataDirLost
	// faultUnresponsive: its etcd runs and never answers.
	faultUnresponsive
	// faultForeign: it answers for another cluster.
	faultForeign
)

// world is the harness's model of everything but the cluster controller.
type world struct {
	h *harness
	// clusterCache and memberCache are what the two controllers read
	// through; lag says whether they lag behind the API server.
	clusterCache, memberCache *lagClient
	lag                       bool
	// last is the snapshot taken when the cluster controller's pass began.
	last             *snapshot
	memberController *etcdmember.Reconciler
	faults           map[string]fault
	// startedAt is the world step in which each learner's etcd started: the
	// leader catches it up by the next.
	startedAt map[uint64]int
	// resetStatusAt is the step at which an endpoint's scripted Status
	// gives way to the model's: a lag that clears by itself.
	resetStatusAt map[string]int
	steps         int
	// memberSeen is, by member, what the member controller last saw of
	// it; memberAgain, whether it asked to look again.
	memberSeen  map[string]string
	memberAgain map[string]bool
}

// uids makes object UIDs unique across the test's parallel states.
var uids atomic.Int64

// newWorld gives the harness an API server that, like a real one, stamps
// each new object with a UID and a creation time, and builds both
// controllers on it; see patchStatus for its status subresource.
func newWorld(h *harness, lag bool) *world {
	h.c = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if obj.GetUID() == "" {
				obj.SetUID(types.UID(fmt.Sprintf("uid-%d", uids.Add(1))))
			}
			if ts := obj.GetCreationTimestamp(); ts.IsZero() {
				obj.SetCreationTimestamp(metav1.NewTime(h.now))
			}
			return c.Create(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if done, err := h.patchStatus(sub, obj, patch); done {
				return err
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	w := &world{h: h, lag: lag, faults: map[string]fault{}, startedAt: map[uint64]int{},
		memberSeen: map[string]string{}, memberAgain: map[string]bool{},
		clusterCache: &lagClient{Client: h.c, store: h}, memberCache: &lagClient{Client: h.c, store: h}}
	h.r = &Reconciler{Client: w.clusterCache, APIReader: h.c, Dialer: h.etcd, ClusterDomain: testDomain,
		Recorder: discardEvents{}, Now: func() time.Time { return h.now }, NetworkPolicy: testNetworkPolicy}
	w.memberController = &etcdmember.Reconciler{Client: w.memberCache, Dialer: h.etcd, ClusterDomain: testDomain}
	return w
}

type discardEvents struct{}

func (discardEvents) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {}

// beginPass moves the caches on. The cluster controller reads what the API
// server held when its previous pass began: neither that pass's writes nor
// the world's since are seen. The member controller reads what it held when
// this pass began, so it sees this pass's writes one step late. Without lag
// both read what the API server holds when they begin, which is all a
// controller that lists once per pass can see.
func (w *world) beginPass() {
	now := w.h.takeSnapshot()
	w.clusterCache.view = now
	if w.lag && w.last != nil {
		w.clusterCache.view = w.last
	}
	w.last = now
}

// step is what happens in the world between two passes; it returns the
// world as it then is.
func (w *world) step() *observed {
	w.steps++
	w.runMemberController()
	o := w.observeAPI()
	w.collectGarbage(o)
	w.kubelet(o)
	w.runEtcd(o)
	for url, at := range w.resetStatusAt {
		if w.steps >= at {
			w.h.etcd.ResetStatus(url)
			delete(w.resetStatusAt, url)
		}
	}
	w.observeEtcd(o)
	return o
}

// runMemberController runs the member controller, as its watches would:
// on each member whose member, Pod or ConfigMap its cache shows changed
// since it last looked, or that it asked to look at again. Its errors are a
// real controller's retries (a conflict on a stale read, a create the cache
// had not seen): it tries again in the next step.
func (w *world) runMemberController() {
	view := w.last
	if !w.lag {
		view = w.h.takeSnapshot()
	}
	w.memberCache.view = view
	// Oldest first, as the names of new members are random and the order
	// of reconciles must not be.
	members := slices.Clone(view.members)
	sort.Slice(members, func(i, j int) bool {
		a, b := members[i].CreationTimestamp, members[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return members[i].Name < members[j].Name
	})
	for _, m := range members {
		n := m.Name
		seen := view.versions(n)
		if w.memberSeen[n] == seen && !w.memberAgain[n] {
			continue
		}
		res, err := w.memberController.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNS, Name: n}})
		w.memberSeen[n] = seen
		w.memberAgain[n] = err != nil || res.RequeueAfter > 0
	}
}

// collectGarbage deletes the Pods, ConfigMaps and volumes whose controlling
// member is gone.
func (w *world) collectGarbage(o *observed) {
	live := map[types.UID]bool{}
	for _, m := range o.members {
		live[m.UID] = true
	}
	orphan := func(obj client.Object) bool {
		ref := metav1.GetControllerOf(obj)
		if ref == nil || ref.Kind != "EtcdMember" || live[ref.UID] {
			return false
		}
		w.h.g.Expect(client.IgnoreNotFound(w.h.c.Delete(context.Background(), obj))).To(Succeed())
		return true
	}
	for n, p := range o.pods {
		if orphan(p) {
			delete(o.pods, n)
		}
	}
	o.cms = slices.DeleteFunc(o.cms, func(c corev1.ConfigMap) bool { return orphan(&c) })
	for i := range o.pvcs {
		orphan(&o.pvcs[i])
	}
}

// kubelet places each new Pod and starts it. A Pod goes to the node its
// member's volume is bound to, or else to the first Ready node its
// nodeSelector matches; one that fits nowhere stays Pending, unschedulable.
// A Pod that started keeps its status until it is deleted: nothing here
// restarts a member by itself.
func (w *world) kubelet(o *observed) {
	ctx := context.Background()
	for _, p := range o.pods {
		m := o.member(p.Labels[v1alpha1.MemberLabel])
		if p.Spec.NodeName != "" || !p.DeletionTimestamp.IsZero() || m == nil {
			continue
		}
		node, ok := o.schedule(m, p)
		if !ok {
			if p.Status.Phase != corev1.PodPending {
				p.Status.Phase = corev1.PodPending
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
					Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.NewTime(w.h.now)}}
				w.h.g.Expect(w.h.c.Status().Update(ctx, p)).To(Succeed())
			}
			continue
		}
		p.Spec.NodeName = node
		w.h.g.Expect(w.h.c.Update(ctx, p)).To(Succeed())
		w.h.g.Expect(w.h.c.Status().Update(ctx, w.started(p, w.faults[m.Name]))).To(Succeed())
	}
}

func (o *observed) schedule(m *v1alpha1.EtcdMember, p *corev1.Pod) (string, bool) {
	names := make([]string, 0, len(o.nodes))
	for n := range o.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		n := o.nodes[name]
		if m.Status.NodeName != "" && n.Name != m.Status.NodeName {
			continue
		}
		if nodeReady(n) != corev1.ConditionTrue || n.Spec.Unschedulable {
			continue
		}
		if labels.SelectorFromSet(p.Spec.NodeSelector).Matches(labels.Set(n.Labels)) {
			return n.Name, true
		}
	}
	return "", false
}

// started is the status of a Pod whose container has started: ready, or as
// its member's fault has it.
func (w *world) started(p *corev1.Pod, f fault) *corev1.Pod {
	since := metav1.NewTime(w.h.now)
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "10.0.0.1",
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: pod.ContainerName, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: since}}}},
	}
	switch f {
	case faultDataDirLost:
		p.Status.Conditions[1].Status = corev1.ConditionFalse
		p.Status.ContainerStatuses[0] = corev1.ContainerStatus{Name: pod.ContainerName, RestartCount: 1,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: wipedFatal}}}
	case faultUnresponsive:
		p.Status.Conditions[1].Status = corev1.ConditionFalse
		p.Status.ContainerStatuses[0].Ready = false
	}
	return p
}

// runEtcd brings each member's etcd in line with its Pod: a member whose Pod
// runs answers, and one that has never run starts (a learner then catches
// up by the next step); one whose Pod is down does not answer. The voters
// that are up elect a leader if they are a quorum, and there is none
// otherwise.
func (w *world) runEtcd(o *observed) {
	f := w.h.etcd
	up := map[uint64]bool{}
	for _, em := range f.Members() {
		m := o.memberByPeerURL(em.PeerURLs[0])
		if m == nil {
			continue
		}
		url := m.Spec.ClientURL
		if !o.podUp(m) || w.faults[m.Name] == faultDataDirLost || w.faults[m.Name] == faultUnresponsive {
			f.SetEndpointError(url, etcdfake.ErrUnreachable)
			continue
		}
		f.SetEndpointError(url, nil)
		up[em.ID] = w.faults[m.Name] != faultForeign
		switch {
		case em.Name == "":
			f.StartMember(em.ID, m.Name, url)
			if em.IsLearner {
				f.SetLearnerReady(em.ID, false)
				w.startedAt[em.ID] = w.steps
			}
		case em.IsLearner && w.startedAt[em.ID] < w.steps:
			f.SetLearnerReady(em.ID, true)
		}
	}
	w.elect(up)
}

func (w *world) elect(up map[uint64]bool) {
	f := w.h.etcd
	var voters, alive []uint64
	for _, em := range f.Members() {
		if em.IsLearner {
			continue
		}
		voters = append(voters, em.ID)
		if up[em.ID] {
			alive = append(alive, em.ID)
		}
	}
	switch {
	case len(alive)*2 <= len(voters):
		f.SetLeader(0)
	case !up[f.Leader()] || !contains64(voters, f.Leader()):
		f.SetLeader(alive[0])
	}
}

func contains64(list []uint64, x uint64) bool {
	for _, y := range list {
		if y == x {
			return true
		}
	}
	return false
}

var formedNames = []string{"demo-a", "demo-b", "demo-c"}

// formed is a formed cluster of three ready voters, demo-a to demo-c on
// node-a to node-c, as the controllers left it, built once: each state's
// API server starts with copies of its objects. Building it runs the member
// controller and the kubelet, which would cost more than most runs.
var formed struct {
	sync.Once
	objs []runtime.Object
}

// form gives the world the formed cluster, for the given replicas.
func (w *world) form(replicas int32) {
	h := w.h
	formed.Do(func() {
		fh := newHarness(h.t)
		fw := newWorld(fh, false)
		fw.build()
		lists := []client.ObjectList{&v1alpha1.EtcdClusterList{}, &v1alpha1.EtcdMemberList{}, &corev1.PodList{},
			&corev1.ConfigMapList{}, &corev1.PersistentVolumeClaimList{}, &corev1.NodeList{}}
		fh.list(lists...)
		for _, l := range lists {
			items, err := meta.ExtractList(l)
			fh.g.Expect(err).NotTo(HaveOccurred())
			formed.objs = append(formed.objs, items...)
		}
	})
	for _, o := range formed.objs {
		h.g.Expect(h.tracker.Add(o.DeepCopyObject())).To(Succeed())
	}
	// The fake derives IDs from the URLs and the order of adds, so these
	// are the IDs the members have recorded.
	for _, n := range formedNames {
		em := h.etcd.AddVoter(n, peerURL(n), clientURL(n))
		h.g.Expect(h.member(n).Status.MemberID).To(Equal(em.IDString()))
	}
	view := h.takeSnapshot()
	for _, n := range formedNames {
		w.memberSeen[n] = view.versions(n)
	}
	if replicas != 3 {
		cl := h.cluster()
		cl.Spec.Replicas = ptrInt32(replicas)
		h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
		cl.Status.Observed.Replicas = replicas
		h.g.Expect(h.c.Status().Update(context.Background(), cl)).To(Succeed())
	}
}

// build forms the cluster: members with their URLs, etcd IDs and first
// boot recorded, and the Pods, ConfigMaps and volumes the member controller
// makes for them, running.
func (w *world) build() {
	h := w.h
	h.createCluster(3)
	for i, n := range formedNames {
		node := "node-" + n[len("demo-"):]
		h.node(node, corev1.ConditionTrue, h.now.Add(-time.Hour))
		h.addMember(n, time.Duration(len(formedNames)-i)*time.Minute, i == 0, false)
		em := h.etcd.AddVoter(n, peerURL(n), clientURL(n))
		m := h.member(n)
		m.Spec.PeerURL, m.Spec.ClientURL = peerURL(n), clientURL(n)
		m.Finalizers = []string{v1alpha1.MemberFinalizer}
		h.g.Expect(h.c.Update(context.Background(), m)).To(Succeed())
		booted := metav1.NewTime(h.now.Add(-time.Hour))
		m.Status = v1alpha1.EtcdMemberStatus{MemberID: em.IDString(), Role: v1alpha1.MemberRoleVoter,
			NodeName: node, FirstReadyTime: &booted}
		h.g.Expect(h.c.Status().Update(context.Background(), m)).To(Succeed())
	}
	cl := h.cluster()
	cl.Status.ClusterID = fmt.Sprintf("%016x", etcdfake.DefaultClusterID)
	cl.Status.ClusterToken = "tok"
	cl.Status.Observed = &v1alpha1.ObservedClusterSpec{
		Replicas: 3, MemberTemplate: v1alpha1.MemberTemplate{Version: v1alpha1.DefaultEtcdVersion},
	}
	deadline := metav1.NewTime(h.now.Add(10 * time.Minute))
	cl.Status.ProgressDeadline = &deadline
	cl.Status.ObservedGeneration = cl.Generation
	h.g.Expect(h.c.Status().Update(context.Background(), cl)).To(Succeed())
	w.settle(2)
}

// settle runs n world steps that read the API server, for a setup to have
// the member controller and the kubelet do their part.
func (w *world) settle(n int) {
	lag := w.lag
	w.lag = false
	for range n {
		w.step()
	}
	w.lag = lag
}

// etcdIDOf is the etcd ID of the named member, 0 if etcd does not list it.
func (h *harness) etcdIDOf(name string) uint64 {
	em, _ := h.etcdMember(peerURL(name))
	return em.ID
}
