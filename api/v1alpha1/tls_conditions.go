package v1alpha1

// Reasons of the Ready condition about TLS and authentication. Each is also
// Stalled: the operator cannot go on until the input is fixed, and it keeps
// every member running as it is meanwhile.
const (
	// TLSSourceInvalidReason: a certificate source cannot be used as it
	// stands: the user's Secret is missing, lacks tls.crt, tls.key or
	// ca.crt, holds a certificate that does not name a member or that its
	// CA did not sign, or a cert-manager Certificate failed. The message
	// names the object and what is wrong.
	TLSSourceInvalidReason = "TLSSourceInvalid"
	// TLSSourcePendingReason (not Stalled): certificates are being issued
	// (cert-manager has not issued a member's certificate yet).
	TLSSourcePendingReason = "TLSSourcePending"
	// AuthFailedReason: etcd refused the root credentials the operator
	// holds (a wrong password in the root Secret); the message names the
	// Secret, never its content.
	AuthFailedReason = "AuthFailed"
	// AuthSecretInvalidReason: the root Secret named in spec.auth is
	// missing or has no "password".
	AuthSecretInvalidReason = "AuthSecretInvalid"
)
