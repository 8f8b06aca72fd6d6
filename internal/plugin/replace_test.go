package plugin

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

func (w *world) etcdMember(cluster, name string) {
	w.objs = append(w.objs, &v1alpha1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: v1alpha1.ClusterLabels(cluster)},
		Spec:       v1alpha1.EtcdMemberSpec{ClusterName: cluster, ClusterToken: "t"},
	})
}

func TestReplaceMember_DeletesTheMemberForTheOperatorToReplace(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.cluster("demo")
	w.etcdMember("demo", "demo-a")
	var deleted []string
	w.funcs.Delete = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		deleted = append(deleted, obj.GetName())
		return c.Delete(ctx, obj, opts...)
	}
	r := w.run("replace-member", "demo-a", "--wait=false")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(deleted).To(Equal([]string{"demo-a"}))
	g.Expect(r.out).To(ContainSubstring("Replacing member demo-a of EtcdCluster ns1/demo"))
}

func TestReplaceMember_WaitsUntilTheClusterIsReadyWithoutIt(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.objs = append(w.objs, &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: testNS, Generation: 2},
		Status: v1alpha1.EtcdClusterStatus{
			Conditions: []metav1.Condition{{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.MembersReadyReason, ObservedGeneration: 2}},
			Members:    []v1alpha1.MemberSummary{{Name: "demo-b"}, {Name: "demo-c"}, {Name: "demo-d"}},
		},
	})
	w.etcdMember("demo", "demo-a")
	r := w.run("replace-member", "demo-a")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(ContainSubstring("is replaced and EtcdCluster demo is Ready"))
}

func TestReplaceMember_Refusals(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.objs = append(w.objs, &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "paused", Namespace: testNS},
		Spec:       v1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](0)},
	})
	w.etcdMember("paused", "paused-a")
	r := w.run("replace-member", "paused-a")
	g.Expect(r.code).To(Equal(ExitError))
	g.Expect(r.err).To(ContainSubstring("is paused"))

	r = w.run("replace-member", "nobody")
	g.Expect(r.code).To(Equal(ExitError))
	g.Expect(r.err).To(ContainSubstring("EtcdMember nobody not found in namespace ns1"))

	w.funcs.Delete = func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
		return forbidden("etcdmembers.etcd.quorumctl.io", "paused-a")
	}
	w.cluster("demo")
	w.etcdMember("demo", "demo-a")
	r = w.run("replace-member", "demo-a", "--wait=false")
	g.Expect(r.code).To(Equal(ExitError))
	g.Expect(r.err).To(ContainSubstring(`"delete"`))
}
