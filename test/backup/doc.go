// Package backup tests snapshots and restores against real processes on
// loopback: etcd members from the local cluster's binary cache, a real S3
// server (versitygw), and each etcd release's own etcdutl. It runs with the
// integration build tag (make test-integration); nothing imports it.
package backup
