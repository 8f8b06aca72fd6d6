// Package tlsproc proves, against real etcd processes on loopback, what the
// operator's TLS design relies on: mutual TLS with certificates from
// internal/certs, leaf certificates served anew without a restart, a CA
// rotation member by member under a linearizable workload, the same client
// port serving plaintext and TLS while a running cluster turns to TLS, peer
// URLs moved by MemberUpdate, and etcd authentication through internal/etcd.
//
// The package is test infrastructure: nothing in the product imports it.
package tlsproc
