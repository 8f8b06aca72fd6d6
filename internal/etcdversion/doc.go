// Package etcdversion knows etcd's releases: how to read a version, which
// changes from the versions a cluster's members run to a target version etcd
// supports and by what procedure, and how each release spells the flags the
// operator renders.
//
// Everything here is a pure function of its arguments: the rollout decides
// with it before anything moves, and the Pod builder renders each member's
// flags for that member's own version, so a mixed-version cluster in the
// middle of a rollout never hands a member a flag its binary does not know.
//
// The rules follow etcd's upgrade and downgrade guides; the flag spellings
// were taken from etcd's own sources for the releases the operator supports
// (3.5, 3.6 and 3.7). See docs/design/0004-etcd-version-policy.md.
package etcdversion
