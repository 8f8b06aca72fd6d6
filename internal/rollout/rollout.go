package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// DefaultAppliedWindow is how far, in raft entries, a member's applied index
// may trail the leader's for it to count as caught up.
const DefaultAppliedWindow = 1000

// DefaultDownAfter is how long the kubelet must have reported a member not
// ready before the rollout restarts it out of turn. Shorter than that, the
// member may be restarting anyway (for a reason of its own, or a probe that
// failed once under load), and restarting it again gains nothing.
const DefaultDownAfter = 30 * time.Second

// Member is what a pass observed of one counted member.
type Member struct {
	Name string
	// Outdated: its template differs from the target.
	Outdated bool
	// Replace: the difference cannot be applied in place (a Memory member,
	// a new storage class, a volume that cannot grow), so it is replaced
	// rather than restarted.
	Replace bool
	// Expand: its volume must grow to the target size first, which its
	// StorageClass does online; it restarts on the grown volume after.
	Expand bool
	// Resizing: its volume has been asked to grow and has not yet.
	Resizing bool
	// Voter, Leader: its place in etcd's membership.
	Voter  bool
	Leader bool
	// Healthy: its Pod is ready and its endpoint answers, following the
	// quorum's leader. It is one look: a single Status call that timed out
	// on a loaded node makes a serving member look unhealthy, so a member
	// that is not Healthy is waited for, never taken for down.
	Healthy bool
	// DownFor is how long the kubelet has reported the member's Pod not
	// ready (its own probe, not the operator's look); zero while it is ready.
	DownFor time.Duration
	// Applied is its raft applied index, when it answered.
	Applied uint64
}

// Action is the kind of step.
type Action string

const (
	// None: no member is outdated.
	None Action = "None"
	// Wait: a step is due but the gate is closed; Reason says why.
	Wait Action = "Wait"
	// MoveLeader: hand leadership from Member to To before updating it.
	MoveLeader Action = "MoveLeader"
	// Restart: give Member the target template; its Pod is re-created on
	// its own volume.
	Restart Action = "Restart"
	// Replace: add a member with the target template to take Member's
	// place; Member is retired once the new one is a healthy voter.
	Replace Action = "Replace"
	// ExpandVolume: ask for Member's volume to grow to the target size,
	// online; the member keeps running, and is restarted once it has grown.
	ExpandVolume Action = "ExpandVolume"
)

// Decision is the rollout's next step.
type Decision struct {
	Action Action
	Member string
	To     string
	Reason string
}

// Options tune the decision.
type Options struct {
	// Paused holds the rollout between members.
	Paused bool
	// Settling: a membership change is in flight (a learner, a member
	// being added, replaced or removed), which the rollout waits out.
	Settling string
	// Restarting names members the rollout restarted that are not healthy
	// voters on their new template yet. Nothing else restarts until they
	// are: the gate's look at them may predate their restart.
	Restarting []string
	// AppliedWindow is DefaultAppliedWindow when zero.
	AppliedWindow uint64
	// DownAfter is DefaultDownAfter when zero.
	DownAfter time.Duration
}

// Next decides the step of this pass.
//
// The rollout never makes a second member unavailable while another is:
// every restart but one waits on the gate (every voter healthy, a leader
// known, everyone caught up) and on the members it restarted before being
// back. The one exception is a member the kubelet has reported down for
// DownAfter, or one the rollout restarted that is not back, which costs
// nothing to restart, and may be down for want of what the new template
// gives it (memory, say): it goes out of turn, but only while every other
// voter passes the gate, so a member that merely failed the operator's look
// is never counted as one that is down.
func Next(members []Member, o Options) Decision {
	window := o.AppliedWindow
	if window == 0 {
		window = DefaultAppliedWindow
	}
	downAfter := o.DownAfter
	if downAfter == 0 {
		downAfter = DefaultDownAfter
	}
	var outdated []Member
	for _, m := range members {
		if m.Outdated {
			outdated = append(outdated, m)
		}
	}
	if len(outdated) == 0 {
		return Decision{Action: None}
	}
	if o.Paused {
		return wait("paused by spec.rollout.paused with %d of %d members updated", len(members)-len(outdated), len(members))
	}
	if o.Settling != "" {
		return wait("waiting for %s", o.Settling)
	}
	for _, m := range order(outdated) {
		// A member the rollout restarted and that is not back is out of
		// service by the rollout's own doing: taking it to the newer target
		// at once makes nobody else unavailable.
		down := !m.Healthy && m.DownFor >= downAfter || slices.Contains(o.Restarting, m.Name)
		if !down || m.Leader || m.Replace {
			continue
		}
		if d, ok := gate(members, window, m.Name); !ok {
			return d
		}
		switch {
		case m.Expand:
			return Decision{Action: ExpandVolume, Member: m.Name}
		case m.Resizing:
			return wait("waiting for the volume of %s to grow", m.Name)
		}
		return Decision{Action: Restart, Member: m.Name}
	}
	if len(o.Restarting) > 0 {
		return wait("waiting for %s, restarted by the rollout, to be a healthy voter again", strings.Join(o.Restarting, ", "))
	}
	if d, ok := gate(members, window, ""); !ok {
		return d
	}
	// One volume grows at a time, like everything else here.
	for _, m := range order(outdated) {
		if m.Resizing {
			return wait("waiting for the volume of %s to grow", m.Name)
		}
	}
	next := order(outdated)[0]
	switch {
	case next.Replace:
		// The leader is replaced last like any other; handing leadership
		// over happens when it is retired, once its replacement votes.
		return Decision{Action: Replace, Member: next.Name}
	case next.Expand:
		// Growing a volume online disturbs nobody, the leader included.
		return Decision{Action: ExpandVolume, Member: next.Name}
	}
	if next.Leader && len(members) > 1 {
		if to, ok := bestUpdated(members); ok {
			return Decision{Action: MoveLeader, Member: next.Name, To: to}
		}
		if to, ok := bestFollower(members); ok {
			return Decision{Action: MoveLeader, Member: next.Name, To: to}
		}
		return wait("no healthy voter can take leadership from %s", next.Name)
	}
	return Decision{Action: Restart, Member: next.Name}
}

// gate: every voter but except is healthy, one of them leads, and each is
// within the window of the leader's applied index.
func gate(members []Member, window uint64, except string) (Decision, bool) {
	var leader *Member
	var down []string
	for i := range members {
		m := &members[i]
		if m.Name == except {
			continue
		}
		if m.Leader {
			leader = m
		}
		if m.Voter && !m.Healthy {
			down = append(down, m.Name)
		}
	}
	if len(down) > 0 {
		return wait("waiting for %s to be healthy", strings.Join(down, ", ")), false
	}
	if leader == nil {
		return wait("waiting for a leader"), false
	}
	for _, m := range members {
		if m.Name != except && m.Voter && m.Applied+window < leader.Applied {
			return wait("waiting for %s to catch up (applied index %d, the leader's %d)", m.Name, m.Applied, leader.Applied), false
		}
	}
	return Decision{}, true
}

// order puts followers first, by name, and the leader last.
func order(ms []Member) []Member {
	out := slices.Clone(ms)
	slices.SortFunc(out, func(a, b Member) int {
		if a.Leader != b.Leader {
			if a.Leader {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// bestUpdated is the healthy updated voter furthest ahead.
func bestUpdated(members []Member) (string, bool) {
	return best(members, func(m Member) bool { return !m.Outdated })
}

// bestFollower is the healthy follower furthest ahead, for a cluster none of
// whose other members is updated yet (a single outdated leader among
// members a surge did not touch).
func bestFollower(members []Member) (string, bool) {
	return best(members, func(Member) bool { return true })
}

func best(members []Member, ok func(Member) bool) (string, bool) {
	var name string
	var applied uint64
	for _, m := range members {
		if m.Leader || !m.Voter || !m.Healthy || !ok(m) {
			continue
		}
		if name == "" || m.Applied > applied {
			name, applied = m.Name, m.Applied
		}
	}
	return name, name != ""
}

func wait(format string, args ...any) Decision {
	return Decision{Action: Wait, Reason: fmt.Sprintf(format, args...)}
}
