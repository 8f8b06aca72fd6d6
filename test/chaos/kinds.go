package chaos

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The faults. A member fault takes one member down; an operation changes a
// cluster while the operator's leader is killed at a random moment of it; a
// global fault acts on the whole local cluster.
const (
	// Kill SIGKILLs etcd in place; the kubelet restarts it in the same Pod.
	Kill Kind = "kill"
	// DeletePod deletes a member's Pod; the operator re-creates it.
	DeletePod Kind = "delete-pod"
	// WipeSeed empties the seed's data dir and restarts etcd in place: the
	// start that, given "new", would form a cluster of its own.
	WipeSeed Kind = "wipe-seed"
	// WipeMember does the same to a member that is not the seed.
	WipeMember Kind = "wipe-member"
	// DeletePVC deletes a member's claim and then its Pod, as a user gives a
	// member a fresh disk. The member keeps its name, and so its peer URL:
	// the operator re-creates both, and an etcd with an empty data dir
	// starts at the address etcd's membership knows under the member's ID,
	// the state etcd's robustness suite reaches with MemberReplace. It must
	// refuse to start and be replaced, never serve again.
	DeletePVC Kind = "delete-pvc"
	// Corrupt damages every WAL segment so that etcd cannot read it, and
	// restarts etcd.
	Corrupt Kind = "corrupt"
	// Partition drops everything but loopback in the member's network
	// namespace for a while.
	Partition Kind = "partition"
	// DiskFill fills a Memory member's tmpfs until ENOSPC.
	DiskFill Kind = "disk-fill"
	// PauseLeader stops the leader's etcd with SIGSTOP for a while and
	// resumes it: its sockets stay open and silent, as on a stuck disk or a
	// starved CPU, until the others elect a new leader; back, it still
	// believes it leads for a moment.
	PauseLeader Kind = "pause-leader"
	// PauseFollower does the same to a member that does not lead.
	PauseFollower Kind = "pause-follower"
	// PeerLoss drops a share of the member's packets on the peer port, both
	// ways, for a while.
	PeerLoss Kind = "peer-loss"
	// PeerLatency holds each of the member's packets on the peer port, both
	// ways, for PeerLatencyMean give or take PeerLatencyJitter, for a while.
	PeerLatency Kind = "peer-latency"
	// SlowDisk throttles the writes of the member's etcd to its data dir's
	// device (cgroup v1 blkio, write IOPS) for a while.
	SlowDisk Kind = "slow-disk"

	// CrashScaleUp scales a 3-member cluster to 5.
	CrashScaleUp Kind = "operator-crash-scale-up"
	// CrashScaleDown scales it back to 3.
	CrashScaleDown Kind = "operator-crash-scale-down"
	// CrashReplace deletes an EtcdMember, as kubectl etcd replace-member does.
	CrashReplace Kind = "operator-crash-replace"
	// CrashRollout changes the member template, which restarts every member.
	CrashRollout Kind = "operator-crash-rollout"

	// NodeStop stops a node for a while and starts it again.
	NodeStop Kind = "node-stop"
	// OperatorDown scales the operator to zero while member faults happen,
	// and back.
	OperatorDown Kind = "operator-down"
)

// The latency of PeerLatency, per packet and direction: etcd's robustness
// suite's 75 ± 50 ms.
const (
	PeerLatencyMean   = 75 * time.Millisecond
	PeerLatencyJitter = 50 * time.Millisecond
)

// AllKinds lists every kind, in a fixed order for reports.
var AllKinds = []Kind{
	Kill, DeletePod, WipeSeed, WipeMember, DeletePVC, Corrupt, Partition, DiskFill,
	PauseLeader, PauseFollower, PeerLoss, PeerLatency, SlowDisk,
	CrashScaleUp, CrashScaleDown, CrashReplace, CrashRollout,
	NodeStop, OperatorDown,
}

// ShortKinds are the fast faults of the run inside make test.
var ShortKinds = []Kind{
	Kill, DeletePod, WipeSeed, WipeMember, DeletePVC, Corrupt, Partition,
	PauseLeader, PauseFollower, PeerLoss, PeerLatency, SlowDisk,
	CrashReplace, CrashRollout, OperatorDown,
}

// IsMemberFault reports a fault that takes exactly one member down.
func (k Kind) IsMemberFault() bool {
	switch k {
	case Kill, DeletePod, WipeSeed, WipeMember, DeletePVC, Corrupt, Partition, DiskFill, PauseLeader, PauseFollower, PeerLoss, PeerLatency, SlowDisk:
		return true
	}
	return false
}

// Holds reports a member fault that lasts a drawn hold and then lifts
// itself, leaving the member where it was.
func (k Kind) Holds() bool {
	switch k {
	case Partition, PauseLeader, PauseFollower, PeerLoss, PeerLatency, SlowDisk:
		return true
	}
	return false
}

// IsOperation reports a cluster operation under an operator crash.
func (k Kind) IsOperation() bool {
	switch k {
	case CrashScaleUp, CrashScaleDown, CrashReplace, CrashRollout:
		return true
	}
	return false
}

// IsGlobal reports a fault of the whole local cluster, which runs while every
// cluster's own faults are held.
func (k Kind) IsGlobal() bool { return k == NodeStop || k == OperatorDown }

// NeedsOperator reports a member fault that cannot be injected while the
// operator is down. Only the disk fill's Memory cluster is left out of
// operator outages; every other member fault is injected from outside.
func (k Kind) NeedsOperator() bool { return k == DiskFill }

// ParseKinds reads a comma-separated list of kinds.
func ParseKinds(s string) ([]Kind, error) {
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		k := Kind(strings.TrimSpace(f))
		if k == "" {
			continue
		}
		if !slices.Contains(AllKinds, k) {
			return nil, fmt.Errorf("unknown fault kind %q; the kinds are %s", k, kindList(AllKinds))
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no fault kind given; the kinds are %s", kindList(AllKinds))
	}
	return out, nil
}

func kindList(kinds []Kind) string {
	var s []string
	for _, k := range kinds {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}

// Tolerance is how many members a cluster of n can lose and keep a quorum.
func Tolerance(n int32) int32 {
	if n < 1 {
		return 0
	}
	return (n - 1) / 2
}
