//go:build !race

package etcdcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// The caches and the API server of the state-space test. Both controllers
// read EtcdMembers, Pods and ConfigMaps through caches that lag behind the
// API server; the test itself, and the reads no cache serves, go to the
// fake API server's store directly, and so do status patches: the fake
// client's JSON round trips would otherwise take most of the test's time.

// snapshot is what a cache had seen at one moment, of the kinds both
// controllers read through it.
type snapshot struct {
	members []v1alpha1.EtcdMember
	pods    []corev1.Pod
	cms     []corev1.ConfigMap
}

func (h *harness) takeSnapshot() *snapshot {
	var ms v1alpha1.EtcdMemberList
	var ps corev1.PodList
	var cs corev1.ConfigMapList
	h.list(&ms, &ps, &cs)
	return &snapshot{members: ms.Items, pods: ps.Items, cms: cs.Items}
}

// get reads an object of a kind the scheme knows from the API server's
// store directly; done is false for any other kind.
func (h *harness) get(key client.ObjectKey, obj client.Object) (bool, error) {
	gvk, err := apiutil.GVKForObject(obj, h.c.Scheme())
	if err != nil {
		return false, nil
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	got, err := h.tracker.Get(gvr, key.Namespace, key.Name)
	if err != nil {
		return true, err
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(got).Elem())
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return true, nil
}

// storedCluster reads the cluster from the API server's store directly.
func (h *harness) storedCluster() *v1alpha1.EtcdCluster {
	h.t.Helper()
	got, err := h.tracker.Get(v1alpha1.GroupVersion.WithResource("etcdclusters"), testNS, testName)
	h.g.Expect(err).NotTo(HaveOccurred())
	return got.(*v1alpha1.EtcdCluster)
}

// list reads the API server's store directly: what a List returns, in all
// namespaces, without the fake client's JSON round trips, which would
// dominate the test's time.
func (h *harness) list(lists ...client.ObjectList) {
	h.t.Helper()
	for _, l := range lists {
		gvk, err := apiutil.GVKForObject(l, h.c.Scheme())
		h.g.Expect(err).NotTo(HaveOccurred())
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		got, err := h.tracker.List(gvr, gvk, "")
		h.g.Expect(err).NotTo(HaveOccurred())
		reflect.ValueOf(l).Elem().Set(reflect.ValueOf(got).Elem())
	}
}

// lagClient serves reads of EtcdMembers, Pods and ConfigMaps from a
// snapshot, as a cache that has not yet seen the latest writes does; every
// other read, and every write, goes to the API server. A nil view reads the
// API server.
type lagClient struct {
	client.Client
	view *snapshot
	// store, when set, serves the reads that go to the API server straight
	// from its store, without the fake client's JSON round trips.
	store *harness
}

var (
	membersResource = v1alpha1.GroupVersion.WithResource("etcdmembers").GroupResource()
	podsResource    = corev1.Resource("pods")
	cmsResource     = corev1.Resource("configmaps")
)

func (c *lagClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if c.view != nil {
		switch o := obj.(type) {
		case *v1alpha1.EtcdMember:
			return getFrom(c.view.members, key, o, membersResource)
		case *corev1.Pod:
			return getFrom(c.view.pods, key, o, podsResource)
		case *corev1.ConfigMap:
			return getFrom(c.view.cms, key, o, cmsResource)
		}
	}
	if c.store != nil {
		if done, err := c.store.get(key, obj); done {
			return err
		}
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *lagClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if c.view != nil {
		var err error
		switch l := list.(type) {
		case *v1alpha1.EtcdMemberList:
			l.Items, err = listFrom(c.view.members, opts)
			return err
		case *corev1.PodList:
			l.Items, err = listFrom(c.view.pods, opts)
			return err
		case *corev1.ConfigMapList:
			l.Items, err = listFrom(c.view.cms, opts)
			return err
		}
	}
	return c.Client.List(ctx, list, opts...)
}

type cachedObject[T any] interface {
	*T
	client.Object
	DeepCopyInto(*T)
}

func getFrom[T any, P cachedObject[T]](items []T, key client.ObjectKey, out P, gr schema.GroupResource) error {
	for i := range items {
		if p := P(&items[i]); p.GetNamespace() == key.Namespace && p.GetName() == key.Name {
			p.DeepCopyInto((*T)(out))
			return nil
		}
	}
	return apierrors.NewNotFound(gr, key.Name)
}

func listFrom[T any, P cachedObject[T]](items []T, opts []client.ListOption) ([]T, error) {
	lo := &client.ListOptions{}
	lo.ApplyOptions(opts)
	if lo.FieldSelector != nil && !lo.FieldSelector.Empty() {
		return nil, fmt.Errorf("the test's cache has no field index (%s)", lo.FieldSelector)
	}
	var out []T
	for i := range items {
		p := P(&items[i])
		if lo.Namespace != "" && p.GetNamespace() != lo.Namespace {
			continue
		}
		if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(p.GetLabels())) {
			continue
		}
		var cp T
		p.DeepCopyInto(&cp)
		out = append(out, cp)
	}
	return out, nil
}

// patchStatus applies a merge patch to the status of an EtcdCluster or
// EtcdMember in the store, as the API server's status subresource does:
// the rest of the patch is ignored, and the caller's object becomes what
// the server holds. The fake client does the same through several JSON
// round trips, which took half the test's time. A patch that carries a
// resourceVersion is left to the fake client, which checks it.
func (h *harness) patchStatus(sub string, obj client.Object, patch client.Patch) (bool, error) {
	var gvr schema.GroupVersionResource
	switch obj.(type) {
	case *v1alpha1.EtcdCluster:
		gvr = v1alpha1.GroupVersion.WithResource("etcdclusters")
	case *v1alpha1.EtcdMember:
		gvr = v1alpha1.GroupVersion.WithResource("etcdmembers")
	default:
		return false, nil
	}
	if sub != "status" || patch.Type() != types.MergePatchType {
		return false, nil
	}
	data, err := patch.Data(obj)
	if err != nil {
		return true, err
	}
	var p map[string]any
	if err := json.Unmarshal(data, &p); err != nil {
		return true, err
	}
	if md, ok := p["metadata"].(map[string]any); ok && md["resourceVersion"] != nil {
		return false, nil
	}
	stored, err := h.tracker.Get(gvr, obj.GetNamespace(), obj.GetName())
	if err != nil {
		return true, err
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(stored)
	if err != nil {
		return true, err
	}
	if status, ok := p["status"]; ok {
		u["status"] = mergePatch(u["status"], status)
	}
	next := reflect.New(reflect.TypeOf(stored).Elem()).Interface().(client.Object)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, next); err != nil {
		return true, err
	}
	rv, err := strconv.ParseUint(next.GetResourceVersion(), 10, 64)
	if err != nil {
		return true, err
	}
	next.SetResourceVersion(strconv.FormatUint(rv+1, 10))
	if err := h.tracker.Update(gvr, next, next.GetNamespace()); err != nil {
		return true, err
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(next.DeepCopyObject()).Elem())
	return true, nil
}

// mergePatch is RFC 7386: objects merge key by key, null removes a key, and
// anything else replaces what was there.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergePatch(t[k], v)
	}
	return t
}

// cacheBehind: the cluster controller's pass read a view that the API
// server has moved past, so a watch event is on its way and will bring
// the cluster back without a requeue.
func (w *world) cacheBehind() bool {
	v := w.clusterCache.view
	if v == nil || v == w.last {
		return false
	}
	return !sameVersions(v.members, w.last.members) || !sameVersions(v.pods, w.last.pods) || !sameVersions(v.cms, w.last.cms)
}

func sameVersions[T any, P cachedObject[T]](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	versions := map[types.UID]string{}
	for i := range a {
		versions[P(&a[i]).GetUID()] = P(&a[i]).GetResourceVersion()
	}
	for i := range b {
		if v, ok := versions[P(&b[i]).GetUID()]; !ok || v != P(&b[i]).GetResourceVersion() {
			return false
		}
	}
	return true
}

// versions is what the member controller watches of one member, as the
// snapshot has it.
func (s *snapshot) versions(name string) string {
	out := ""
	for _, m := range s.members {
		if m.Name == name {
			out += "m" + m.ResourceVersion
		}
	}
	for _, p := range s.pods {
		if p.Name == name {
			out += "p" + string(p.UID) + p.ResourceVersion
		}
	}
	for _, c := range s.cms {
		if c.Name == v1alpha1.StartupConfigName(name) {
			out += "c" + c.ResourceVersion
		}
	}
	return out
}
