package chaos

import "testing"

func TestCheckLossReplaced(t *testing.T) {
	lost := RemediationEvent{Action: "ReplaceMember", Reason: LossReason, Note: "Replacing member c-ab: etcd exited with code 1: cannot fetch cluster info from peer urls"}
	other := RemediationEvent{Action: "ReplaceMember", Reason: "DataCorrupt", Note: "Replacing member c-xy: etcd exited with code 1: wal: crc mismatch"}
	for _, c := range []struct {
		name      string
		events    []RemediationEvent
		done, bad bool
	}{
		{"no Event yet", nil, false, false},
		{"another member's Event", []RemediationEvent{other}, false, false},
		{"a member whose name starts the same", []RemediationEvent{{Reason: "Unresponsive", Note: "Replacing member c-abc: silent"}}, false, false},
		{"replaced for its lost data", []RemediationEvent{other, lost}, true, false},
		{"replaced for its lost data, twice", []RemediationEvent{lost, lost}, true, false},
		{"replaced as unresponsive", []RemediationEvent{{Reason: "Unresponsive", Note: "Replacing member c-ab: running but not ready for 31s"}}, true, true},
		{"fenced", []RemediationEvent{{Action: "FenceMember", Reason: "Diverged", Note: "Fencing member c-ab: it names another leader"}, lost}, true, true},
	} {
		reason, done, v := CheckLossReplaced("c-ab", c.events)
		if done != c.done || (v != nil) != c.bad {
			t.Errorf("%s: reason %q, done %t, violation %v", c.name, reason, done, v)
		}
		if v != nil && v.Invariant != InvRecovered {
			t.Errorf("%s: %v", c.name, v)
		}
	}
}
