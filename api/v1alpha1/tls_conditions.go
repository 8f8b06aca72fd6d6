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
)
