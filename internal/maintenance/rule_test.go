package maintenance

import (
	"testing"

	. "github.com/onsi/gomega"
)

const (
	mib = int64(1) << 20
	gib = int64(1) << 30
)

func TestRuleEvaluate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		rule  Rule
		usage Usage
		due   bool
		why   string
	}{
		{"a quarter free and 64 MiB is due", DefaultRule(), Usage{DBSize: 256 * mib, InUse: 192 * mib, Quota: 2 * gib},
			true, "64.0 MiB of its 256.0 MiB database is free (25%)"},
		{"a quarter free but less than 64 MiB is not", DefaultRule(), Usage{DBSize: 200 * mib, InUse: 140 * mib, Quota: 2 * gib},
			false, "60.0 MiB of its 200.0 MiB database is free (30%); due at 25% and 64.0 MiB, or at 80% of the quota"},
		{"64 MiB free of a large file is not a quarter", DefaultRule(), Usage{DBSize: 1 * gib, InUse: 900 * mib, Quota: 8 * gib},
			false, "124.0 MiB of its 1.0 GiB database is free (12%); due at 25% and 64.0 MiB, or at 80% of the quota"},
		{"near the quota with something to give back is due", DefaultRule(), Usage{DBSize: 1700 * mib, InUse: 1500 * mib, Quota: 2 * gib},
			true, "its 1.7 GiB database uses 83% of the 2.0 GiB quota, and 200.0 MiB of it is free"},
		{"near the quota with nothing to give back is not: defragmenting would not help", DefaultRule(), Usage{DBSize: 1700 * mib, InUse: 1690 * mib, Quota: 2 * gib},
			false, "10.0 MiB of its 1.7 GiB database is free (1%); due at 25% and 64.0 MiB, or at 80% of the quota"},
		{"a small quota asks for a tenth of itself, not 64 MiB", DefaultRule(), Usage{DBSize: 40 * mib, InUse: 35 * mib, Quota: 45 * mib},
			true, "its 40.0 MiB database uses 89% of the 45.0 MiB quota, and 5.0 MiB of it is free"},
		{"an unknown quota switches the quota arm off", DefaultRule(), Usage{DBSize: 40 * mib, InUse: 35 * mib},
			false, "5.0 MiB of its 40.0 MiB database is free (12%); due at 25% and 64.0 MiB, or at 80% of the quota"},
		{"thresholds from the spec", Rule{FreePercent: 10, MinReclaim: mib, QuotaPercent: 99}, Usage{DBSize: 20 * mib, InUse: 17 * mib, Quota: gib},
			true, "3.0 MiB of its 20.0 MiB database is free (15%)"},
		{"an empty member is never due", Rule{FreePercent: 1, QuotaPercent: 1}, Usage{},
			false, "0 B of its 0 B database is free (0%); due at 1% and 0 B, or at 1% of the quota"},
		{"a report of more in use than the file holds frees nothing", DefaultRule(), Usage{DBSize: 100 * mib, InUse: 120 * mib, Quota: 110 * mib},
			false, "0 B of its 100.0 MiB database is free (0%); due at 25% and 64.0 MiB, or at 80% of the quota"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			v := tc.rule.Evaluate(tc.usage)
			g.Expect(v.Due).To(Equal(tc.due))
			g.Expect(v.Why).To(Equal(tc.why))
		})
	}
}

func TestFormatBytes(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	g.Expect(FormatBytes(0)).To(Equal("0 B"))
	g.Expect(FormatBytes(1023)).To(Equal("1023 B"))
	g.Expect(FormatBytes(1536)).To(Equal("1.5 KiB"))
	g.Expect(FormatBytes(300 * mib)).To(Equal("300.0 MiB"))
	g.Expect(FormatBytes(2 * gib)).To(Equal("2.0 GiB"))
}
