// Package pod builds and creates the Pod that runs one etcd member.
//
// A member's Pod is written once, from the EtcdMember it belongs to, and never
// re-templated: the EtcdMember already carries a frozen copy of the cluster's
// template, and etcd's bootstrap flags only mean anything on a member's first
// start. A change to a member therefore means a new member, not an edited Pod.
//
// Build is a pure function of its Params so the whole Pod can be checked in
// table tests without an API server; Ensure and SetRoleLabel are the only
// functions that talk to Kubernetes.
package pod
