package v1alpha1

// Reasons of the Ready condition about etcd's authentication. They are set
// where every other reason is, in the cluster controller's status, from
// the typed errors of the pass.
const (
	// EnablingAuthReason (Ready=False, Progressing=True): spec.auth asks
	// for authentication and the operator is turning it on.
	EnablingAuthReason = "EnablingAuth"
	// AuthSecretInvalidReason (also Stalled): the Secret with root's
	// password is missing or has no non-empty key password. The message
	// names the Secret, never its content.
	AuthSecretInvalidReason = "AuthSecretInvalid"
	// AuthFailedReason (also Stalled): etcd refused the operator's
	// identity: root's password in the Secret is not root's password in
	// etcd, or the user of the operator's client certificate lacks the
	// root role.
	AuthFailedReason = "AuthFailed"
	// AuthRequiredReason (also Stalled): etcd asks for an identity the
	// operator was not given: authentication is on in etcd (restored from
	// a snapshot of a cluster with it on, or turned on by hand) while
	// spec.auth does not enable it.
	AuthRequiredReason = "AuthRequired"
)
