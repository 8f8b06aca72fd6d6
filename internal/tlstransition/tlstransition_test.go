package tlstransition_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	tt "github.com/quorumctl/etcd-operator/internal/tlstransition"
)

// at is a settled member of the pass.
func at(name string, p tt.Pass) tt.Member {
	return tt.Member{Name: name, Spec: p, Running: p, Up: true, Ready: true, PeerHTTPS: p == tt.TLS}
}

func three(a, b, c tt.Pass) []tt.Member { return []tt.Member{at("m0", a), at("m1", b), at("m2", c)} }

func with(ms []tt.Member, i int, f func(*tt.Member)) []tt.Member {
	out := append([]tt.Member(nil), ms...)
	f(&out[i])
	return out
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   tt.Input
		want tt.Decision
	}{
		{"a plaintext cluster begins with the first member",
			tt.Input{Members: three(tt.Plain, tt.Plain, tt.Plain)},
			tt.Decision{Action: tt.ToBoth, Member: "m0", Phase: tt.PhaseAddingTLS}},
		{"one member at a time: the next once the first is back",
			tt.Input{Members: three(tt.Both, tt.Plain, tt.Plain)},
			tt.Decision{Action: tt.ToBoth, Member: "m1", Phase: tt.PhaseAddingTLS}},
		{"a member restarting holds the next",
			tt.Input{Members: with(three(tt.Both, tt.Plain, tt.Plain), 0, func(m *tt.Member) { m.Running = tt.Plain })},
			tt.Decision{Action: tt.Wait, Wait: tt.ReasonRestarting, Member: "m0", Phase: tt.PhaseAddingTLS}},
		{"a member back but not ready holds the next",
			tt.Input{Members: with(three(tt.Both, tt.Plain, tt.Plain), 0, func(m *tt.Member) { m.Ready = false })},
			tt.Decision{Action: tt.Wait, Wait: tt.ReasonRestarting, Member: "m0", Phase: tt.PhaseAddingTLS}},
		{"the pause holds the first pass between members",
			tt.Input{Members: three(tt.Both, tt.Plain, tt.Plain), Paused: true},
			tt.Decision{Action: tt.Wait, Wait: tt.ReasonPaused, Member: "m1", Phase: tt.PhaseAddingTLS}},
		{"every member serves both: the operator and the connection info move to https",
			tt.Input{Members: three(tt.Both, tt.Both, tt.Both)},
			tt.Decision{Action: tt.SwitchClients, Phase: tt.PhaseClientsMaySwitch}},
		{"clients moved by the operator, plaintext not released: wait for the user",
			tt.Input{Members: three(tt.Both, tt.Both, tt.Both), ClientsOnTLS: true},
			tt.Decision{Action: tt.Wait, Wait: tt.ReasonPlaintextInUse, Phase: tt.PhaseClientsMaySwitch}},
		{"released: the second pass begins with the first member",
			tt.Input{Members: three(tt.Both, tt.Both, tt.Both), ClientsOnTLS: true, PlaintextReleased: true},
			tt.Decision{Action: tt.ToTLS, Member: "m0", Phase: tt.PhaseRefusingPlaintext}},
		{"the pause holds the second pass",
			tt.Input{Members: three(tt.Both, tt.Both, tt.Both), ClientsOnTLS: true, PlaintextReleased: true, Paused: true},
			tt.Decision{Action: tt.Wait, Wait: tt.ReasonPaused, Member: "m0", Phase: tt.PhaseClientsMaySwitch}},
		{"a member stopped for the second pass has its peer URL moved while it is down",
			tt.Input{Members: with(three(tt.TLS, tt.Both, tt.Both), 0, func(m *tt.Member) { m.Up, m.Ready, m.Running, m.PeerHTTPS = false, false, tt.Both, false }),
				ClientsOnTLS: true, PlaintextReleased: true},
			tt.Decision{Action: tt.UpdatePeerURL, Member: "m0", Phase: tt.PhaseRefusingPlaintext}},
		{"not while another member is out: the quorum would rest on one",
			tt.Input{Members: with(with(three(tt.TLS, tt.Both, tt.Both), 0, func(m *tt.Member) { m.Up, m.Ready, m.PeerHTTPS = false, false, false }), 1, func(m *tt.Member) { m.Ready = false }),
				ClientsOnTLS: true, PlaintextReleased: true},
			tt.Decision{Action: tt.Wait, Wait: tt.ReasonQuorum, Member: "m0", Phase: tt.PhaseRefusingPlaintext}},
		{"still running the first pass's flags: wait for the rollout to stop it",
			tt.Input{Members: with(three(tt.TLS, tt.Both, tt.Both), 0, func(m *tt.Member) { m.Running, m.PeerHTTPS = tt.Both, false }),
				ClientsOnTLS: true, PlaintextReleased: true},
			tt.Decision{Action: tt.Wait, Wait: tt.ReasonRestarting, Member: "m0", Phase: tt.PhaseRefusingPlaintext}},
		{"started on https before its URL moved (an operator restart between): move it now",
			tt.Input{Members: with(three(tt.TLS, tt.Both, tt.Both), 0, func(m *tt.Member) { m.PeerHTTPS = false }),
				ClientsOnTLS: true, PlaintextReleased: true},
			tt.Decision{Action: tt.UpdatePeerURL, Member: "m0", Phase: tt.PhaseRefusingPlaintext}},
		{"URL moved, restart under way",
			tt.Input{Members: with(three(tt.TLS, tt.Both, tt.Both), 0, func(m *tt.Member) { m.Up, m.Ready, m.Running = false, false, tt.Both }),
				ClientsOnTLS: true, PlaintextReleased: true},
			tt.Decision{Action: tt.Wait, Wait: tt.ReasonRestarting, Member: "m0", Phase: tt.PhaseRefusingPlaintext}},
		{"the next member once the first runs TLS",
			tt.Input{Members: three(tt.TLS, tt.Both, tt.Both), ClientsOnTLS: true, PlaintextReleased: true},
			tt.Decision{Action: tt.ToTLS, Member: "m1", Phase: tt.PhaseRefusingPlaintext}},
		{"done: every member on tt.TLS with an https peer URL",
			tt.Input{Members: three(tt.TLS, tt.TLS, tt.TLS), ClientsOnTLS: true, PlaintextReleased: true},
			tt.Decision{Action: tt.Done}},
		{"a cluster created with tt.TLS is done",
			tt.Input{Members: three(tt.TLS, tt.TLS, tt.TLS), ClientsOnTLS: true},
			tt.Decision{Action: tt.Done}},
		{"a member known by https while it listens on http is not settled",
			tt.Input{Members: with(three(tt.Both, tt.Both, tt.Both), 2, func(m *tt.Member) { m.PeerHTTPS = true })},
			tt.Decision{Action: tt.Wait, Wait: tt.ReasonRestarting, Member: "m2", Phase: tt.PhaseAddingTLS}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tt.Decide(tc.in); got != tc.want {
				t.Errorf("Decide() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSpecPass(t *testing.T) {
	tlsShape := &v1alpha1.MemberTLS{Peer: &v1alpha1.MemberTLSEndpoint{TrustBundle: "p"}, Client: &v1alpha1.MemberTLSEndpoint{TrustBundle: "c"}}
	member := func(peer, client string, shape *v1alpha1.MemberTLS) *v1alpha1.EtcdMember {
		return &v1alpha1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "m0"}, Spec: v1alpha1.EtcdMemberSpec{PeerURL: peer, ClientURL: client, TLS: shape}}
	}
	for _, tc := range []struct {
		name string
		m    *v1alpha1.EtcdMember
		want tt.Pass
	}{
		{"no TLS", member("http://m0:2380", "http://m0:2379", nil), tt.Plain},
		{"an empty tt.TLS shape", member("http://m0:2380", "http://m0:2379", &v1alpha1.MemberTLS{}), tt.Plain},
		{"TLS with http URLs", member("http://m0:2380", "http://m0:2379", tlsShape), tt.Both},
		{"TLS with an http peer URL alone", member("http://m0:2380", "https://m0:2379", tlsShape), tt.Both},
		{"TLS with https URLs", member("https://m0:2380", "https://m0:2379", tlsShape), tt.TLS},
		{"TLS with no URL recorded", member("", "", tlsShape), tt.TLS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tt.SpecPass(tc.m); got != tc.want {
				t.Errorf("SpecPass() = %s, want %s", got, tc.want)
			}
		})
	}
}
