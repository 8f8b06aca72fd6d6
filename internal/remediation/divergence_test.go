package remediation

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

func TestQuorumLeader(t *testing.T) {
	g := NewWithT(t)
	st := []etcd.EndpointStatus{
		{MemberID: 1, LeaderID: 1, RaftTerm: 4},
		{MemberID: 2, LeaderID: 1, RaftTerm: 4},
		{MemberID: 3, LeaderID: 3, RaftTerm: 2},
	}
	id, term := QuorumLeader(3, st)
	g.Expect(id).To(BeEquivalentTo(1))
	g.Expect(term).To(BeEquivalentTo(4))
	id, _ = QuorumLeader(5, st)
	g.Expect(id).To(BeZero(), "two of five is no majority")
}

func TestDivergence(t *testing.T) {
	q := QuorumView{ClusterID: 9, Members: []uint64{1, 2, 3}, LeaderID: 1, LeaderTerm: 4}
	list := func(ids ...uint64) *etcd.MemberList {
		l := &etcd.MemberList{ClusterID: 9}
		for _, id := range ids {
			l.Members = append(l.Members, etcd.Member{ID: id})
		}
		return l
	}
	cases := []struct {
		name   string
		q      QuorumView
		status *etcd.EndpointStatus
		own    *etcd.MemberList
		diverg bool
	}{
		{"agrees", q, &etcd.EndpointStatus{MemberID: 2, LeaderID: 1, RaftTerm: 4, ClusterID: 9}, list(3, 2, 1), false},
		{"leader of a one-member cluster", q, &etcd.EndpointStatus{MemberID: 3, LeaderID: 3, RaftTerm: 2, ClusterID: 9}, list(3), true},
		{"member list differs", q, &etcd.EndpointStatus{MemberID: 2, LeaderID: 1, RaftTerm: 4, ClusterID: 9}, list(1, 2), true},
		{"behind on another leader", q, &etcd.EndpointStatus{MemberID: 2, LeaderID: 3, RaftTerm: 2, ClusterID: 9}, nil, true},
		{"other cluster", q, &etcd.EndpointStatus{MemberID: 2, LeaderID: 1, RaftTerm: 4, ClusterID: 8}, nil, true},
		{"just elected, ahead of what we saw", q, &etcd.EndpointStatus{MemberID: 2, LeaderID: 3, RaftTerm: 5, ClusterID: 9}, nil, false},
		{"no quorum leader to compare with", QuorumView{Members: []uint64{1, 2, 3}}, &etcd.EndpointStatus{MemberID: 3, LeaderID: 3}, list(3), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Divergence(tc.q, tc.status, tc.own)
			NewWithT(t).Expect(got != "").To(Equal(tc.diverg), got)
		})
	}
}
