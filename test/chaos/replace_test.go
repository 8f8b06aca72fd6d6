package chaos

import (
	"testing"
	"time"
)

func TestCheckLossReplaced(t *testing.T) {
	fault := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	after := fault.Add(time.Second)
	lost := RemediationEvent{Action: "ReplaceMember", Reason: LossReason, Note: "Replacing member c-ab: etcd exited with code 1: cannot fetch cluster info from peer urls", At: after}
	other := RemediationEvent{Action: "ReplaceMember", Reason: "DataCorrupt", Note: "Replacing member c-xy: etcd exited with code 1: wal: crc mismatch", At: after}
	earlierFence := RemediationEvent{Action: "FenceMember", Reason: "Diverged", Note: "Fencing member c-ab: it reports itself leader while the quorum follows 870f58fbd41ee733",
		At: fault.Add(-20 * time.Second)}
	for _, c := range []struct {
		name      string
		events    []RemediationEvent
		done, bad bool
	}{
		{"no Event yet", nil, false, false},
		{"another member's Event", []RemediationEvent{other}, false, false},
		{"a member whose name starts the same", []RemediationEvent{{Reason: "Unresponsive", Note: "Replacing member c-abc: silent", At: after}}, false, false},
		{"replaced for its lost data", []RemediationEvent{other, lost}, true, false},
		{"replaced for its lost data, twice", []RemediationEvent{lost, lost}, true, false},
		{"replaced as unresponsive", []RemediationEvent{{Reason: "Unresponsive", Note: "Replacing member c-ab: running but not ready for 31s", At: after}}, true, true},
		{"fenced", []RemediationEvent{{Action: "FenceMember", Reason: "Diverged", Note: "Fencing member c-ab: it names another leader", At: after}, lost}, true, true},
		{"fenced by an earlier fault, then replaced for its lost data", []RemediationEvent{earlierFence, lost}, true, false},
		{"only fenced by an earlier fault", []RemediationEvent{earlierFence}, false, false},
		{"replaced as unresponsive after an earlier fault", []RemediationEvent{{Reason: "Unresponsive", Note: "Replacing member c-ab: silent", At: fault.Add(-time.Minute)}}, false, false},
	} {
		reason, done, v := CheckLossReplaced("c-ab", fault, c.events)
		if done != c.done || (v != nil) != c.bad {
			t.Errorf("%s: reason %q, done %t, violation %v", c.name, reason, done, v)
		}
		if v != nil && v.Invariant != InvRecovered {
			t.Errorf("%s: %v", c.name, v)
		}
	}
}
