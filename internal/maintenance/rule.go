package maintenance

import (
	"fmt"
)

// Defaults of the defragmentation rule. A member is due when a quarter of
// its database file is free and that is at least 64 MiB, or when the file
// has reached 80% of the backend quota.
const (
	DefaultFreePercent  = 25
	DefaultMinReclaim   = 64 << 20
	DefaultQuotaPercent = 80
	// quotaArmReclaimShare caps what the quota arm asks to reclaim at a
	// tenth of the quota: with a small quota (the default for a 256Mi
	// volume is about 45 MiB) 64 MiB could never be free, and it is exactly
	// those members that reach NOSPACE first.
	quotaArmReclaimShare = 10
)

// Usage is what one member reports of its database, and its quota.
type Usage struct {
	// DBSize is the size of the database file; etcd checks the quota
	// against it, so space freed inside the file does not count until a
	// defragmentation gives it back.
	DBSize int64
	// InUse is the part of the file that holds data.
	InUse int64
	// Quota is the member's effective --quota-backend-bytes; 0 when not
	// known, which switches the quota arm off.
	Quota int64
}

// Free is what a defragmentation would give back.
func (u Usage) Free() int64 { return max(u.DBSize-u.InUse, 0) }

// Rule says when a member is worth defragmenting: defragmenting blocks the
// member for as long as it rewrites its file, so it must pay.
type Rule struct {
	// FreePercent is the share of the file that must be free, with at
	// least MinReclaim bytes of it.
	FreePercent int32
	// MinReclaim is the least a defragmentation must give back.
	MinReclaim int64
	// QuotaPercent: a file this full, relative to the quota, is due too,
	// as long as a defragmentation gives back at least MinReclaim or a
	// tenth of the quota, whichever is less.
	QuotaPercent int32
}

// DefaultRule is the rule when the spec sets none.
func DefaultRule() Rule {
	return Rule{FreePercent: DefaultFreePercent, MinReclaim: DefaultMinReclaim, QuotaPercent: DefaultQuotaPercent}
}

// Verdict is the rule applied to one member.
type Verdict struct {
	Due bool
	// Why says what was measured against what, in words.
	Why string
}

// Evaluate applies the rule to a member's usage.
func (r Rule) Evaluate(u Usage) Verdict {
	free := u.Free()
	freePct := percent(free, u.DBSize)
	if free > 0 && freePct >= float64(r.FreePercent) && free >= r.MinReclaim {
		return Verdict{Due: true, Why: fmt.Sprintf("%s of its %s database is free (%.0f%%)",
			FormatBytes(free), FormatBytes(u.DBSize), freePct)}
	}
	if u.Quota > 0 {
		quotaPct := percent(u.DBSize, u.Quota)
		if quotaPct >= float64(r.QuotaPercent) && free > 0 && free >= r.quotaArmReclaim(u.Quota) {
			return Verdict{Due: true, Why: fmt.Sprintf("its %s database uses %.0f%% of the %s quota, and %s of it is free",
				FormatBytes(u.DBSize), quotaPct, FormatBytes(u.Quota), FormatBytes(free))}
		}
	}
	return Verdict{Why: fmt.Sprintf("%s of its %s database is free (%.0f%%); due at %d%% and %s, or at %d%% of the quota",
		FormatBytes(free), FormatBytes(u.DBSize), freePct, r.FreePercent, FormatBytes(r.MinReclaim), r.QuotaPercent)}
}

func (r Rule) quotaArmReclaim(quota int64) int64 {
	return min(r.MinReclaim, quota/quotaArmReclaimShare)
}

func percent(part, whole int64) float64 {
	if whole <= 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}

// FormatBytes renders a size in binary units with one decimal, as etcdctl
// and kubectl etcd print them.
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
