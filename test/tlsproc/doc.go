// Package tlsproc proves, against real etcd processes on loopback, what the
// operator's TLS relies on: the TLS flags the operator renders, with
// certificates from internal/certs, make a working cluster with mutual TLS
// (or server TLS only, where clients without a certificate are served); leaf
// certificates are served anew without a restart; the snapshot agent reaches
// a TLS cluster with the operator's client certificate; a running plaintext
// cluster turns TLS on in the two passes of design 0023 under a writer.
//
// The package is test infrastructure: nothing in the product imports it.
package tlsproc
