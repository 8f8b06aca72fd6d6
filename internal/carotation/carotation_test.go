package carotation

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

var (
	t0   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	year = 365 * 24 * time.Hour
	day  = 24 * time.Hour
)

// steady is a section with a five-year CA issued at t0 and 90-day leaves,
// every member on its bundle.
func steady(now time.Time) Input {
	return Input{NotBefore: t0, NotAfter: t0.Add(5 * year), LeafLifetime: 90 * day, Now: now, OnBundle: true}
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   func(Input) Input
		want Decision
	}{
		{"steady", func(in Input) Input { return in }, Decision{}},
		{"asked for", func(in Input) Input { in.Requested = true; return in },
			Decision{Phase: v1alpha1.CARotationTrustingNewCA, Step: Begin}},
		{"pass 1: members still rolling onto both CAs", func(in Input) Input { in.Next, in.OnBundle = true, false; return in },
			Decision{Phase: v1alpha1.CARotationTrustingNewCA}},
		{"pass 1 done: switch", func(in Input) Input { in.Next = true; return in },
			Decision{Phase: v1alpha1.CARotationSwitchingCertificates, Step: Switch}},
		{"pass 2: not every member serves the new certificates yet", func(in Input) Input { in.Previous = true; return in },
			Decision{Phase: v1alpha1.CARotationSwitchingCertificates}},
		{"pass 2 done: drop", func(in Input) Input { in.Previous, in.Switched = true, true; return in },
			Decision{Phase: v1alpha1.CARotationDroppingOldCA, Step: Drop}},
		{"pass 3: members rolling onto the new CA alone", func(in Input) Input { in.OnBundle, in.Behind = false, true; return in },
			Decision{Phase: v1alpha1.CARotationDroppingOldCA}},
		{"a request during pass 3 waits for its end", func(in Input) Input { in.OnBundle, in.Behind, in.Requested = false, true, true; return in },
			Decision{Phase: v1alpha1.CARotationDroppingOldCA}},
		{"a request while a restart is in flight waits for it", func(in Input) Input { in.OnBundle, in.Requested = false, true; return in },
			Decision{}},
		{"a request during pass 1 is no second new CA", func(in Input) Input { in.Next, in.OnBundle, in.Requested = true, false, true; return in },
			Decision{Phase: v1alpha1.CARotationTrustingNewCA}},
		{"nearing expiry", func(in Input) Input { in.Now = t0.Add(4*year + day); return in },
			Decision{Phase: v1alpha1.CARotationTrustingNewCA, Step: Begin, Expiring: true}},
		{"a request during a version rollout between restarts waits for its end", func(in Input) Input { in.Requested, in.Rolling = true, true; return in },
			Decision{Wait: WaitRollout}},
		{"nearing expiry during another rollout waits for its end", func(in Input) Input { in.Now, in.Rolling = t0.Add(4*year+day), true; return in },
			Decision{Wait: WaitRollout}},
		{"too near its end to wait: begins during the rollout", func(in Input) Input { in.Now, in.Rolling = t0.Add(4*year+183*day), true; return in },
			Decision{Phase: v1alpha1.CARotationTrustingNewCA, Step: Begin, Expiring: true, DuringRollout: true}},
		{"a request too near the end begins during the rollout, said as expiring", func(in Input) Input {
			in.Now, in.Rolling, in.Requested = t0.Add(4*year+183*day), true, true
			return in
		}, Decision{Phase: v1alpha1.CARotationTrustingNewCA, Step: Begin, Expiring: true, DuringRollout: true}},
		{"another rollout and nothing due: nothing to wait for", func(in Input) Input { in.Rolling = true; return in }, Decision{}},
		{"paused: a rotation still begins (its restarts wait on the pause)", func(in Input) Input { in.Requested, in.Paused = true, true; return in },
			Decision{Phase: v1alpha1.CARotationTrustingNewCA, Step: Begin}},
		{"paused: pass 1 done, the switch waits", func(in Input) Input { in.Next, in.Paused = true, true; return in },
			Decision{Phase: v1alpha1.CARotationTrustingNewCA, Wait: WaitPaused}},
		{"paused: pass 2 done, the old CA is dropped (its restarts wait on the pause)", func(in Input) Input {
			in.Previous, in.Switched, in.Paused = true, true, true
			return in
		}, Decision{Phase: v1alpha1.CARotationDroppingOldCA, Step: Drop}},
		{"kept: pass 2 done, the old CA stays until the annotation goes", func(in Input) Input { in.Previous, in.Switched, in.KeepOld = true, true, true; return in },
			Decision{Phase: v1alpha1.CARotationSwitchingCertificates, Wait: WaitKeepOld}},
		{"kept: pass 2 still waiting for the members is pass 2 as ever", func(in Input) Input { in.Previous, in.KeepOld = true, true; return in },
			Decision{Phase: v1alpha1.CARotationSwitchingCertificates}},
		{"kept: pass 1 runs and switches", func(in Input) Input { in.Next, in.KeepOld = true, true; return in },
			Decision{Phase: v1alpha1.CARotationSwitchingCertificates, Step: Switch}},
		{"kept: a rotation still begins", func(in Input) Input { in.Requested, in.KeepOld = true, true; return in },
			Decision{Phase: v1alpha1.CARotationTrustingNewCA, Step: Begin}},
		{"kept: pass 3 already begun goes on", func(in Input) Input { in.OnBundle, in.Behind, in.KeepOld = false, true, true; return in },
			Decision{Phase: v1alpha1.CARotationDroppingOldCA}},
		{"a rotation under way goes on during another rollout", func(in Input) Input { in.Previous, in.Switched, in.Rolling = true, true, true; return in },
			Decision{Phase: v1alpha1.CARotationDroppingOldCA, Step: Drop}},
		// A source (a user's Secret, cert-manager) brings the next CA:
		// the same passes, begun by the offer.
		{"a source offers a new CA", func(in Input) Input { in.Offered = true; return in },
			Decision{Phase: v1alpha1.CARotationTrustingNewCA, Step: Begin}},
		{"a source's new CA, with no expiry known (the source renews its CA)", func(in Input) Input {
			in.Offered, in.NotBefore, in.NotAfter = true, time.Time{}, time.Time{}
			return in
		}, Decision{Phase: v1alpha1.CARotationTrustingNewCA, Step: Begin}},
		{"a source's new CA during another rollout waits for its end", func(in Input) Input {
			in.Offered, in.Rolling, in.NotBefore, in.NotAfter = true, true, time.Time{}, time.Time{}
			return in
		}, Decision{Wait: WaitRollout}},
		{"a source's CA changed again during pass 2: the rotation ends first", func(in Input) Input { in.Offered, in.Previous = true, true; return in },
			Decision{Phase: v1alpha1.CARotationSwitchingCertificates}},
		{"a source's CA changed again during pass 3: it waits for its end", func(in Input) Input {
			in.Offered, in.OnBundle, in.Behind = true, false, true
			return in
		}, Decision{Phase: v1alpha1.CARotationDroppingOldCA}},
		{"a source's offer, paused: recorded; the restarts wait on the pause", func(in Input) Input { in.Offered, in.Paused = true, true; return in },
			Decision{Phase: v1alpha1.CARotationTrustingNewCA, Step: Begin}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(Decide(tc.in(steady(t0.Add(day))))).To(Equal(tc.want))
		})
	}
}

func TestDue(t *testing.T) {
	g := NewWithT(t)
	// Five years, 90-day leaves: a fifth (a year) is the longer margin.
	g.Expect(Due(t0, t0.Add(5*year), 90*day, t0.Add(4*year-day))).To(BeFalse())
	g.Expect(Due(t0, t0.Add(5*year), 90*day, t0.Add(4*year+day))).To(BeTrue())
	g.Expect(DueAt(t0, t0.Add(5*year), 90*day)).To(Equal(t0.Add(4 * year)))
	// A 10-hour CA with 5-hour leaves: the leaf's lifetime is longer than
	// a fifth (2 h), so the rotation starts 5 hours before the end, before
	// any leaf would be cut short.
	g.Expect(Due(t0, t0.Add(10*time.Hour), 5*time.Hour, t0.Add(5*time.Hour-time.Minute))).To(BeFalse())
	g.Expect(Due(t0, t0.Add(10*time.Hour), 5*time.Hour, t0.Add(5*time.Hour+time.Minute))).To(BeTrue())
	g.Expect(Due(time.Time{}, time.Time{}, time.Hour, t0)).To(BeFalse(), "no CA, nothing due")
}

func TestUrgent(t *testing.T) {
	g := NewWithT(t)
	// Due a year before the end: urgent half a year before it.
	half := 5*year - year/2
	g.Expect(UrgentAt(t0, t0.Add(5*year), 90*day)).To(Equal(t0.Add(half)))
	g.Expect(Urgent(t0, t0.Add(5*year), 90*day, t0.Add(half-time.Minute))).To(BeFalse())
	g.Expect(Urgent(t0, t0.Add(5*year), 90*day, t0.Add(half+time.Minute))).To(BeTrue())
	// The leaf's 5 hours is the margin of a 10-hour CA: urgent 2.5 h before its end.
	g.Expect(Urgent(t0, t0.Add(10*time.Hour), 5*time.Hour, t0.Add(7*time.Hour+29*time.Minute))).To(BeFalse())
	g.Expect(Urgent(t0, t0.Add(10*time.Hour), 5*time.Hour, t0.Add(7*time.Hour+31*time.Minute))).To(BeTrue())
	g.Expect(Urgent(time.Time{}, time.Time{}, time.Hour, t0)).To(BeFalse())
}
