package etcdversion_test

import (
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/internal/etcdversion"
)

func versions(s string) []etcdversion.Version {
	var out []etcdversion.Version
	for _, f := range strings.Fields(s) {
		out = append(out, etcdversion.MustParse(f))
	}
	return out
}

func TestDecide(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		members   string
		downgrade string // etcd's enabled downgrade target, if any
		target    string

		kind    etcdversion.Kind
		enable  bool
		cancel  bool
		reason  string
		message []string
	}{
		// Patches.
		{name: "nothing to do", members: "3.6.16 3.6.16 3.6.16", target: "3.6.16", kind: etcdversion.KindNone},
		{name: "no members yet", members: "", target: "3.6.16", kind: etcdversion.KindNone},
		{name: "patch upgrade", members: "3.6.15 3.6.15 3.6.15", target: "3.6.16", kind: etcdversion.KindPatch},
		{name: "patch downgrade within a minor", members: "3.6.16 3.6.16 3.6.16", target: "3.6.14", kind: etcdversion.KindPatch},
		{name: "mixed patches, back to the older one", members: "3.6.15 3.6.16 3.6.16", target: "3.6.15", kind: etcdversion.KindPatch},
		{name: "3.5 below the floor may still take patches", members: "3.5.20 3.5.20 3.5.20", target: "3.5.35", kind: etcdversion.KindPatch},

		// Upgrades.
		{name: "3.5 to 3.6", members: "3.5.35 3.5.35 3.5.35", target: "3.6.16", kind: etcdversion.KindUpgrade},
		{name: "3.6 to 3.7", members: "3.6.16 3.6.16 3.6.16", target: "3.7.3", kind: etcdversion.KindUpgrade},
		{name: "3.5 at exactly the floor", members: "3.5.32 3.5.32 3.5.32", target: "3.6.0", kind: etcdversion.KindUpgrade},
		{name: "mid-upgrade, carrying on", members: "3.5.35 3.6.16 3.6.16", target: "3.6.16", kind: etcdversion.KindUpgrade},
		{name: "mid-upgrade, on to a newer patch", members: "3.5.35 3.6.15 3.6.15", target: "3.6.16", kind: etcdversion.KindUpgrade},
		{
			name: "skipped minor", members: "3.5.35 3.5.35 3.5.35", target: "3.7.3",
			reason:  etcdversion.ReasonSkippedMinor,
			message: []string{"etcd 3.5.35 cannot be upgraded to 3.7.3 in one step", "upgrade to the latest 3.6 release first, then to 3.7.3"},
		},
		{
			name: "skipped minor from a mixed cluster", members: "3.5.35 3.6.16 3.6.16", target: "3.7.3",
			reason:  etcdversion.ReasonSkippedMinor,
			message: []string{"etcd 3.5.35 cannot be upgraded to 3.7.3", "latest 3.6 release first"},
		},
		{
			name: "3.5 below the floor before 3.6", members: "3.5.31 3.5.35 3.5.20", target: "3.6.16",
			reason:  etcdversion.ReasonBelowMinimumPatch,
			message: []string{"etcd 3.5.20 and 3.5.31 cannot be upgraded to 3.6.16", "every 3.5 member to run 3.5.32 or later first", "upgrade to the latest 3.5 release, then to 3.6.16"},
		},
		{
			name: "a mixed cluster with a 3.5 member below the floor", members: "3.5.31 3.6.16 3.6.16", target: "3.6.16",
			reason:  etcdversion.ReasonBelowMinimumPatch,
			message: []string{"etcd 3.5.31 cannot be upgraded to 3.6.16"},
		},

		// Rollbacks of a mixed cluster.
		{name: "mid-upgrade, back to 3.5", members: "3.5.35 3.6.16 3.6.16", target: "3.5.35", kind: etcdversion.KindRollback},
		{name: "mid-upgrade, back to 3.6", members: "3.6.16 3.7.3 3.7.3", target: "3.6.16", kind: etcdversion.KindRollback},
		{
			name: "mid-upgrade, back to a 3.5 below the floor", members: "3.5.35 3.6.16", target: "3.5.20",
			reason:  etcdversion.ReasonBelowMinimumPatch,
			message: []string{"etcd 3.6.16 cannot be downgraded to 3.5.20", "must run 3.5.32 or later"},
		},
		{
			name: "mid-downgrade, turned back", members: "3.6.16 3.7.3 3.7.3", downgrade: "3.6.0", target: "3.7.3",
			kind: etcdversion.KindRollback, cancel: true,
		},

		// Downgrades.
		{name: "3.7 to 3.6", members: "3.7.3 3.7.3 3.7.3", target: "3.6.16", kind: etcdversion.KindDowngrade, enable: true},
		{name: "3.6 to 3.5", members: "3.6.16 3.6.16 3.6.16", target: "3.5.35", kind: etcdversion.KindDowngrade, enable: true},
		{name: "downgrade enabled, no member moved yet", members: "3.7.3 3.7.3 3.7.3", downgrade: "3.6.0", target: "3.6.16", kind: etcdversion.KindDowngrade},
		{name: "mid-downgrade, carrying on", members: "3.6.16 3.7.3 3.7.3", downgrade: "3.6.0", target: "3.6.16", kind: etcdversion.KindDowngrade},
		{
			name: "downgrade enabled, turned back before any member moved", members: "3.7.3 3.7.3 3.7.3", downgrade: "3.6.0", target: "3.7.3",
			kind: etcdversion.KindNone, cancel: true,
		},
		{
			name: "an old downgrade left enabled under an upgrade", members: "3.6.16 3.6.16 3.6.16", downgrade: "3.5.0", target: "3.7.3",
			kind: etcdversion.KindUpgrade, cancel: true,
		},
		{
			name: "downgrade two minors", members: "3.7.3 3.7.3 3.7.3", target: "3.5.35",
			reason:  etcdversion.ReasonDowngradeTooFar,
			message: []string{"etcd 3.7.3 cannot be downgraded to 3.5.35 in one step", "downgrade to 3.6 first"},
		},
		{
			name: "downgrade two minors from a mixed cluster", members: "3.6.16 3.7.3", target: "3.5.35",
			reason: etcdversion.ReasonDowngradeTooFar, message: []string{"etcd 3.7.3 cannot be downgraded to 3.5.35"},
		},
		{
			name: "downgrade to a 3.5 below the floor", members: "3.6.16 3.6.16 3.6.16", target: "3.5.31",
			reason:  etcdversion.ReasonBelowMinimumPatch,
			message: []string{"etcd 3.6.16 cannot be downgraded to 3.5.31", "3.5.32 or later"},
		},

		// What cannot be reasoned about.
		{
			name: "members two minors apart", members: "3.5.35 3.7.3 3.7.3", target: "3.6.16",
			reason: etcdversion.ReasonVersionsTooFarApart, message: []string{"the members run etcd 3.5.35 and 3.7.3, more than one minor version apart"},
		},
		{
			name: "unsupported major", members: "3.6.16", target: "4.0.0",
			reason: etcdversion.ReasonUnsupportedVersion, message: []string{"etcd 4.0.0 is not supported: the operator runs etcd 3.5, 3.6, 3.7"},
		},
		{
			name: "unsupported minor", members: "3.7.3", target: "3.8.0",
			reason: etcdversion.ReasonUnsupportedVersion, message: []string{"etcd 3.8.0 is not supported"},
		},
		{
			name: "a member on an unsupported minor", members: "3.4.33 3.5.35", target: "3.5.35",
			reason: etcdversion.ReasonUnsupportedVersion, message: []string{"etcd 3.4.33 is not supported"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			c := etcdversion.Cluster{Members: versions(tc.members)}
			if tc.downgrade != "" {
				d := etcdversion.MustParse(tc.downgrade)
				c.DowngradeTarget = &d
			}
			target := etcdversion.MustParse(tc.target)
			plan, err := etcdversion.Decide(c, target)
			if tc.reason != "" {
				var refusal *etcdversion.Refusal
				g.Expect(errors.As(err, &refusal)).To(BeTrue(), "want a refusal, got plan %+v, error %v", plan, err)
				g.Expect(refusal.Reason).To(Equal(tc.reason))
				for _, m := range tc.message {
					g.Expect(refusal.Error()).To(ContainSubstring(m))
				}
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(plan).To(Equal(etcdversion.Plan{Kind: tc.kind, Target: target, EnableDowngrade: tc.enable, CancelDowngrade: tc.cancel}))
		})
	}
}
