package backup

import (
	"errors"
	"testing"
)

func TestChooseMember(t *testing.T) {
	const cid = 0xc1
	leader := Candidate{Endpoint: "l", ClusterID: cid, Healthy: true, IsLeader: true, Revision: 100}
	f1 := Candidate{Endpoint: "f1", ClusterID: cid, Healthy: true, Revision: 98}
	f2 := Candidate{Endpoint: "f2", ClusterID: cid, Healthy: true, Revision: 99}
	down := Candidate{Endpoint: "down", Err: errors.New("connection refused")}
	sick := Candidate{Endpoint: "sick", ClusterID: cid, Healthy: false, Revision: 200}
	learner := Candidate{Endpoint: "learner", ClusterID: cid, Healthy: true, IsLearner: true, Revision: 300}
	stranger := Candidate{Endpoint: "stranger", ClusterID: 0xbad, Healthy: true, Revision: 400}

	cases := []struct {
		name string
		in   []Candidate
		want string
	}{
		{"a follower over the leader", []Candidate{leader, f1}, "f1"},
		{"the most up-to-date follower", []Candidate{leader, f1, f2}, "f2"},
		{"the leader when no follower is healthy", []Candidate{leader, sick, down}, "l"},
		{"never a learner, a sick member or another cluster's", []Candidate{learner, sick, stranger, f1}, "f1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChooseMember(tc.in, cid)
			if err != nil || got.Endpoint != tc.want {
				t.Fatalf("ChooseMember = %q, %v; want %q", got.Endpoint, err, tc.want)
			}
		})
	}
	if _, err := ChooseMember([]Candidate{down, sick, learner, stranger}, cid); !errors.Is(err, ErrNoHealthyMember) {
		t.Fatalf("err = %v, want ErrNoHealthyMember", err)
	}
	if got, err := ChooseMember([]Candidate{stranger}, 0); err != nil || got.Endpoint != "stranger" {
		t.Fatalf("without an expected cluster ID any cluster's member will do; got %q, %v", got.Endpoint, err)
	}
}
