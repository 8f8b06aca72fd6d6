package etcdcluster

import (
	"fmt"
	"reflect"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/memberstatus"
)

// The harness's API server keeps no managed fields (they cost more per
// write than the state-space test can spend), and the plain tracker takes
// an apply for a merge that removes nothing. applyMemberStatus stands in
// for the API server's apply of EtcdMember status: each field manager owns
// exactly its concern's fields, so an apply sets the concern's fields it
// carries and removes those it leaves out, and touches nothing else. The
// envtest of internal/component/memberstatus checks that a real API server
// does just that.

// unstructuredApply is the apply configuration memberstatus sends.
type unstructuredApply interface {
	UnstructuredContent() map[string]any
	SetUnstructuredContent(map[string]any)
}

func (h *harness) applyMemberStatus(sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) (bool, error) {
	u, ok := obj.(unstructuredApply)
	if !ok || sub != "status" {
		return false, nil
	}
	applied := u.UnstructuredContent()
	if applied["kind"] != "EtcdMember" {
		return false, nil
	}
	o := (&client.SubResourceApplyOptions{}).ApplyOpts(opts)
	concern, ok := concernOf(o.FieldManager)
	if !ok {
		return true, fmt.Errorf("field manager %q writes no concern of EtcdMember status", o.FieldManager)
	}
	md, _ := applied["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	gvr := v1alpha1.GroupVersion.WithResource("etcdmembers")
	stored, err := h.tracker.Get(gvr, ns, name)
	if err != nil {
		return true, err
	}
	m := stored.(*v1alpha1.EtcdMember).DeepCopy()
	if rv, ok := md["resourceVersion"].(string); ok && rv != m.ResourceVersion {
		return true, apierrors.NewConflict(gvr.GroupResource(), name, fmt.Errorf("the object has been modified"))
	}
	var part v1alpha1.EtcdMemberStatus
	status, _ := applied["status"].(map[string]any)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(status, &part); err != nil {
		return true, err
	}
	setConcern(&m.Status, &part, concern)
	n, err := strconv.ParseUint(m.ResourceVersion, 10, 64)
	if err != nil {
		return true, err
	}
	m.ResourceVersion = strconv.FormatUint(n+1, 10)
	if err := h.tracker.Update(gvr, m, ns); err != nil {
		return true, err
	}
	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		return true, err
	}
	out["apiVersion"], out["kind"] = v1alpha1.GroupVersion.String(), "EtcdMember"
	u.SetUnstructuredContent(out)
	return true, nil
}

func concernOf(manager string) (memberstatus.Concern, bool) {
	for _, c := range memberstatus.Concerns {
		if c.Manager == manager {
			return c, true
		}
	}
	return memberstatus.Concern{}, false
}

// setConcern copies the concern's fields of part into s, empty ones too:
// every status field the concern's projection keeps is replaced.
func setConcern(s, part *v1alpha1.EtcdMemberStatus, concern memberstatus.Concern) {
	every := memberstatus.EveryField()
	kept := concern.Project(&every)
	sv, pv, kv := reflect.ValueOf(s).Elem(), reflect.ValueOf(part).Elem(), reflect.ValueOf(&kept).Elem()
	for i := range sv.NumField() {
		if !kv.Field(i).IsZero() {
			sv.Field(i).Set(pv.Field(i))
		}
	}
}
