package remediation

import "strings"

// Reason says why a member is replaced. Each value is also the reason of
// the Event emitted for the replacement.
type Reason string

const (
	// DataDirLost: etcd found an empty data dir where cluster data must be.
	DataDirLost Reason = "DataDirLost"
	// DataCorrupt: etcd could not read its WAL, snapshot or database.
	DataCorrupt Reason = "DataCorrupt"
	// Diverged: the member's own view of the cluster disagrees with the quorum's.
	Diverged Reason = "Diverged"
	// RemovedFromCluster: etcd says the member was removed from the cluster.
	RemovedFromCluster Reason = "RemovedFromCluster"
	// CrashLoop: the member keeps failing for a reason not recognised below.
	CrashLoop Reason = "CrashLoop"
	// Unresponsive: the member has not been ready for a long time, does not
	// restart, and its endpoint does not answer while the others are healthy.
	Unresponsive Reason = "Unresponsive"
	// PodLost: a Memory member's Pod is gone, and its data with it.
	PodLost Reason = "PodLost"
	// NodeLost: the member's node has been gone, unreachable or unable to
	// run it for longer than the cluster's selfHeal.nodeLostAfterSeconds.
	NodeLost Reason = "NodeLost"
	// Unschedulable is never a replacement: the scheduler has found no place
	// for the member's Pod for UnschedulableAfter (a node selector or
	// affinity no node meets where its volume lives, a volume that is never
	// provisioned). A new member would meet the same refusal, so it is
	// reported (Verdict.Hold) until the spec or the nodes change.
	Unschedulable Reason = "Unschedulable"
	// CannotJoin is never a replacement either: a member that has not
	// joined yet failed its first start (etcd refused its member list, or
	// no peer answered it). It holds no data, and a replacement would join
	// the same way, so it is reported (Verdict.Hold) and restarted in place
	// by the kubelet, with the member list the operator keeps current.
	CannotJoin Reason = "CannotJoin"
)

// fatalSignature is a fragment of a fatal log line etcd writes before exiting,
// and what it means. These are etcd's own messages, read from the container's
// termination message (terminationMessagePolicy FallbackToLogsOnError); they
// are the one place this operator classifies by text, because a log line is
// the only form in which a dead process reports why it died.
type fatalSignature struct {
	fragment string
	reason   Reason
}

// signatures are checked in order against each line; the first match wins. Observed on etcd
// 3.5 to 3.7 (see docs/design/0003-self-heal.md).
var signatures = []fatalSignature{
	// An empty data dir under --initial-cluster-state=existing with a
	// self-only --initial-cluster: the seed's case, and any member's once it
	// has booted.
	{"cannot fetch cluster info from peer urls", DataDirLost},
	{"could not retrieve cluster information from the given URLs", DataDirLost},
	// A joiner restarted on an empty data dir with a stale member list.
	{"member count is unequal", DataDirLost},
	// A member that re-bootstrapped and then received the real cluster's log.
	{"failed to update; member unknown", Diverged},
	{"the member has been permanently removed from the cluster", RemovedFromCluster},
	// Unreadable state on disk. bbolt reports a damaged page by panicking
	// with "assertion failed" as soon as it reads the database.
	{"failed to open database", DataCorrupt},
	{"panic: assertion failed", DataCorrupt},
	{"invalid page type", DataCorrupt},
	{"failed to get all reachable pages", DataCorrupt},
	// A damaged or truncated memory-mapped database faults on first touch.
	{"signal SIGBUS", DataCorrupt},
	{"unexpected fault address", DataCorrupt},
	{"invalid database", DataCorrupt},
	{"crc mismatch", DataCorrupt},
	{"failed to recover v3 backend", DataCorrupt},
	{"failed to find database snapshot file", DataCorrupt},
	{"failed to read WAL", DataCorrupt},
	{"wal: ", DataCorrupt},
	{"snap: ", DataCorrupt},
	// Anything else etcd calls a discovery failure on start-up means it could
	// not make sense of its data dir (a garbled WAL surfaces here).
	{"\"msg\":\"discovery failed\"", DataCorrupt},
}

// ClassifyTermination reads a terminated etcd container's message and
// reports a recognised fatal cause and the line that shows it. Lines are read
// from the last: what made the process exit is what it wrote last, while
// earlier lines may be warnings about other members.
func ClassifyTermination(message string) (Reason, string, bool) {
	lines := strings.Split(message, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		for _, s := range signatures {
			if strings.Contains(lines[i], s.fragment) {
				return s.reason, shorten(lines[i]), true
			}
		}
	}
	return "", "", false
}

// shorten keeps an evidence line short enough for an Event and a condition.
func shorten(line string) string {
	const limit = 300
	if len(line) > limit {
		return line[:limit] + "..."
	}
	return line
}
