package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Label names of the backup metrics.
const (
	LabelSchedule = "schedule"
	LabelResult   = "result"
)

// Backup metric names. The snapshot series are per cluster, from each
// snapshot that ends; the schedule series are per EtcdSnapshotSchedule, so
// an alert can compare a schedule's last success with its own interval.
const (
	SnapshotLastSuccessName  = "etcd_operator_snapshot_last_success_timestamp_seconds"
	SnapshotLastSizeName     = "etcd_operator_snapshot_last_size_bytes"
	SnapshotLastDurationName = "etcd_operator_snapshot_last_duration_seconds"
	SnapshotsName            = "etcd_operator_snapshots_total"
	ScheduleIntervalName     = "etcd_operator_snapshot_schedule_interval_seconds"
	ScheduleLastSuccessName  = "etcd_operator_snapshot_schedule_last_success_timestamp_seconds"
)

// SnapshotSucceededResult is the result label of a successful snapshot;
// failures carry their EtcdSnapshot reason.
const SnapshotSucceededResult = "Succeeded"

// BackupRecorder owns the backup collectors.
type BackupRecorder struct {
	lastSuccess, lastSize, lastDuration *prometheus.GaugeVec
	snapshots                           *prometheus.CounterVec
	interval, scheduleSuccess           *prometheus.GaugeVec

	mu     sync.Mutex
	newest map[clusterKey]time.Time
}

// NewBackupRecorder makes the collectors.
func NewBackupRecorder() *BackupRecorder {
	cluster := []string{LabelNamespace, LabelCluster}
	schedule := []string{LabelNamespace, LabelSchedule, LabelCluster}
	gauge := func(name, help string, labels []string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	return &BackupRecorder{
		lastSuccess: gauge(SnapshotLastSuccessName,
			"When the cluster's newest successful snapshot completed, in seconds since the epoch.", cluster),
		lastSize: gauge(SnapshotLastSizeName,
			"Size in bytes of the cluster's newest successful snapshot as stored.", cluster),
		lastDuration: gauge(SnapshotLastDurationName,
			"How long the cluster's newest successful snapshot took, from its Job's start to the metadata written.", cluster),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: SnapshotsName,
			Help: "Snapshots that ended, by result: Succeeded, or the EtcdSnapshot's failure reason.",
		}, append(cluster, LabelResult)),
		interval: gauge(ScheduleIntervalName,
			"Seconds between two ticks of an active (not suspended, valid) EtcdSnapshotSchedule.", schedule),
		scheduleSuccess: gauge(ScheduleLastSuccessName,
			"When the schedule's newest successful snapshot completed, or when the schedule was created if none has; seconds since the epoch.", schedule),
		newest: map[clusterKey]time.Time{},
	}
}

func (r *BackupRecorder) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.lastSuccess, r.lastSize, r.lastDuration, r.snapshots, r.interval, r.scheduleSuccess}
}

// Register adds the collectors to reg.
func (r *BackupRecorder) Register(reg prometheus.Registerer) error {
	for _, c := range r.collectors() {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// SnapshotSucceeded records a successful snapshot; an older one completing
// late does not move the gauges back.
func (r *BackupRecorder) SnapshotSucceeded(namespace, cluster string, completed time.Time, size int64, took time.Duration) {
	r.snapshots.WithLabelValues(namespace, cluster, SnapshotSucceededResult).Inc()
	r.mu.Lock()
	defer r.mu.Unlock()
	key := clusterKey{namespace, cluster}
	if completed.Before(r.newest[key]) {
		return
	}
	r.newest[key] = completed
	r.lastSuccess.WithLabelValues(namespace, cluster).Set(float64(completed.Unix()))
	r.lastSize.WithLabelValues(namespace, cluster).Set(float64(size))
	r.lastDuration.WithLabelValues(namespace, cluster).Set(took.Seconds())
}

// SnapshotFailed counts a failed snapshot.
func (r *BackupRecorder) SnapshotFailed(namespace, cluster, reason string) {
	r.snapshots.WithLabelValues(namespace, cluster, reason).Inc()
}

// ForgetCluster deletes a gone cluster's snapshot series and what is
// remembered of its newest snapshot; a cluster re-created under the name
// starts afresh.
func (r *BackupRecorder) ForgetCluster(namespace, cluster string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.newest, clusterKey{namespace, cluster})
	labels := prometheus.Labels{LabelNamespace: namespace, LabelCluster: cluster}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{r.lastSuccess, r.lastSize, r.lastDuration, r.snapshots} {
		v.DeletePartialMatch(labels)
	}
}

// remembered is the number of clusters whose newest snapshot is
// remembered, for tests.
func (r *BackupRecorder) remembered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.newest)
}

// ObserveSchedule sets a schedule's series; an interval of 0 (suspended or
// invalid) removes them, so that no alert fires for it.
func (r *BackupRecorder) ObserveSchedule(namespace, schedule, cluster string, interval time.Duration, lastSuccess time.Time) {
	if interval <= 0 {
		r.ForgetSchedule(namespace, schedule)
		return
	}
	r.interval.WithLabelValues(namespace, schedule, cluster).Set(interval.Seconds())
	r.scheduleSuccess.WithLabelValues(namespace, schedule, cluster).Set(float64(lastSuccess.Unix()))
}

// ForgetSchedule deletes a gone schedule's series.
func (r *BackupRecorder) ForgetSchedule(namespace, schedule string) {
	labels := prometheus.Labels{LabelNamespace: namespace, LabelSchedule: schedule}
	r.interval.DeletePartialMatch(labels)
	r.scheduleSuccess.DeletePartialMatch(labels)
}

var defaultBackupRecorder = NewBackupRecorder()

func init() {
	if err := defaultBackupRecorder.Register(ctrlmetrics.Registry); err != nil {
		panic(err)
	}
}

// SnapshotSucceeded records on the operator's recorder.
func SnapshotSucceeded(namespace, cluster string, completed time.Time, size int64, took time.Duration) {
	defaultBackupRecorder.SnapshotSucceeded(namespace, cluster, completed, size, took)
}

// SnapshotFailed records on the operator's recorder.
func SnapshotFailed(namespace, cluster, reason string) {
	defaultBackupRecorder.SnapshotFailed(namespace, cluster, reason)
}

// ObserveSchedule records on the operator's recorder.
func ObserveSchedule(namespace, schedule, cluster string, interval time.Duration, lastSuccess time.Time) {
	defaultBackupRecorder.ObserveSchedule(namespace, schedule, cluster, interval, lastSuccess)
}

// ForgetSchedule forgets on the operator's recorder.
func ForgetSchedule(namespace, schedule string) {
	defaultBackupRecorder.ForgetSchedule(namespace, schedule)
}
