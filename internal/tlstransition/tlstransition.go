package tlstransition

import (
	"strings"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// Pass is where a member stands in the transition.
type Pass int

const (
	// Plain: no TLS.
	Plain Pass = iota
	// Both: peer TLS material with an http peer listener and URL; TLS and
	// plaintext on the client port.
	Both
	// TLS: https peer and client URLs and listeners only.
	TLS
)

func (p Pass) String() string {
	switch p {
	case Plain:
		return "Plain"
	case Both:
		return "Both"
	default:
		return "TLS"
	}
}

// SpecPass is the pass a member's spec asks for: no TLS is Plain; TLS with
// an http recorded peer or client URL is Both (internal/component/pod then
// renders an http peer listener and both client listeners); TLS with https
// URLs, or with none recorded (a member created with TLS), is TLS.
func SpecPass(m *v1alpha1.EtcdMember) Pass {
	if t := m.Spec.TLS; t == nil || (t.Peer == nil && t.Client == nil) {
		return Plain
	}
	if strings.HasPrefix(m.Spec.PeerURL, "http://") || strings.HasPrefix(m.Spec.ClientURL, "http://") {
		return Both
	}
	return TLS
}

// Member is what a pass observed of one member.
type Member struct {
	Name string
	// Spec is the pass the member's spec asks for (SpecPass).
	Spec Pass
	// Running is the pass its etcd process was started with (its Pod was
	// built from a spec of that pass); meaningful only when Up.
	Running Pass
	// Up: the member has a running etcd process (a Pod).
	Up bool
	// Ready: the member serves clients (healthy, behind the client
	// Service).
	Ready bool
	// PeerHTTPS: the member's peer URL in etcd's member list is https.
	PeerHTTPS bool
}

// settled: the member runs what its spec asks for, serves, and etcd knows
// it by a peer URL of the scheme it listens on.
func (m Member) settled() bool {
	return m.Up && m.Ready && m.Running == m.Spec && m.PeerHTTPS == (m.Running == TLS)
}

// Input is what a pass observed of the cluster.
type Input struct {
	// Members in the rollout's order (the leader last).
	Members []Member
	// ClientsOnTLS: the operator dials https and the connection info it
	// publishes (the client Service's port name, status) says https.
	ClientsOnTLS bool
	// PlaintextReleased: the user has said their clients no longer use
	// plaintext, which the second pass takes away.
	PlaintextReleased bool
	// Paused: spec.rollout.paused is set.
	Paused bool
}

// Action is what the pass does.
type Action string

const (
	// Wait: nothing to do now; Decision.Wait says why.
	Wait Action = "Wait"
	// ToBoth: set the member's spec to Both; the rollout restarts it.
	ToBoth Action = "ToBoth"
	// SwitchClients: move the operator's client and the published
	// connection info to https.
	SwitchClients Action = "SwitchClients"
	// ToTLS: set the member's spec to TLS (https URLs); the rollout drains
	// and stops it.
	ToTLS Action = "ToTLS"
	// UpdatePeerURL: MemberUpdate the member's peer URL to https before its
	// Pod is created again.
	UpdatePeerURL Action = "UpdatePeerURL"
	// Done: every member runs TLS and is known by an https peer URL.
	Done Action = "Done"
)

// Reason says what a Wait waits for.
type Reason string

const (
	ReasonNone Reason = ""
	// ReasonRestarting: a member is not (yet) running its spec's pass, or
	// not ready.
	ReasonRestarting Reason = "Restarting"
	// ReasonPlaintextInUse: every member serves https and the operator uses
	// it; the second pass waits for the user to release plaintext.
	ReasonPlaintextInUse Reason = "PlaintextInUse"
	// ReasonPaused: spec.rollout.paused holds the next restart.
	ReasonPaused Reason = "Paused"
	// ReasonQuorum: a member's peer URL must change while it is down, and
	// another member does not serve, so the change could cost the quorum.
	ReasonQuorum Reason = "Quorum"
)

// Phase is the transition's phase, for the status: clients read it to
// know when to move to https (ClientsMaySwitch) and when plaintext is gone
// (RefusingPlaintext, then "" once Done).
type Phase string

const (
	PhaseNone Phase = ""
	// PhaseAddingTLS: members restart onto TLS beside plaintext.
	PhaseAddingTLS Phase = "AddingTLS"
	// PhaseClientsMaySwitch: every member serves https; clients should move
	// to it now, plaintext still works.
	PhaseClientsMaySwitch Phase = "ClientsMaySwitch"
	// PhaseRefusingPlaintext: members restart onto TLS alone.
	PhaseRefusingPlaintext Phase = "RefusingPlaintext"
)

// Decision is the next step.
type Decision struct {
	Action Action
	// Member is the member ToBoth, ToTLS and UpdatePeerURL act on, or the
	// one a Wait waits for.
	Member string
	Wait   Reason
	Phase  Phase
}

// Decide takes one step from a settled cluster, or the one step that is
// safe while a member is between passes: its peer URL, moved while it is
// down. One member changes at a time, each only once every other member
// runs its spec and serves, so the transition never takes more than one
// member out of the quorum and a member that does not come back holds it.
func Decide(in Input) Decision {
	phase := phaseOf(in)
	for i, m := range in.Members {
		if m.settled() {
			continue
		}
		if m.Spec == TLS && !m.PeerHTTPS && (!m.Up || m.Running == TLS) {
			// Down, or up with an https-only peer listener its peers
			// cannot reach at the http URL: the URL moves now. Asked of
			// the others, who must hold the quorum without it.
			if !othersSettled(in.Members, i) {
				return Decision{Action: Wait, Wait: ReasonQuorum, Member: m.Name, Phase: phase}
			}
			return Decision{Action: UpdatePeerURL, Member: m.Name, Phase: phase}
		}
		return Decision{Action: Wait, Wait: ReasonRestarting, Member: m.Name, Phase: phase}
	}
	// Every member is settled.
	for _, m := range in.Members {
		if m.Spec == Plain {
			if in.Paused {
				return Decision{Action: Wait, Wait: ReasonPaused, Member: m.Name, Phase: phase}
			}
			return Decision{Action: ToBoth, Member: m.Name, Phase: phase}
		}
	}
	for _, m := range in.Members {
		if m.Spec != Both {
			continue
		}
		switch {
		case !in.ClientsOnTLS:
			return Decision{Action: SwitchClients, Phase: PhaseClientsMaySwitch}
		case !in.PlaintextReleased:
			return Decision{Action: Wait, Wait: ReasonPlaintextInUse, Phase: phase}
		case in.Paused:
			return Decision{Action: Wait, Wait: ReasonPaused, Member: m.Name, Phase: phase}
		}
		return Decision{Action: ToTLS, Member: m.Name, Phase: PhaseRefusingPlaintext}
	}
	return Decision{Action: Done}
}

// phaseOf is the phase the members' specs show.
func phaseOf(in Input) Phase {
	plain, both, tls := 0, 0, 0
	for _, m := range in.Members {
		switch m.Spec {
		case Plain:
			plain++
		case Both:
			both++
		default:
			tls++
		}
	}
	switch {
	case tls > 0 && (both > 0 || !allPeersHTTPS(in.Members) || !allSettled(in.Members)):
		return PhaseRefusingPlaintext
	case tls > 0:
		return PhaseNone
	case plain > 0 || !allSettled(in.Members) || !in.ClientsOnTLS:
		return PhaseAddingTLS
	default:
		return PhaseClientsMaySwitch
	}
}

func othersSettled(ms []Member, skip int) bool {
	for j, o := range ms {
		if j != skip && !o.settled() {
			return false
		}
	}
	return true
}

func allSettled(ms []Member) bool { return othersSettled(ms, -1) }

func allPeersHTTPS(ms []Member) bool {
	for _, m := range ms {
		if !m.PeerHTTPS {
			return false
		}
	}
	return true
}
