// Package maintenance decides the care an etcd cluster needs and users
// forget: when a member's database file is worth defragmenting, in what
// order the members go, and how a cluster whose backend quota is exhausted
// (a NOSPACE alarm) is brought back to writable.
//
// It is pure. The cluster controller and kubectl etcd defrag observe the
// members, this package decides, and they act; both use the same rule and
// the same order, so what the plugin reports is what the operator would do.
package maintenance
