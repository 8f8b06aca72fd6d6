package v1alpha1

// Reasons of the Ready condition about TLS. They are set where every other
// reason is, in the cluster controller's status, from what the pass found
// reading the certificate sources.
const (
	// TLSSourceInvalidReason (also Stalled): a certificate source cannot be
	// used as it stands: the user's Secret is missing, lacks tls.crt,
	// tls.key or ca.crt, or holds a certificate that does not name a
	// member or that its CA did not sign. The message names the Secret and
	// what is wrong. Members that run keep running; no new member is
	// created until it is fixed.
	TLSSourceInvalidReason = "TLSSourceInvalid"
	// TLSSourcePendingReason (not Stalled): certificates are being issued
	// (cert-manager has not issued a Certificate yet). No member whose
	// certificates are missing is started meanwhile.
	TLSSourcePendingReason = "TLSSourcePending"
	// CARotatingReason (Ready=False, Progressing=True): an operator-managed
	// CA is being rotated by the three-pass bundle roll. The message says
	// the pass of each section: 1 of 3, members restart one at a time to
	// trust the old and the new CA; 2 of 3, certificates are reissued from
	// the new CA and the operator waits until every member serves them
	// (no restart); 3 of 3, members restart one at a time to trust the new
	// CA alone. status.tls.<section>.rotation holds the same per section.
	CARotatingReason = "CARotating"
	// TLSTransitioningReason (Ready=False, Progressing=True): TLS is being
	// turned on for the running cluster, in two passes of one restart per
	// member (docs/design/0023-plain-to-tls.md). The message says the
	// phase (status.tls.transition.phase) and what the next step waits for
	// (status.tls.transition.wait): at ClientsMaySwitch with
	// PlaintextInUse, clients should move to https and the user then sets
	// the etcd.quorumctl.io/release-plaintext annotation.
	TLSTransitioningReason = "TLSTransitioning"
	// TLSSourceSwitchingReason (Ready=False, Progressing=True): a
	// section's certificate source changed on the running cluster (a
	// Secret to cert-manager, say) and the new source's CA differs from
	// the one the members trust, so the change is rolled by the three
	// passes of a CA rotation (docs/design/0029-tls-source-switch.md).
	// The message names each section's old and new source and the pass,
	// as CARotating's does. A new source of the CA the members trust
	// takes one pass: the certificates change in place, without restarts,
	// and this reason is not seen.
	TLSSourceSwitchingReason = "TLSSourceSwitching"
)
