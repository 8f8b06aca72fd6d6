package etcd_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

func TestParseMemberID(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		{in: "8e9e05c52164694d", want: 0x8e9e05c52164694d},
		{in: "8E9E05C52164694D", want: 0x8e9e05c52164694d},
		{in: "1", want: 1},
		{in: "ffffffffffffffff", want: ^uint64(0)},
		{in: "", wantErr: true},
		{in: "0000000000000000", wantErr: true},
		{in: "0x1", wantErr: true},
		{in: "1ffffffffffffffff", wantErr: true},
		{in: "xyz", wantErr: true},
		{in: "-1", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			g := NewWithT(t)
			got, err := etcd.ParseMemberID(tc.in)
			if tc.wantErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestIDStringRoundTrip(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	for _, id := range []uint64{1, 0xabc, 0x8e9e05c52164694d, ^uint64(0)} {
		s := etcd.Member{ID: id}.IDString()
		g.Expect(s).To(HaveLen(16))
		back, err := etcd.ParseMemberID(s)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(back).To(Equal(id))
	}
	g.Expect(etcd.Member{ID: 0xabc}.IDString()).To(Equal("0000000000000abc"))
}

func TestHealthyDespiteNoSpace(t *testing.T) {
	g := NewWithT(t)
	noSpace := []etcd.Alarm{{MemberID: 1, Type: etcd.AlarmNoSpace}, {MemberID: 2, Type: etcd.AlarmNoSpace}}
	corrupt := []etcd.Alarm{{MemberID: 1, Type: etcd.AlarmCorrupt}}
	two := []string{"memberID:1 alarm:NOSPACE", "memberID:2 alarm:NOSPACE"}
	cases := []struct {
		name   string
		st     etcd.EndpointStatus
		alarms []etcd.Alarm
		want   bool
	}{
		{"healthy", etcd.EndpointStatus{LeaderID: 1}, nil, true},
		{"no leader", etcd.EndpointStatus{Errors: []string{"etcdserver: no leader"}}, nil, false},
		{"NOSPACE alarms only", etcd.EndpointStatus{LeaderID: 1, Errors: two}, noSpace, true},
		{"NOSPACE and no leader", etcd.EndpointStatus{Errors: append([]string{"etcdserver: no leader"}, two...)}, noSpace, false},
		{"more errors than alarms", etcd.EndpointStatus{LeaderID: 1, Errors: append([]string{"something else"}, two...)}, noSpace, false},
		{"alarms not known", etcd.EndpointStatus{LeaderID: 1, Errors: two}, nil, false},
		{"a CORRUPT alarm counts", etcd.EndpointStatus{LeaderID: 1, Errors: []string{"memberID:1 alarm:CORRUPT"}}, corrupt, false},
	}
	for _, tc := range cases {
		g.Expect(tc.st.HealthyDespiteNoSpace(tc.alarms)).To(Equal(tc.want), tc.name)
	}
}

func TestHighestTerm(t *testing.T) {
	t.Parallel()
	st := func(member, leader, term uint64) etcd.EndpointStatus {
		return etcd.EndpointStatus{MemberID: member, LeaderID: leader, RaftTerm: term}
	}
	cases := []struct {
		name     string
		statuses []etcd.EndpointStatus
		want     int
	}{
		{"none", nil, -1},
		{"no member knows a leader", []etcd.EndpointStatus{st(1, 0, 5), st(2, 0, 7)}, -1},
		{"the higher term wins over a stale leader", []etcd.EndpointStatus{st(1, 1, 3), st(2, 3, 4), st(3, 3, 4)}, 1},
		{"a member without a leader is passed over even in a higher term", []etcd.EndpointStatus{st(1, 2, 3), st(2, 0, 9)}, 0},
		{"of equal terms the first", []etcd.EndpointStatus{st(1, 2, 4), st(2, 3, 4)}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(etcd.HighestTerm(tc.statuses)).To(Equal(tc.want))
		})
	}
}
