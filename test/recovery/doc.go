// Package recovery proves a disaster recovery from a survivor on real etcd
// processes on loopback: the values the operator hands a survivor through
// its startup ConfigMap make it a one-member cluster on its own data, under
// the same cluster ID, and the cluster grows back through learners.
//
// The package holds tests only; nothing in the product imports it.
package recovery
