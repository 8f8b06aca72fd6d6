// Package chaos runs faults, one after another and some at once, against
// etcd clusters on the local cluster while the linearizability checker's
// clients read and write through every member and the client Service, and
// checks after each fault that the cluster recovered to a state it may be
// in. It is test infrastructure: nothing in the product imports it.
package chaos
