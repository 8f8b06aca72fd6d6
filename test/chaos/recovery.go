package chaos

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/quorumctl/etcd-operator/test/linearizability"
)

// Recovery is what a fault's victim must show before the fault is over.
// The cluster's Ready condition alone cannot say: right after a fault it is
// often still True from before, and the next fault would then land on a
// cluster that has not recovered from this one.
type Recovery int

const (
	// RecoverReplaced: the member is gone, replaced by a new one. A member
	// whose data dir was wiped must never serve again under its identity.
	RecoverReplaced Recovery = iota
	// RecoverRestarted: the member is gone, or its etcd is ready again after
	// a restart or in a new Pod.
	RecoverRestarted
	// RecoverBack: the member is gone, or its etcd is ready again.
	RecoverBack
)

// RecoveryOf is the recovery a fault of kind k waits for.
func RecoveryOf(k Kind) Recovery {
	switch k {
	case WipeSeed, WipeMember, DeletePVC, CrashReplace:
		return RecoverReplaced
	case Partition, NodeStop, PauseLeader, PauseFollower, PeerLoss, PeerLatency, SlowDisk:
		return RecoverBack
	}
	return RecoverRestarted
}

// MemberState is one look at a victim.
type MemberState struct {
	Name string
	// Exists: the EtcdMember is there and not being deleted.
	Exists      bool
	PodExists   bool
	PodUID      types.UID
	PodDeleting bool
	// EtcdReady: the etcd container is ready.
	EtcdReady bool
	Restarts  int32
}

func (s MemberState) restartedSince(before MemberState) bool {
	return s.PodUID != before.PodUID || s.Restarts > before.Restarts
}

// Healed decides from the state before the fault and now whether the victim
// has recovered, and reports a violation if it came back in a way it must
// not.
func Healed(r Recovery, before, now MemberState) (bool, *Violation) {
	if !now.Exists {
		return true, nil
	}
	serving := now.PodExists && !now.PodDeleting && now.EtcdReady
	switch r {
	case RecoverReplaced:
		if serving && now.restartedSince(before) {
			return false, &Violation{Invariant: InvIdentity, Detail: fmt.Sprintf(
				"%s serves again, under its old identity, after its data dir was wiped (restarts %d -> %d, pod %s -> %s)",
				now.Name, before.Restarts, now.Restarts, before.PodUID, now.PodUID)}
		}
		return false, nil
	case RecoverRestarted:
		return serving && now.restartedSince(before), nil
	default:
		return serving, nil
	}
}

// FinalRead checks what a key holds at the end of a run against the writes
// of its history, without porcupine: the value must be absent if no write
// was acknowledged, and otherwise come from a write that no acknowledged
// write followed. A write is followed when another was invoked after it had
// returned; a write of unknown outcome never returned, so it is never
// followed and always explains what it wrote. Values are unique to their
// write, so a value names the one write that can explain it.
func FinalRead(ops []linearizability.Op, key, value string) error {
	lastAckedCall := time.Duration(-1)
	var writer *linearizability.Op
	acked := 0
	for i := range ops {
		op := &ops[i]
		if op.Input.Key != key || op.Input.Kind == linearizability.KindGet {
			continue
		}
		known := !op.Output.Unknown
		wrote := op.Input.Kind == linearizability.KindPut || op.Output.Swapped || op.Output.Unknown
		if !wrote {
			continue
		}
		if known {
			acked++
			lastAckedCall = max(lastAckedCall, op.Call)
		}
		if op.Input.Value == value {
			writer = op
		}
	}
	switch {
	case value == "" && acked > 0:
		return fmt.Errorf("%s is absent, after %d acknowledged writes", key, acked)
	case value == "":
		return nil
	case writer == nil:
		return fmt.Errorf("%s holds %q, which no write wrote", key, value)
	case !writer.Output.Unknown && lastAckedCall > writer.Return:
		return fmt.Errorf("%s holds %q, written by a call that returned at %s, but a write acknowledged later was invoked at %s",
			key, value, writer.Return, lastAckedCall)
	}
	return nil
}
