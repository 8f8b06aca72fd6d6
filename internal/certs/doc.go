// Package certs builds and judges the certificates of an etcd cluster's TLS,
// with no I/O: CA and leaf certificates, the names a member's certificate
// must carry, when a certificate is due for renewal, and the trust bundles a
// CA rotation rolls through (trust old and new, switch the certificates,
// drop the old).
//
// Times are always passed in, so callers and tests decide the clock.
package certs
