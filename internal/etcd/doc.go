// Package etcd is the operator's only door to a running etcd cluster.
//
// It is the one package in the product that imports go.etcd.io/etcd/client/v3.
// Controllers program against the narrow Client and Dialer interfaces and our
// own value types, so that
//   - reconciler tests can swap in the in-memory fake (package etcd/fake),
//   - clientv3 upgrades and its changing error shapes stay contained here, and
//   - every call is bounded by its own timeout, because a reconciler that hangs
//     on one unreachable member stops healing all the others.
//
// Errors returned by Client methods are *CallError values wrapping what etcd
// said. Callers decide what to do through the Is* classifiers in errors.go
// rather than by inspecting messages; the classifiers understand both the
// client-side rpctypes values and raw gRPC status errors.
package etcd
