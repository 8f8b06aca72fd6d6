// Package backup holds the decisions of snapshots and restores, free of I/O:
// where a snapshot is stored (keys and locations), what a Job reports
// (Result, Metadata, Code), which member to snapshot, the check of etcd's
// SHA-256 trailer on a snapshot stream, retention, cron ticks, and the
// restore gate. The storage backends are in backup/store; what runs inside
// the snapshot and restore Pods is in backup/agent.
package backup
