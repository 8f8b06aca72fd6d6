// Package netpol builds and applies a cluster's NetworkPolicy, which lets
// into the members' ports only what needs them: on the client port the
// operator, the cluster's snapshot Jobs, its members and the clients the
// spec allows; on the peer port the members and the operator; on the metrics port the
// operator and the monitoring namespaces the operator was installed with.
//
// The policy is ingress only, and like every NetworkPolicy it admits
// traffic from the node a member runs on whatever it says, which is what
// keeps the kubelet's probes working. Build is pure; Sync and Delete make
// the live object match it and write nothing when it already does.
package netpol
