package memberstatus

import (
	"reflect"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// TestConcernsPartitionStatus: every EtcdMember status field belongs to
// exactly one concern, and so has exactly one field manager; a new field
// fails here until a concern takes it.
func TestConcernsPartitionStatus(t *testing.T) {
	g := NewWithT(t)
	every := EveryField()
	ev := reflect.ValueOf(every)
	typ := ev.Type()
	owners := map[string][]string{}
	for i := range ev.NumField() {
		g.Expect(ev.Field(i).IsZero()).To(BeFalse(), "EveryField leaves %s empty", typ.Field(i).Name)
	}
	managers := map[string]bool{}
	for _, c := range Concerns {
		g.Expect(managers[c.Manager]).To(BeFalse(), "two concerns share manager %s", c.Manager)
		managers[c.Manager] = true
		kept := reflect.ValueOf(c.Project(&every))
		for i := range kept.NumField() {
			if !kept.Field(i).IsZero() {
				g.Expect(kept.Field(i).Interface()).To(Equal(ev.Field(i).Interface()), "%s changes %s", c.Manager, typ.Field(i).Name)
				owners[typ.Field(i).Name] = append(owners[typ.Field(i).Name], c.Manager)
			}
		}
	}
	for i := range typ.NumField() {
		g.Expect(owners[typ.Field(i).Name]).To(HaveLen(1), "status.%s", typ.Field(i).Name)
	}
}

func TestFields(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Restart.Fields()).To(Equal([]string{"restartApproved", "rolledAt"}))
	g.Expect(Fence.Fields()).To(Equal([]string{"fenced"}))
	g.Expect(Member.Fields()).To(ConsistOf("observedGeneration", "conditions", "podName", "podUID", "version",
		"nodeName", "firstReadyTime", "forceNewCluster"))
}

// A concern's projection is a copy: changing it leaves the status alone.
func TestProjectKeepsOnlyTheConcern(t *testing.T) {
	g := NewWithT(t)
	s := v1alpha1.EtcdMemberStatus{MemberID: "a", Role: v1alpha1.MemberRoleLearner, Fenced: "diverged", PodName: "p"}
	g.Expect(Fence.Project(&s)).To(Equal(v1alpha1.EtcdMemberStatus{Fenced: "diverged"}))
	g.Expect(Role.Project(&s)).To(Equal(v1alpha1.EtcdMemberStatus{Role: v1alpha1.MemberRoleLearner}))
	g.Expect(Member.Project(&s)).To(Equal(v1alpha1.EtcdMemberStatus{PodName: "p"}))
}
