package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/quorumctl/etcd-operator/test/linearizability"
)

func TestHealed(t *testing.T) {
	before := MemberState{Name: "m", Exists: true, PodExists: true, PodUID: "u1", EtcdReady: true, Restarts: 2}
	gone := MemberState{Name: "m"}
	down := before
	down.EtcdReady = false
	restarted := before
	restarted.Restarts = 3
	newPod := before
	newPod.PodUID = "u2"
	deleting := restarted
	deleting.PodDeleting = true
	for _, c := range []struct {
		name      string
		r         Recovery
		now       MemberState
		healed    bool
		violation bool
	}{
		{"replaced: gone", RecoverReplaced, gone, true, false},
		{"replaced: still serving from before", RecoverReplaced, before, false, false},
		{"replaced: down", RecoverReplaced, down, false, false},
		{"replaced: back after a restart", RecoverReplaced, restarted, false, true},
		{"replaced: back in a new Pod", RecoverReplaced, newPod, false, true},
		{"restarted: gone", RecoverRestarted, gone, true, false},
		{"restarted: not yet", RecoverRestarted, before, false, false},
		{"restarted: ready again", RecoverRestarted, restarted, true, false},
		{"restarted: in a new Pod", RecoverRestarted, newPod, true, false},
		{"restarted: its Pod terminating", RecoverRestarted, deleting, false, false},
		{"back: ready", RecoverBack, before, true, false},
		{"back: down", RecoverBack, down, false, false},
		{"back: gone", RecoverBack, gone, true, false},
	} {
		healed, v := Healed(c.r, before, c.now)
		if healed != c.healed || (v != nil) != c.violation {
			t.Errorf("%s: healed %t, violation %v", c.name, healed, v)
		}
		if v != nil && (v.Invariant != InvIdentity || !strings.Contains(v.Detail, "m serves again")) {
			t.Errorf("%s: %v", c.name, v)
		}
	}
	if RecoveryOf(WipeSeed) != RecoverReplaced || RecoveryOf(DeletePVC) != RecoverReplaced || RecoveryOf(Kill) != RecoverRestarted || RecoveryOf(Partition) != RecoverBack {
		t.Fatal("RecoveryOf")
	}
}

func put(key, value string, call, ret time.Duration) linearizability.Op {
	return linearizability.Op{Input: linearizability.Input{Kind: linearizability.KindPut, Key: key, Value: value}, Call: call, Return: ret}
}

func TestFinalRead(t *testing.T) {
	s := time.Second
	unknown := func(op linearizability.Op) linearizability.Op { op.Output.Unknown = true; return op }
	cas := func(key, value string, swapped bool, call, ret time.Duration) linearizability.Op {
		return linearizability.Op{Input: linearizability.Input{Kind: linearizability.KindCAS, Key: key, Value: value},
			Output: linearizability.Output{Swapped: swapped}, Call: call, Return: ret}
	}
	get := linearizability.Op{Input: linearizability.Input{Kind: linearizability.KindGet, Key: "k"}, Output: linearizability.Output{Value: "v9"}}
	history := []linearizability.Op{
		put("k", "v1", 1*s, 2*s),
		put("k", "v2", 3*s, 4*s),
		// v3 overlaps v2: either may be last.
		put("k", "v3", 3500*time.Millisecond, 5*s),
		unknown(put("k", "v4", 6*s, 0)),
		cas("k", "v5", false, 7*s, 8*s),
		put("other", "v6", 9*s, 10*s),
		get,
	}
	for _, c := range []struct {
		value string
		lost  string
	}{
		{"v2", ""},
		{"v3", ""},
		{"v4", ""},
		{"v1", "a write acknowledged later"},
		{"v5", "no write wrote"},
		{"v6", "no write wrote"},
		{"v9", "no write wrote"},
		{"", "absent, after 3 acknowledged writes"},
	} {
		err := FinalRead(history, "k", c.value)
		switch {
		case c.lost == "" && err != nil:
			t.Errorf("%q: %v", c.value, err)
		case c.lost != "" && (err == nil || !strings.Contains(err.Error(), c.lost)):
			t.Errorf("%q: %v, want %q", c.value, err, c.lost)
		}
	}
	// A key whose writes all had unknown outcomes may hold nothing, or any.
	onlyUnknown := []linearizability.Op{unknown(put("u", "w1", s, 0))}
	if err := FinalRead(onlyUnknown, "u", ""); err != nil {
		t.Error(err)
	}
	if err := FinalRead(onlyUnknown, "u", "w1"); err != nil {
		t.Error(err)
	}
	// A swapped compare-and-swap is an acknowledged write.
	swapped := []linearizability.Op{put("c", "w1", s, 2*s), cas("c", "w2", true, 3*s, 4*s)}
	if err := FinalRead(swapped, "c", "w1"); err == nil {
		t.Error("the value a swap overwrote was accepted")
	}
	if err := FinalRead(swapped, "c", "w2"); err != nil {
		t.Error(err)
	}
}
