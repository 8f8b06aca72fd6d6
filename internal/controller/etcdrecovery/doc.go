// Package etcdrecovery reconciles EtcdRecovery objects: it applies the
// guards of a disaster recovery (internal/recovery) to what each member's
// own endpoint reports, records the plan before anything changes, and then
// follows the recovery that the etcdcluster controller carries out, from
// the EtcdCluster's status.recovery, to its end. It writes the EtcdRecovery's
// status and nothing else: the membership is the etcdcluster controller's.
package etcdrecovery
