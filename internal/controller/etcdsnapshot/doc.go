// Package etcdsnapshot reconciles EtcdSnapshot objects: it runs each
// snapshot once, in a Job of the operator's own image, one snapshot per
// cluster at a time (oldest first), and copies the Job's typed result into
// the snapshot's status. It never touches storage itself: the Jobs hold the
// credentials, the operator does not.
package etcdsnapshot
