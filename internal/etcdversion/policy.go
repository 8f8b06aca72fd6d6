package etcdversion

import (
	"fmt"
	"slices"
	"strings"
)

// supportedMajor and supportedMinors are the releases the operator knows the
// flags and upgrade rules of. A new minor is added here once its flags have
// been checked against its source (see flags.go).
const supportedMajor = 3

var supportedMinors = []int{5, 6, 7}

// minimumPatch is, per minor line, the oldest patch that may sit beside the
// next minor: the patch a cluster must reach before that upgrade, and the
// oldest one a downgrade may land on. etcd's 3.6 upgrade guide names 3.5.32:
// the 3.5 patches before it lack fixes for several upgrade blockers.
var minimumPatch = map[int]int{5: 32}

// Kind is the procedure a version change needs.
type Kind string

const (
	// KindNone: every member already runs the target.
	KindNone Kind = "None"
	// KindPatch: a change of patch within one minor line, up or down. Each
	// member's binary is swapped in turn; the data format is versioned per
	// minor, so nothing else changes.
	KindPatch Kind = "Patch"
	// KindUpgrade: to the next minor line (or on to it, mid-rollout). Each
	// member's binary is swapped in turn, leader last; etcd moves the cluster
	// version only once every member runs the new minor.
	KindUpgrade Kind = "Upgrade"
	// KindRollback: a cluster whose members run two minor lines goes back to
	// the lower one, or, when etcd's downgrade towards the lower one is
	// enabled, turns that downgrade back to the higher one. While members of the lower minor remain, the cluster version (and
	// so every member's storage version) is still the lower minor, so
	// swapping binaries back is safe.
	KindRollback Kind = "Rollback"
	// KindDowngrade: one minor down from a cluster that runs the higher minor
	// everywhere, through etcd's downgrade API: validate and enable the
	// downgrade (see Plan.EnableDowngrade), wait until every member reports
	// the target minor as its storage version, then swap each member's binary
	// in turn, leader last. A mixed cluster whose downgrade is already
	// enabled continues with the swaps.
	KindDowngrade Kind = "Downgrade"
)

// Refusal reasons, for a condition's reason field.
const (
	ReasonUnsupportedVersion  = "UnsupportedVersion"
	ReasonSkippedMinor        = "SkippedMinor"
	ReasonBelowMinimumPatch   = "BelowMinimumPatch"
	ReasonDowngradeTooFar     = "DowngradeTooFar"
	ReasonVersionsTooFarApart = "VersionsTooFarApart"
)

// Refusal is a version change etcd does not support. Message says what to do
// instead and is meant for users.
type Refusal struct {
	Reason  string
	Message string
}

func (r *Refusal) Error() string { return r.Message }

func refuse(reason, format string, args ...any) *Refusal {
	return &Refusal{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Cluster is what a decision needs to know of a running cluster.
type Cluster struct {
	// Members are the versions the members run now, one entry per member.
	Members []Version
	// DowngradeTarget is the version etcd's downgrade is enabled for, as a
	// member's Status reports it (3.6 and later), or nil when none is.
	DowngradeTarget *Version
}

// Plan is an accepted version change.
type Plan struct {
	Kind   Kind
	Target Version
	// EnableDowngrade: for KindDowngrade, validate and enable etcd's
	// downgrade to the target's minor before the first member moves. It is
	// false when that downgrade is already enabled.
	EnableDowngrade bool
	// CancelDowngrade: etcd has a downgrade enabled towards another minor
	// than the target's, left by a downgrade the user turned back; cancel it
	// before anything moves, or the cluster version stays pinned down.
	CancelDowngrade bool
}

// Decide checks a change of the cluster to target against etcd's rules and
// says how to carry it out, or why it must not be tried.
func Decide(c Cluster, target Version) (Plan, error) {
	if err := supported(target); err != nil {
		return Plan{}, err
	}
	for _, m := range c.Members {
		if err := supported(m); err != nil {
			return Plan{}, err
		}
	}
	plan := Plan{Target: target}
	if c.DowngradeTarget != nil && !c.DowngradeTarget.SameMinor(target) {
		plan.CancelDowngrade = true
	}
	if len(c.Members) == 0 {
		plan.Kind = KindNone
		return plan, nil
	}
	lowest, highest := slices.MinFunc(c.Members, Version.Compare), slices.MaxFunc(c.Members, Version.Compare)
	if highest.Minor-lowest.Minor > 1 {
		return Plan{}, refuse(ReasonVersionsTooFarApart,
			"the members run etcd %s, more than one minor version apart, which etcd does not support; bring every member within one minor version of the others by hand before changing the version",
			describe(c.Members))
	}

	switch {
	case target.Minor > lowest.Minor+1:
		return Plan{}, refuse(ReasonSkippedMinor,
			"etcd %s cannot be upgraded to %s in one step: etcd upgrades one minor version at a time, so upgrade to the latest %s release first, then to %s",
			lowest, target, intermediate(lowest, target), target)
	case target.Minor < highest.Minor-1:
		return Plan{}, refuse(ReasonDowngradeTooFar,
			"etcd %s cannot be downgraded to %s in one step: etcd downgrades one minor version at a time, so downgrade to %s first",
			highest, target, intermediate(highest, target))
	}

	if target.Minor > lowest.Minor {
		// Members below the target's minor upgrade into it: the entry
		// criterion of that upgrade applies to them.
		if floor, ok := minimumPatch[lowest.Minor]; ok {
			var below []Version
			for _, m := range c.Members {
				if m.Minor == lowest.Minor && m.Patch < floor {
					below = append(below, m)
				}
			}
			if len(below) > 0 {
				return Plan{}, refuse(ReasonBelowMinimumPatch,
					"etcd %s cannot be upgraded to %s: etcd's upgrade guide requires every %s member to run %s.%d or later first; upgrade to the latest %s release, then to %s",
					describe(below), target, lowest.MinorString(), lowest.MinorString(), floor, lowest.MinorString(), target)
			}
		}
	}
	if target.Minor < highest.Minor {
		// Members above the target's minor go down beside members of the
		// target's minor, which must be new enough to sit beside them.
		if floor, ok := minimumPatch[target.Minor]; ok && target.Patch < floor {
			return Plan{}, refuse(ReasonBelowMinimumPatch,
				"etcd %s cannot be downgraded to %s: a %s member beside %s members must run %s.%d or later; choose the latest %s release",
				highest, target, target.MinorString(), highest.MinorString(), target.MinorString(), floor, target.MinorString())
		}
	}

	plan.Kind = kind(c, target, lowest, highest)
	if plan.Kind == KindDowngrade {
		plan.EnableDowngrade = c.DowngradeTarget == nil || !c.DowngradeTarget.SameMinor(target)
	}
	return plan, nil
}

// kind names the procedure of a change Decide has found allowed.
func kind(c Cluster, target, lowest, highest Version) Kind {
	if slices.IndexFunc(c.Members, func(m Version) bool { return m != target }) < 0 {
		return KindNone
	}
	mixed := lowest.Minor != highest.Minor
	downgrading := c.DowngradeTarget != nil && c.DowngradeTarget.SameMinor(target)
	switch {
	case target.Minor > lowest.Minor && mixed && c.DowngradeTarget != nil:
		// Turning back a downgrade that has moved some members already.
		return KindRollback
	case target.Minor > lowest.Minor:
		return KindUpgrade
	case target.Minor < highest.Minor && downgrading:
		return KindDowngrade
	case target.Minor < highest.Minor && mixed:
		return KindRollback
	case target.Minor < highest.Minor:
		return KindDowngrade
	default:
		return KindPatch
	}
}

func supported(v Version) error {
	if v.Major == supportedMajor && slices.Contains(supportedMinors, v.Minor) {
		return nil
	}
	lines := make([]string, 0, len(supportedMinors))
	for _, m := range supportedMinors {
		lines = append(lines, fmt.Sprintf("%d.%d", supportedMajor, m))
	}
	return refuse(ReasonUnsupportedVersion, "etcd %s is not supported: the operator runs etcd %s", v, strings.Join(lines, ", "))
}

// intermediate names the minor line(s) between from and to, exclusive.
func intermediate(from, to Version) string {
	step := 1
	if to.Minor < from.Minor {
		step = -1
	}
	var lines []string
	for m := from.Minor + step; m != to.Minor; m += step {
		lines = append(lines, fmt.Sprintf("%d.%d", from.Major, m))
	}
	return strings.Join(lines, ", then ")
}

// describe lists the distinct versions, oldest first.
func describe(vs []Version) string {
	sorted := slices.Clone(vs)
	slices.SortFunc(sorted, Version.Compare)
	sorted = slices.Compact(sorted)
	names := make([]string, 0, len(sorted))
	for _, v := range sorted {
		names = append(names, v.String())
	}
	return strings.Join(names, " and ")
}
