package chaos

import (
	"fmt"
	"strings"
	"time"
)

// LossReason is the reason the operator gives when it replaces a member
// because etcd refused to start on an empty data dir: the loud failure a
// member that lost its data must go through (docs/design/0003-self-heal.md).
const LossReason = "DataDirLost"

// RemediationEvent is what the runner reads of one of the operator's Warning
// Events about a cluster: the action (ReplaceMember, FenceMember), the
// reason, the note, which names the member first, and when it was last
// observed.
type RemediationEvent struct {
	Action, Reason, Note string
	At                   time.Time
}

// CheckLossReplaced decides, from the operator's Events, how the victim of
// a fault that took its data away under its own name and peer URL was
// healed. The only right way is a replacement for LossReason: any other
// reason, or a fence, means the empty member ran long enough to be judged by
// something other than its refusal to start. done is false while no Event
// names the member yet.
//
// Only Events observed since the fault count: an earlier fault may have
// fenced the same member for a moment (a paused leader that, resumed, still
// calls itself leader for one look), which says nothing of how its data
// loss was handled.
func CheckLossReplaced(member string, since time.Time, events []RemediationEvent) (reason string, done bool, v *Violation) {
	for _, e := range events {
		if e.At.Before(since) {
			continue
		}
		var action string
		switch {
		case strings.HasPrefix(e.Note, "Replacing member "+member+": "):
			action = "replaced"
		case strings.HasPrefix(e.Note, "Fencing member "+member+": "):
			action = "fenced"
		default:
			continue
		}
		if action == "fenced" || e.Reason != LossReason {
			return e.Reason, true, &Violation{Invariant: InvRecovered, Detail: fmt.Sprintf(
				"%s lost its data under its own name and was %s for %s, not %s: %s", member, action, e.Reason, LossReason, e.Note)}
		}
		reason, done = e.Reason, true
	}
	return reason, done, nil
}
