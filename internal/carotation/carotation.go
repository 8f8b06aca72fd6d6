package carotation

import (
	"time"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// Stored is a section's rotation state, as its CA Secret holds it.
type Stored struct {
	// Next: a new CA is kept beside the signing one (pass 1).
	Next bool
	// Previous: the CA the signing one replaced is still trusted (pass 2).
	Previous bool
}

// Input is what a pass observed of one section.
type Input struct {
	Stored
	// Requested: a rotation was asked for and not acted on yet.
	Requested bool
	// Offered: the next CA is not made by the operator but brought by the
	// section's source (a user's Secret, cert-manager's), whose ca.crt no
	// longer matches the CA the members' certificate comes from. It
	// begins a rotation as a request does; Begin then records the offered
	// CA as next instead of making one.
	Offered bool
	// NotBefore and NotAfter bound the signing CA's validity.
	NotBefore, NotAfter time.Time
	// LeafLifetime is the lifetime of the certificates the CA signs.
	LeafLifetime time.Duration
	Now          time.Time
	// OnBundle: every member's spec names the section's trust bundle, its
	// Pod mounts it, and no restart is in flight.
	OnBundle bool
	// Behind: some member's spec names another trust bundle than the
	// section's, which the rollout is bringing it off.
	Behind bool
	// Switched: every member was seen, this pass, serving certificates of
	// the signing CA on the section's ports.
	Switched bool
	// Rolling: another rollout is in progress, some member not yet on the
	// target's template (a new version, say).
	Rolling bool
	// Paused: spec.rollout.paused is set.
	Paused bool
	// KeepOld: v1alpha1.KeepOldCAAnnotation is set.
	KeepOld bool
}

// Step is what the pass does to the section's CA Secret.
type Step string

const (
	// Stay: nothing to do.
	Stay Step = ""
	// Begin: make a new CA and keep it as next.
	Begin Step = "Begin"
	// Switch: next signs from now on; the signing CA is kept as previous.
	Switch Step = "Switch"
	// Drop: forget previous.
	Drop Step = "Drop"
)

// Decision is the section's phase and step.
type Decision struct {
	// Phase is the pass in progress (v1alpha1.CARotation*), "" for none.
	Phase string
	Step  Step
	// Expiring: the step begins a rotation because the CA nears its end.
	Expiring bool
	// DuringRollout: the step begins a rotation while another rollout is
	// in progress, since the CA is too close to its end to wait.
	DuringRollout bool
	// Wait says what holds the section, if anything does.
	Wait Wait
}

// Wait is what a section waits on that is not the rotation's own work.
type Wait string

const (
	// WaitNone: nothing holds the section.
	WaitNone Wait = ""
	// WaitPaused: spec.rollout.paused holds the switch to the new CA's
	// certificates (pass 2), as it holds the restarts of passes 1 and 3.
	WaitPaused Wait = "Paused"
	// WaitKeepOld: v1alpha1.KeepOldCAAnnotation holds dropping the old CA
	// (pass 3) once every member serves certificates of the new one.
	WaitKeepOld Wait = "KeepOldCA"
	// WaitRollout: a rotation is due or asked for, and waits for another
	// rollout to end.
	WaitRollout Wait = "Rollout"
)

// Decide is the three-pass roll for one section. A step is taken only from
// a settled state: a pass moves on once the members are where the pass put
// them, and a new rotation begins only once the last one has ended and no
// other rollout is in progress, whether it was asked for or the CA nears
// its end; one change at a time, so that a member that does not come back
// is held for one reason. A CA too close to its end to wait (Urgent)
// begins during another rollout: the members that rollout has still to
// restart restart once, onto both changes.
//
// spec.rollout.paused holds every step that changes what the members
// present or trust: the restarts of passes 1 and 3 (the rollout's, which
// the pause holds between members) and the switch of pass 2, the moment
// the members start serving certificates of the new CA, which clients
// outside the operator must trust by then. Beginning a rotation and
// dropping the old CA write only the CA Secret and the trust bundle; the
// restarts they call for wait on the pause.
//
// v1alpha1.KeepOldCAAnnotation holds the one point the pause cannot: the
// end of pass 2, every member serving certificates of the new CA and still
// trusting the old one, where a client outside the operator that does not
// pick up its reissued certificate by itself is handed it. The pause holds
// pass 1's restarts as well, so it can be set to catch that point only in
// the seconds pass 2 takes.
func Decide(in Input) Decision {
	switch {
	case in.Next && in.OnBundle && in.Paused:
		return Decision{Phase: v1alpha1.CARotationTrustingNewCA, Wait: WaitPaused}
	case in.Next && in.OnBundle:
		return Decision{Phase: v1alpha1.CARotationSwitchingCertificates, Step: Switch}
	case in.Next:
		return Decision{Phase: v1alpha1.CARotationTrustingNewCA}
	case in.Previous && in.Switched && in.KeepOld:
		return Decision{Phase: v1alpha1.CARotationSwitchingCertificates, Wait: WaitKeepOld}
	case in.Previous && in.Switched:
		return Decision{Phase: v1alpha1.CARotationDroppingOldCA, Step: Drop}
	case in.Previous:
		return Decision{Phase: v1alpha1.CARotationSwitchingCertificates}
	case in.Behind:
		// Members are being rolled off a bundle that is not the
		// section's: the old CA leaving, after a rotation.
		return Decision{Phase: v1alpha1.CARotationDroppingOldCA}
	case !in.OnBundle:
		// A restart is in flight: a rotation begins once the members
		// are settled.
		return Decision{}
	}
	due := Due(in.NotBefore, in.NotAfter, in.LeafLifetime, in.Now)
	switch {
	case !in.Requested && !in.Offered && !due:
		return Decision{}
	case in.Rolling && !Urgent(in.NotBefore, in.NotAfter, in.LeafLifetime, in.Now):
		return Decision{Wait: WaitRollout}
	}
	return Decision{Phase: v1alpha1.CARotationTrustingNewCA, Step: Begin, Expiring: (!in.Requested && !in.Offered) || in.Rolling, DuringRollout: in.Rolling}
}

// Due reports whether a CA valid from notBefore to notAfter is to be
// rotated at now: once less than the longer of a leaf's lifetime and a
// fifth of the CA's own lifetime remains.
//
// A leaf never outlives its CA, so from a leaf's lifetime before the CA's
// end every renewal is cut short and renewals come ever closer; rotating
// before then keeps every leaf full-length. A fifth of the CA's lifetime
// (a year of the default five) leaves room for a rotation that stalls (a
// member that does not come back holds the rollout) to be seen and fixed
// long before anything expires.
func Due(notBefore, notAfter time.Time, leafLifetime time.Duration, now time.Time) bool {
	if notAfter.IsZero() {
		return false
	}
	margin := max(leafLifetime, notAfter.Sub(notBefore)/5)
	return notAfter.Sub(now) < margin
}

// DueAt is when Due becomes true, for the pass to come back then.
func DueAt(notBefore, notAfter time.Time, leafLifetime time.Duration) time.Time {
	return notAfter.Add(-max(leafLifetime, notAfter.Sub(notBefore)/5))
}

// Urgent reports whether a due CA is too close to its end to wait for
// another rollout: half of the margin Due leaves is gone. A rotation that
// has waited that long still has as much time left as it waited.
func Urgent(notBefore, notAfter time.Time, leafLifetime time.Duration, now time.Time) bool {
	if notAfter.IsZero() {
		return false
	}
	return notAfter.Sub(now) < max(leafLifetime, notAfter.Sub(notBefore)/5)/2
}

// UrgentAt is when Urgent becomes true.
func UrgentAt(notBefore, notAfter time.Time, leafLifetime time.Duration) time.Time {
	return notAfter.Add(-max(leafLifetime, notAfter.Sub(notBefore)/5) / 2)
}
