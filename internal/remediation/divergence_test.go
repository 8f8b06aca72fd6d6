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
		sure   bool
	}{
		{"agrees", q, &etcd.EndpointStatus{MemberID: 2, LeaderID: 1, RaftTerm: 4, ClusterID: 9}, list(3, 2, 1), false, false},
		{"leader of a one-member cluster", q, &etcd.EndpointStatus{MemberID: 3, LeaderID: 3, RaftTerm: 2, ClusterID: 9}, list(3), true, true},
		{"leader, member list not read", q, &etcd.EndpointStatus{MemberID: 3, LeaderID: 3, RaftTerm: 2, ClusterID: 9}, nil, true, false},
		{"old leader not yet stepped down", q, &etcd.EndpointStatus{MemberID: 3, LeaderID: 3, RaftTerm: 3, ClusterID: 9}, list(1, 2, 3), true, false},
		{"member list differs", q, &etcd.EndpointStatus{MemberID: 2, LeaderID: 1, RaftTerm: 4, ClusterID: 9}, list(1, 2), true, false},
		{"behind on another leader", q, &etcd.EndpointStatus{MemberID: 2, LeaderID: 3, RaftTerm: 2, ClusterID: 9}, nil, true, false},
		{"other cluster", q, &etcd.EndpointStatus{MemberID: 2, LeaderID: 1, RaftTerm: 4, ClusterID: 8}, nil, true, true},
		{"just elected, ahead of what we saw", q, &etcd.EndpointStatus{MemberID: 2, LeaderID: 3, RaftTerm: 5, ClusterID: 9}, nil, false, false},
		{"no quorum leader to compare with", QuorumView{Members: []uint64{1, 2, 3}}, &etcd.EndpointStatus{MemberID: 3, LeaderID: 3}, list(3), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Divergence(tc.q, tc.status, tc.own)
			g := NewWithT(t)
			g.Expect(got.Diverged()).To(Equal(tc.diverg), got.Detail)
			g.Expect(got.Definitive).To(Equal(tc.sure), got.Detail)
		})
	}
}
