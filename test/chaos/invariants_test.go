package chaos

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// healthy builds the observation of a Ready cluster of n members, c-0 the
// leader, each behind the client Service.
func healthy(n int) Observation {
	cl := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Generation: 4},
		Spec:       v1alpha1.EtcdClusterSpec{Replicas: ptr.To(int32(n))},
		Status: v1alpha1.EtcdClusterStatus{
			ObservedGeneration: 4,
			ClusterID:          "00000000000000aa",
			Conditions: []metav1.Condition{{
				Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue, ObservedGeneration: 4, Reason: "Ready",
			}},
		},
	}
	o := Observation{Cluster: cl, Views: map[string]EtcdView{}}
	var list []EtcdEntry
	slice := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "c-client-x"}}
	for i := range n {
		name := fmt.Sprintf("c-%d", i)
		id := uint64(0x100 + i)
		list = append(list, EtcdEntry{Name: name, ID: id})
		cl.Status.Members = append(cl.Status.Members, v1alpha1.MemberSummary{
			Name: name, ID: fmt.Sprintf("%016x", id), Role: v1alpha1.MemberRoleVoter, Ready: true,
		})
		labels := v1alpha1.MemberLabels("c", name)
		o.Members = append(o.Members, v1alpha1.EtcdMember{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Status:     v1alpha1.EtcdMemberStatus{MemberID: fmt.Sprintf("%016x", id), Role: v1alpha1.MemberRoleVoter},
		})
		o.Pods = append(o.Pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
		o.Claims = append(o.Claims, corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + name, Labels: labels}})
		o.ConfigMaps = append(o.ConfigMaps, corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-startup", Labels: labels}})
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.0.0.%d", i)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: name},
		})
	}
	o.Slices = []discoveryv1.EndpointSlice{slice}
	for i := range n {
		name := fmt.Sprintf("c-%d", i)
		// Each member lists the others in its own order: the check must
		// not care.
		own := append(append([]EtcdEntry{}, list[i:]...), list[:i]...)
		o.Views[name] = EtcdView{ID: uint64(0x100 + i), ClusterID: 0xaa, Leader: 0x100, Members: own}
	}
	return o
}

func TestHealthyClusterHoldsEveryInvariant(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		if v := CheckInvariants(healthy(n)); len(v) != 0 {
			t.Fatalf("%d members: %v", n, v)
		}
	}
}

// TestEachBrokenInvariantIsReported breaks one thing at a time in a healthy
// observation and expects the invariant about it, with a detail naming it.
func TestEachBrokenInvariantIsReported(t *testing.T) {
	cases := []struct {
		name   string
		spoil  func(o *Observation)
		inv    string
		detail string
	}{
		{"not ready", func(o *Observation) { o.Cluster.Status.Conditions[0].Status = metav1.ConditionFalse }, InvReady, "not Ready"},
		{"old generation", func(o *Observation) { o.Cluster.Generation = 5 }, InvReady, "generation 4"},
		{"too few in status", func(o *Observation) { o.Cluster.Spec.Replicas = ptr.To(int32(5)) }, InvReady, "wants 5"},
		{"a learner in status", func(o *Observation) { o.Cluster.Status.Members[1].Role = v1alpha1.MemberRoleLearner }, InvReady, "c-1"},
		{"silent member", func(o *Observation) { o.Views["c-2"] = EtcdView{Err: "context deadline exceeded"} }, InvAgreement, "c-2 does not answer"},
		{"unasked member", func(o *Observation) { delete(o.Views, "c-2") }, InvAgreement, "c-2 was not asked"},
		{"another leader", func(o *Observation) { v := o.Views["c-1"]; v.Leader = 0x101; o.Views["c-1"] = v }, InvAgreement, "c-1 follows leader"},
		{"no leader", func(o *Observation) { v := o.Views["c-1"]; v.Leader = 0; o.Views["c-1"] = v }, InvAgreement, "c-1 follows no leader"},
		{"another list", func(o *Observation) {
			v := o.Views["c-2"]
			v.Members = append(v.Members, EtcdEntry{Name: "c-9", ID: 0x999})
			o.Views["c-2"] = v
		}, InvAgreement, "c-9"},
		{"another cluster", func(o *Observation) { v := o.Views["c-2"]; v.ClusterID = 0xbb; o.Views["c-2"] = v }, InvAgreement, "cluster 00000000000000bb"},
		{"a learner answers", func(o *Observation) { v := o.Views["c-2"]; v.IsLearner = true; o.Views["c-2"] = v }, InvAgreement, "c-2 is a learner"},
		{"a learner listed", func(o *Observation) {
			for name, v := range o.Views {
				for i := range v.Members {
					if v.Members[i].Name == "c-2" {
						v.Members[i].IsLearner = true
					}
				}
				o.Views[name] = v
			}
		}, InvAgreement, "c-2 as a learner"},
		{"leader unlisted", func(o *Observation) {
			for name, v := range o.Views {
				v.Leader = 0x777
				o.Views[name] = v
			}
		}, InvAgreement, "not in the member list"},
		{"status ID wrong", func(o *Observation) { o.Cluster.Status.Members[1].ID = "0000000000000bad" }, InvStatus, "c-1"},
		{"status name extra", func(o *Observation) {
			o.Cluster.Status.Members[1].Name = "c-x"
		}, InvStatus, "c-x, etcd does not"},
		{"member ID latched wrong", func(o *Observation) { o.Members[2].Status.MemberID = "0000000000000bad" }, InvStatus, "EtcdMember c-2"},
		{"cluster ID wrong", func(o *Observation) { o.Cluster.Status.ClusterID = "00000000000000cc" }, InvStatus, "clusterID"},
		{"fenced behind the Service", func(o *Observation) { o.Members[1].Status.Fenced = "diverged" }, InvService, "c-1, fenced"},
		{"learner behind the Service", func(o *Observation) {
			for name, v := range o.Views {
				for i := range v.Members {
					if v.Members[i].Name == "c-2" {
						v.Members[i].IsLearner = true
					}
				}
				o.Views[name] = v
			}
		}, InvService, "learner c-2"},
		{"a stranger behind the Service", func(o *Observation) {
			o.Slices[0].Endpoints = append(o.Slices[0].Endpoints, discoveryv1.Endpoint{TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "c-gone"}})
		}, InvService, "c-gone"},
		{"a stale Pod", func(o *Observation) {
			o.Pods = append(o.Pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c-old", Labels: v1alpha1.MemberLabels("c", "c-old")}})
		}, InvStale, "Pod c-old"},
		{"a Pod terminating", func(o *Observation) { o.Pods[0].DeletionTimestamp = ptr.To(metav1.Now()) }, InvStale, "Pod c-0 is being deleted"},
		{"a member without a Pod", func(o *Observation) { o.Pods = o.Pods[1:] }, InvStale, "c-0 has 0 Pods"},
		{"a stale claim", func(o *Observation) {
			o.Claims = append(o.Claims, corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-c-old", Labels: v1alpha1.MemberLabels("c", "c-old")}})
		}, InvStale, "claim data-c-old"},
		{"a missing claim", func(o *Observation) { o.Claims = o.Claims[1:] }, InvStale, "c-0 has no claim"},
		{"a claim in a Memory cluster", func(o *Observation) {
			o.Cluster.Spec.Storage.Medium = v1alpha1.StorageMediumMemory
		}, InvStale, "in a Memory cluster"},
		{"a stale ConfigMap", func(o *Observation) {
			o.ConfigMaps = append(o.ConfigMaps, corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c-old-startup", Labels: v1alpha1.MemberLabels("c", "c-old")}})
		}, InvStale, "ConfigMap c-old-startup"},
		{"a member being deleted", func(o *Observation) {
			o.Members = append(o.Members, v1alpha1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "c-old", DeletionTimestamp: ptr.To(metav1.Now())}})
		}, InvStale, "EtcdMember c-old is being deleted"},
		{"a member the status lacks", func(o *Observation) {
			o.Members = append(o.Members, v1alpha1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "c-new"}})
			o.Views["c-new"] = o.Views["c-0"]
		}, InvStale, "EtcdMember c-new is not in the status"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := healthy(3)
			c.spoil(&o)
			got := CheckInvariants(o)
			for _, v := range got {
				if v.Invariant == c.inv && strings.Contains(v.Detail, c.detail) {
					return
				}
			}
			t.Fatalf("want a %s violation mentioning %q, got %v", c.inv, c.detail, got)
		})
	}
}

// TestNotReadyEndpointsAreNotServed: an endpoint the slice marks not ready
// gets no traffic, so a learner there is fine.
func TestNotReadyEndpointsAreNotServed(t *testing.T) {
	o := healthy(3)
	o.Slices[0].Endpoints = append(o.Slices[0].Endpoints, discoveryv1.Endpoint{
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: "c-joining"},
	})
	if v := CheckInvariants(o); len(v) != 0 {
		t.Fatal(v)
	}
}

func TestMemoryClusterWithoutClaims(t *testing.T) {
	o := healthy(3)
	o.Cluster.Spec.Storage.Medium = v1alpha1.StorageMediumMemory
	o.Claims = nil
	if v := CheckInvariants(o); len(v) != 0 {
		t.Fatal(v)
	}
}
