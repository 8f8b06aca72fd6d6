// Package etcdcluster reconciles EtcdCluster objects. It decides which members
// exist and drives etcd's membership through single-seed bootstrap,
// learner-first scale-up and quorum-safe scale-down, one change at a time.
// Pods and volumes are the etcdmember controller's concern.
//
// Files: reconciler.go orchestrates; scope.go gathers what one pass observes;
// survey.go asks etcd for its membership and each member's health;
// phases.go runs the phase list; target.go latches the spec into
// status.observed; bootstrap.go forms the cluster; members.go keeps member
// status in step with etcd and finishes half-done adds and promotions;
// scale.go adds and removes members; status.go computes every condition.
package etcdcluster
