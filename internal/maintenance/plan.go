package maintenance

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// DefaultAppliedWindow is how far, in raft entries, a member's applied index
// may trail the leader's for it to count as caught up; the rollout's gate
// uses the same.
const DefaultAppliedWindow = 1000

// MinInterval is the least time between two routine defragmentations of one
// member. A rule that is still met right after a member was defragmented
// means a workload that fragments faster than defragmenting helps, and
// blocking the member over and over would not.
const MinInterval = 10 * time.Minute

// DisarmBelowPercent is how full, relative to its quota, a member's database
// may be, once compacted and defragmented, for a NOSPACE alarm to be
// disarmed. Above it the live data nearly fills the quota by itself:
// disarming would let etcd raise the alarm again within a few writes (how
// tightly bbolt packs a rewritten file varies by a few percent), and the
// remedy is more quota. A person can still disarm by hand.
const DisarmBelowPercent = 90

// Member is what one pass observed of one member.
type Member struct {
	Name string
	// Voter, Leader: its place in etcd's membership. Learners are never
	// defragmented by the operator; it waits for them to be promoted.
	Voter  bool
	Leader bool
	// Healthy: its Pod is ready and its endpoint answers, following the
	// quorum's leader. An active NOSPACE alarm does not count against it:
	// such a member still serves reads and replicates.
	Healthy bool
	// Applied is its raft applied index, when it answered.
	Applied uint64
	Usage   Usage
	// LastDefrag is when the operator last defragmented it; zero if never.
	LastDefrag time.Time
	// RetryAt: its last defragmentation failed, and it is not tried again
	// before then.
	RetryAt time.Time
	// DefragmentedAt is the compaction revision (Cluster.Compacted) of the
	// operator's last defragmentation of the member; 0 if not known.
	DefragmentedAt int64
}

// Alarms are the cluster's active alarms, by the names of the members that
// raised them.
type Alarms struct {
	NoSpace []string
	Corrupt []string
}

// Blocking says why no maintenance may touch the cluster: a CORRUPT alarm,
// which means a member's data differs from the others'. NOSPACE does not
// block: compacting and defragmenting is its cure.
func (a Alarms) Blocking() (string, bool) {
	if len(a.Corrupt) == 0 {
		return "", false
	}
	return fmt.Sprintf("etcd raised a CORRUPT alarm on %s: the operator neither compacts nor defragments a cluster whose data may be corrupt; find the member whose data differs and replace it",
		strings.Join(a.Corrupt, ", ")), true
}

// Cluster is what the pass observed of the cluster.
type Cluster struct {
	Members []Member
	Alarms  Alarms
	// Revision is the highest store revision a member reported.
	Revision int64
	// Compacted is the revision the operator last compacted the cluster
	// at; 0 when not known (it is remembered in memory only: compacting
	// again at the same revision is refused by etcd at no cost).
	Compacted int64
	// CompactRetryAt: the last compaction failed, and it is not tried
	// again before then.
	CompactRetryAt time.Time
	// Settling names a membership change in flight (a member being added,
	// replaced or removed, a learner), which all maintenance waits out.
	Settling string
	// Busy names other work that is due (a rollout, a scale), which
	// routine defragmentation waits for. NOSPACE recovery does not: the
	// cluster refuses writes until it is done.
	Busy string
	Now  time.Time
}

// Policy is what the spec asks for.
type Policy struct {
	Defrag bool
	Rule   Rule
	// Window limits when routine defragmentation may start; nil: any time.
	Window *Window
	// NoSpaceRecovery lets the operator compact, defragment and disarm
	// when etcd raises NOSPACE.
	NoSpaceRecovery bool
	// AppliedWindow is DefaultAppliedWindow when zero.
	AppliedWindow uint64
}

// Action is the kind of step.
type Action string

const (
	// None: nothing is due.
	None Action = "None"
	// Wait: something is due but must wait; Reason says for what.
	Wait Action = "Wait"
	// Blocked: a CORRUPT alarm is active; nothing is touched.
	Blocked Action = "Blocked"
	// RecoveryOff: NOSPACE is active and recovery is switched off.
	RecoveryOff Action = "RecoveryOff"
	// OverQuota: NOSPACE is active and the live data fills the quota even
	// after compaction; only more quota or more storage helps.
	OverQuota Action = "OverQuota"
	// Compact the cluster at Revision.
	Compact Action = "Compact"
	// MoveLeader: hand leadership from Member to To before defragmenting it.
	MoveLeader Action = "MoveLeader"
	// Defragment Member.
	Defragment Action = "Defragment"
	// Disarm the NOSPACE alarms.
	Disarm Action = "Disarm"
)

// Decision is the next step.
type Decision struct {
	Action   Action
	Member   string
	To       string
	Revision int64
	// Reason says why the step, or why waiting, in words.
	Reason string
	// NoSpace: the step is part of recovering from a NOSPACE alarm.
	NoSpace bool
}

// Next decides the maintenance step of this pass: at most one, and none
// while a membership change is in flight.
func Next(c Cluster, p Policy) Decision {
	if why, blocked := c.Alarms.Blocking(); blocked {
		return Decision{Action: Blocked, Reason: why}
	}
	if len(c.Alarms.NoSpace) > 0 {
		if !p.NoSpaceRecovery {
			return Decision{Action: RecoveryOff, NoSpace: true, Reason: fmt.Sprintf(
				"etcd raised NOSPACE on %s and refuses writes; spec.maintenance.noSpaceRecovery is off: compact, defragment (kubectl etcd compact, kubectl etcd defrag) and disarm (kubectl etcd alarms disarm)",
				strings.Join(c.Alarms.NoSpace, ", "))}
		}
		return recoverNoSpace(c, p)
	}
	if !p.Defrag {
		return Decision{Action: None, Reason: "automatic defragmentation is off (spec.maintenance.defrag.enabled)"}
	}
	return defragment(c, p)
}

// Order is the order members are defragmented in: every member but the
// leader by name, the leader last. Defragmenting blocks a member; blocking
// the leader blocks the cluster's writes, so that happens once, at the end,
// and after leadership has moved away where another voter can take it.
func Order(ms []Member) []Member {
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

func defragment(c Cluster, p Policy) Decision {
	var due []Member
	var why []string
	isDue := map[string]bool{}
	for _, m := range c.Members {
		if !m.Voter {
			continue
		}
		v := p.Rule.Evaluate(m.Usage)
		if !v.Due || (!m.LastDefrag.IsZero() && c.Now.Sub(m.LastDefrag) < MinInterval) || c.Now.Before(m.RetryAt) {
			continue
		}
		due = append(due, m)
		isDue[m.Name] = true
		why = append(why, m.Name+": "+v.Why)
	}
	if len(due) == 0 {
		return Decision{Action: None, Reason: "no member needs defragmentation"}
	}
	what := "defragmentation is due (" + strings.Join(why, "; ") + ")"
	switch {
	case !p.Window.Open(c.Now):
		return waitFor("%s; it starts %s, next at %s", what, p.Window, p.Window.NextOpen(c.Now).UTC().Format(time.RFC3339))
	case c.Settling != "":
		return waitFor("%s; waiting for %s", what, c.Settling)
	case c.Busy != "":
		return waitFor("%s; waiting for %s", what, c.Busy)
	}
	if d, ok := gate(c.Members, p.appliedWindow()); !ok {
		d.Reason = what + "; " + d.Reason
		return d
	}
	next := Order(due)[0]
	verdict := p.Rule.Evaluate(next.Usage)
	if next.Leader && voters(c.Members) > 1 {
		return handOver(c.Members, next, func(m Member) bool { return !isDue[m.Name] })
	}
	return Decision{Action: Defragment, Member: next.Name, Reason: verdict.Why}
}

// recoverNoSpace is etcd's own procedure for NOSPACE: compact at the
// current revision, defragment every member, disarm. Every member is
// defragmented once after each compaction, whatever its Status says is free:
// bbolt frees the pages of a compaction's last batch only with the next
// write, which etcd refuses, so only the file a defragmentation rewrites
// tells what the live data needs. The operator never deletes a key: when the
// live data alone fills the quota it says so, and waits for more quota or
// more storage (or for keys to be deleted, which a new revision shows).
func recoverNoSpace(c Cluster, p Policy) Decision {
	alarmed := strings.Join(c.Alarms.NoSpace, ", ")
	if c.Settling != "" {
		return Decision{Action: Wait, NoSpace: true, Reason: fmt.Sprintf("etcd raised NOSPACE on %s; waiting for %s before recovering", alarmed, c.Settling)}
	}
	if d, ok := gate(c.Members, 0); !ok {
		d.NoSpace = true
		d.Reason = fmt.Sprintf("etcd raised NOSPACE on %s; %s before recovering", alarmed, d.Reason)
		return d
	}
	if c.Revision > c.Compacted {
		if c.Now.Before(c.CompactRetryAt) {
			return Decision{Action: Wait, NoSpace: true, Reason: fmt.Sprintf(
				"etcd raised NOSPACE on %s; the compaction failed, trying again at %s", alarmed, c.CompactRetryAt.UTC().Format(time.RFC3339))}
		}
		return Decision{Action: Compact, Revision: c.Revision, NoSpace: true, Reason: fmt.Sprintf(
			"etcd raised NOSPACE on %s and refuses writes; compacting at revision %d, then defragmenting each member and disarming", alarmed, c.Revision)}
	}
	if d, ok := gate(c.Members, p.appliedWindow()); !ok {
		d.NoSpace = true
		d.Reason = fmt.Sprintf("recovering from NOSPACE on %s; %s", alarmed, d.Reason)
		return d
	}
	done := func(m Member) bool { return m.DefragmentedAt >= c.Compacted }
	for _, m := range Order(c.Members) {
		if !m.Voter || done(m) {
			continue
		}
		if c.Now.Before(m.RetryAt) {
			return Decision{Action: Wait, NoSpace: true, Reason: fmt.Sprintf(
				"recovering from NOSPACE on %s; the defragmentation of %s failed, trying again at %s", alarmed, m.Name, m.RetryAt.UTC().Format(time.RFC3339))}
		}
		if m.Leader && voters(c.Members) > 1 {
			d := handOver(c.Members, m, done)
			d.NoSpace = true
			return d
		}
		return Decision{Action: Defragment, Member: m.Name, NoSpace: true, Reason: fmt.Sprintf(
			"recovering from NOSPACE: compacted at revision %d, its %s database is rewritten without the history", c.Compacted, FormatBytes(m.Usage.DBSize))}
	}
	if full, ok := overQuota(c.Members); ok {
		return full
	}
	return Decision{Action: Disarm, NoSpace: true, Reason: fmt.Sprintf(
		"every member is compacted and defragmented; disarming NOSPACE on %s", alarmed)}
}

// overQuota reports the member whose defragmented database fills the most
// of its quota, if that is past DisarmBelowPercent.
func overQuota(ms []Member) (Decision, bool) {
	var worst *Member
	for i := range ms {
		m := &ms[i]
		if !m.Voter || m.Usage.Quota <= 0 {
			continue
		}
		if worst == nil || percent(m.Usage.DBSize, m.Usage.Quota) > percent(worst.Usage.DBSize, worst.Usage.Quota) {
			worst = m
		}
	}
	if worst == nil || percent(worst.Usage.DBSize, worst.Usage.Quota) < DisarmBelowPercent {
		return Decision{}, false
	}
	return Decision{Action: OverQuota, NoSpace: true, Member: worst.Name, Reason: fmt.Sprintf(
		"etcd refuses writes (NOSPACE): the live data of %s is %s, %.0f%% of its %s backend quota, even after compaction and defragmentation; "+
			"the operator deletes nothing. Raise spec.options.quotaBackendBytes, or grow spec.storage.size "+
			"(the default quota is a third of the volume after the write-ahead log's 128 MB); "+
			"the members are then rolled and the alarm is disarmed. Deleting keys also works",
		worst.Name, FormatBytes(worst.Usage.DBSize), percent(worst.Usage.DBSize, worst.Usage.Quota), FormatBytes(worst.Usage.Quota))}, true
}

// gate: every voter is healthy, one leads, and (for a window above 0) each
// is within window entries of the leader's applied index, so the member
// defragmented last has caught up before the next one is blocked.
func gate(ms []Member, window uint64) (Decision, bool) {
	var leader *Member
	var down []string
	for i := range ms {
		m := &ms[i]
		if m.Leader {
			leader = m
		}
		if m.Voter && !m.Healthy {
			down = append(down, m.Name)
		}
	}
	switch {
	case len(down) > 0:
		return waitFor("waiting for %s to be healthy", strings.Join(down, ", ")), false
	case leader == nil:
		return waitFor("waiting for a leader"), false
	}
	if window == 0 {
		return Decision{}, true
	}
	for _, m := range ms {
		if m.Voter && m.Applied+window < leader.Applied {
			return waitFor("waiting for %s to catch up (applied index %d, the leader's %d)", m.Name, m.Applied, leader.Applied), false
		}
	}
	return Decision{}, true
}

// handOver moves leadership from the leader to Transferee.
func handOver(ms []Member, leader Member, done func(Member) bool) Decision {
	to, ok := Transferee(ms, done)
	if !ok {
		return waitFor("no healthy voter can take leadership from %s before it is defragmented", leader.Name)
	}
	return Decision{Action: MoveLeader, Member: leader.Name, To: to, Reason: "before defragmenting it"}
}

// Transferee is the healthy voter, other than the leader, to hand leadership
// to before the leader is defragmented: one that is done (so that it is not
// the next to be blocked), and of those the one furthest ahead.
func Transferee(ms []Member, done func(Member) bool) (string, bool) {
	var best *Member
	for i := range ms {
		m := &ms[i]
		if m.Leader || !m.Voter || !m.Healthy {
			continue
		}
		if best == nil || better(*m, *best, done) {
			best = m
		}
	}
	if best == nil {
		return "", false
	}
	return best.Name, true
}

func better(a, b Member, done func(Member) bool) bool {
	if done(a) != done(b) {
		return done(a)
	}
	if a.Applied != b.Applied {
		return a.Applied > b.Applied
	}
	return cmp.Less(a.Name, b.Name)
}

func voters(ms []Member) int {
	n := 0
	for _, m := range ms {
		if m.Voter {
			n++
		}
	}
	return n
}

func (p Policy) appliedWindow() uint64 {
	if p.AppliedWindow == 0 {
		return DefaultAppliedWindow
	}
	return p.AppliedWindow
}

func waitFor(format string, args ...any) Decision {
	return Decision{Action: Wait, Reason: fmt.Sprintf(format, args...)}
}
