package certs

// Phases of a section's trust, as status.tls reports them.
const (
	PhaseSteady                = "Steady"
	PhaseTrustingNewCA         = "TrustingNewCA"
	PhaseSwitchingCertificates = "SwitchingCertificates"
	PhaseDroppingOldCA         = "DroppingOldCA"
)

// TrustInput is what a section's trust is decided from.
type TrustInput struct {
	// Wanted are the CAs the section's certificates come from now: the
	// source's CA, and for the client side the CA of the operator's own
	// client certificate.
	Wanted Bundle
	// InUse are the CAs of certificates that may still be presented to a
	// member: those in the members' Secrets, those the members were seen
	// serving, and, for a member that could not be asked, every CA it
	// trusts.
	InUse Bundle
	// Loaded are the bundles the members that speak TLS run with, one per
	// member; a member's bundle counts only once its Pod runs it. None
	// while no member speaks TLS.
	Loaded []Bundle
}

// TrustPlan is the decision.
type TrustPlan struct {
	// Target is the bundle every member must trust; a member that runs
	// another is outdated and is rolled.
	Target Bundle
	// Switch says certificates from the wanted CAs may be handed out: every
	// member that speaks TLS trusts them. Until then members keep
	// certificates from a CA they all trust.
	Switch bool
	Phase  string
}

// PlanTrust is the three-pass CA roll in one rule: the target trusts every
// wanted CA and every CA still in use. A new CA therefore joins the bundle
// first (members are rolled to trust both); certificates switch to it only
// once every member trusts it (no restart: etcd reads its certificate files
// at every handshake); and an old CA leaves the bundle only once no
// certificate of it is presented anywhere (members are rolled again).
func PlanTrust(in TrustInput) TrustPlan {
	target := NewBundle(in.Wanted, in.InUse)
	plan := TrustPlan{Target: target, Switch: true, Phase: PhaseSteady}
	if len(in.Loaded) == 0 {
		return plan
	}
	common := in.Loaded[0]
	for _, l := range in.Loaded[1:] {
		common = common.Intersect(l)
	}
	plan.Switch = common.ContainsAll(in.Wanted)
	switch {
	case !plan.Switch:
		plan.Phase = PhaseTrustingNewCA
	case !in.Wanted.ContainsAll(in.InUse):
		plan.Phase = PhaseSwitchingCertificates
	default:
		for _, l := range in.Loaded {
			if !l.Equal(target) {
				plan.Phase = PhaseDroppingOldCA
				break
			}
		}
	}
	return plan
}
