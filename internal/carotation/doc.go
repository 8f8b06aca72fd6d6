// Package carotation decides the passes of a CA rotation, from what one
// reconcile pass observed; it has no I/O.
//
// etcd reads its certificate and key at every handshake but its CA files
// only at start (etcd issue 11555), so a CA changes in three passes, each
// safe on its own and each resumable after an operator restart, since all
// the state is in the CA's Secret:
//
//  1. TrustingNewCA: a new CA is made and kept beside the signing one; the
//     section's trust bundle holds both, and the rollout restarts members
//     one at a time onto it. Certificates still come from the old CA.
//  2. SwitchingCertificates: once every member runs with both, the new CA
//     signs and the old one is kept only to be trusted; certificates are
//     reissued from the new CA in place (no restart), and the pass waits
//     until every member is seen serving them.
//  3. DroppingOldCA: the old CA is forgotten, the bundle holds the new one
//     alone, and the rollout restarts members onto it.
package carotation
