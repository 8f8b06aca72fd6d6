// Package tlssource decides, with no I/O, what one reconcile pass does
// about a TLS section whose certificate source changed on a running
// cluster (spec.tls.<section>.source, secretName or issuerRef): a user's
// Secret to cert-manager, cert-manager to a Secret, one Secret or issuer
// to another.
//
// A switch is a CA change, and it is carried by the same three-pass bundle
// roll as a source's CA rotation (package carotation): the new source's
// certificate is the offered one, its CA the next one. This package only
// keeps the record of which source the members' certificate came from and
// of a switch under way, so that the cluster can say so while it runs and
// when it ends. When the new source's CA is the one the members already
// trust, only the leaf changes, in place, and no member restarts. See
// docs/design/0029-tls-source-switch.md.
package tlssource
