// Package tlstransition decides the next step of turning TLS on for a
// running cluster, from what one reconcile pass observed; it has no I/O.
//
// A member goes through three states (Pass), each a restart apart:
//
//   - Plain: no TLS.
//   - Both: peer certificates and trust, its peer listener and URL still
//     http (it dials https peers with TLS, http ones in plain), and TLS
//     beside plaintext on its client port.
//   - TLS: https peer and client URLs, https-only listeners; what a cluster
//     created with TLS runs.
//
// Every member is brought to Both, one restart at a time; then the
// operator's own client and the connection info it publishes move to https;
// then, once plaintext clients are released (the user's clients have
// moved), every member is brought to TLS, one at a time, its peer URL moved
// to https in etcd's membership (MemberUpdate) while it is down. See
// docs/design/0023-plain-to-tls.md for why, and for what etcd does.
package tlstransition
