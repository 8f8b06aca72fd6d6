package memberstatus

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func entry(manager string, op metav1.ManagedFieldsOperationType, sub, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "etcd.quorumctl.io/v1alpha1",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields), Subresource: sub}
}

// fieldsOf is the manager's entry of the subresource, decoded to its paths.
func fieldsOf(g *WithT, entries []metav1.ManagedFieldsEntry, manager, sub string) []string {
	for _, e := range entries {
		if e.Manager == manager && e.Subresource == sub {
			set, err := decode(e)
			g.Expect(err).NotTo(HaveOccurred())
			var out []string
			for p := range set.Leaves().All() {
				out = append(out, p.String())
			}
			return out
		}
	}
	return nil
}

// TestSplit: the old writer's status fields go to the concerns that own
// them, an applier's own entry keeps its fields, and entries of the spec
// stay as they are.
func TestSplit(t *testing.T) {
	g := NewWithT(t)
	spec := entry("manager", metav1.ManagedFieldsOperationUpdate, "", `{"f:spec":{"f:initialCluster":{}}}`)
	legacy := entry("manager", metav1.ManagedFieldsOperationUpdate, "status",
		`{"f:status":{".":{},"f:memberID":{},"f:role":{},"f:fenced":{},"f:podName":{},"f:maintenance":{".":{},"f:kind":{},"f:since":{}},`+
			`"f:conditions":{".":{},"k:{\"type\":\"Ready\"}":{".":{},"f:type":{},"f:status":{}}}}}`)
	fence := entry(Fence.Manager, metav1.ManagedFieldsOperationApply, "status", `{"f:status":{"f:fenced":{}}}`)
	restart := entry(Restart.Manager, metav1.ManagedFieldsOperationApply, "status", `{"f:status":{"f:rolledAt":{}}}`)

	out, changed, err := split([]metav1.ManagedFieldsEntry{spec, legacy, fence, restart})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(BeTrue())
	g.Expect(out).To(ContainElement(spec))
	g.Expect(out).To(ContainElement(restart))
	g.Expect(fieldsOf(g, out, "manager", "status")).To(BeEmpty())
	g.Expect(fieldsOf(g, out, MemberID.Manager, "status")).To(ConsistOf(".status.memberID"))
	g.Expect(fieldsOf(g, out, Role.Manager, "status")).To(ConsistOf(".status.role"))
	g.Expect(fieldsOf(g, out, Fence.Manager, "status")).To(ConsistOf(".status.fenced"))
	g.Expect(fieldsOf(g, out, Maintenance.Manager, "status")).To(ConsistOf(".status.maintenance.kind", ".status.maintenance.since"))
	g.Expect(fieldsOf(g, out, Member.Manager, "status")).To(ConsistOf(".status.podName",
		`.status.conditions[type="Ready"].type`, `.status.conditions[type="Ready"].status`))
	for _, e := range out {
		if e.Subresource == "status" {
			g.Expect(e.Operation).To(Equal(metav1.ManagedFieldsOperationApply), e.Manager)
		}
	}
}

func TestSplitLeavesAppliedFieldsAlone(t *testing.T) {
	g := NewWithT(t)
	in := []metav1.ManagedFieldsEntry{
		entry("manager", metav1.ManagedFieldsOperationUpdate, "", `{"f:spec":{"f:initialCluster":{}}}`),
		entry(Fence.Manager, metav1.ManagedFieldsOperationApply, "status", `{"f:status":{"f:fenced":{}}}`),
	}
	out, changed, err := split(in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(BeFalse())
	g.Expect(out).To(Equal(in))
}
