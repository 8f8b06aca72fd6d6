package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newBackup(t *testing.T) (*BackupRecorder, *prometheus.Registry) {
	t.Helper()
	r := NewBackupRecorder()
	reg := prometheus.NewPedanticRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	return r, reg
}

func TestSnapshotMetrics(t *testing.T) {
	r, reg := newBackup(t)
	at := time.Unix(1_800_000_000, 0)
	r.SnapshotSucceeded("demo", "main", at, 4096, 1500*time.Millisecond)
	// An older snapshot completing later does not move the gauges back.
	r.SnapshotSucceeded("demo", "main", at.Add(-time.Hour), 1, time.Second)
	r.SnapshotFailed("demo", "main", "CredentialsInvalid")
	expected := `
# HELP etcd_operator_snapshot_last_duration_seconds How long the cluster's newest successful snapshot took, from its Job's start to the metadata written.
# TYPE etcd_operator_snapshot_last_duration_seconds gauge
etcd_operator_snapshot_last_duration_seconds{cluster="main",namespace="demo"} 1.5
# HELP etcd_operator_snapshot_last_size_bytes Size in bytes of the cluster's newest successful snapshot as stored.
# TYPE etcd_operator_snapshot_last_size_bytes gauge
etcd_operator_snapshot_last_size_bytes{cluster="main",namespace="demo"} 4096
# HELP etcd_operator_snapshot_last_success_timestamp_seconds When the cluster's newest successful snapshot completed, in seconds since the epoch.
# TYPE etcd_operator_snapshot_last_success_timestamp_seconds gauge
etcd_operator_snapshot_last_success_timestamp_seconds{cluster="main",namespace="demo"} 1.8e+09
# HELP etcd_operator_snapshots_total Snapshots that ended, by result: Succeeded, or the EtcdSnapshot's failure reason.
# TYPE etcd_operator_snapshots_total counter
etcd_operator_snapshots_total{cluster="main",namespace="demo",result="CredentialsInvalid"} 1
etcd_operator_snapshots_total{cluster="main",namespace="demo",result="Succeeded"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected),
		SnapshotLastDurationName, SnapshotLastSizeName, SnapshotLastSuccessName, SnapshotsName); err != nil {
		t.Fatal(err)
	}
}

func TestScheduleMetrics(t *testing.T) {
	r, reg := newBackup(t)
	r.ObserveSchedule("demo", "hourly", "main", time.Hour, time.Unix(1_800_000_000, 0))
	if n := testutil.CollectAndCount(r.interval); n != 1 {
		t.Fatalf("%d interval series, want 1", n)
	}
	if got := testutil.ToFloat64(r.interval.WithLabelValues("demo", "hourly", "main")); got != 3600 {
		t.Fatalf("interval %v, want 3600", got)
	}
	// Suspending the schedule removes its series: no alert for it.
	r.ObserveSchedule("demo", "hourly", "main", 0, time.Time{})
	if n, err := testutil.GatherAndCount(reg, ScheduleIntervalName, ScheduleLastSuccessName); err != nil || n != 0 {
		t.Fatalf("%d series left (%v) after suspending", n, err)
	}
}

// A cluster that is gone leaves no snapshot series and no memory of its
// newest snapshot: one re-created under the name reports its own, older or
// not, and another cluster's series stay.
func TestSnapshotMetricsAreDroppedWithTheCluster(t *testing.T) {
	r, reg := newBackup(t)
	at := time.Unix(1_800_000_000, 0)
	r.SnapshotSucceeded("demo", "main", at, 4096, time.Second)
	r.SnapshotFailed("demo", "main", "CredentialsInvalid")
	r.SnapshotSucceeded("demo", "other", at, 1, time.Second)

	r.ForgetCluster("demo", "main")
	if n := r.remembered(); n != 1 {
		t.Fatalf("%d clusters remembered, want only the other one", n)
	}
	for _, c := range []prometheus.Collector{r.lastSuccess, r.lastSize, r.lastDuration, r.snapshots} {
		if n := testutil.CollectAndCount(c); n != 1 {
			t.Fatalf("%d series left, want only the other cluster's", n)
		}
	}
	r.SnapshotSucceeded("demo", "main", at.Add(-time.Hour), 1, time.Second)
	if got := testutil.ToFloat64(r.lastSuccess.WithLabelValues("demo", "main")); got != float64(at.Add(-time.Hour).Unix()) {
		t.Fatalf("last success %v: the gone cluster's newest snapshot still held the gauge back", got)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}
