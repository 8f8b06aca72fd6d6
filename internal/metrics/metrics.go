// Package metrics holds the operator's own Prometheus metrics, one set of
// series per EtcdCluster. They are registered on controller-runtime's
// registry, so the manager's metrics endpoint (--metrics-bind-address,
// :8443 in the chart, HTTPS with a token) serves them next to
// controller-runtime's, among them controller_runtime_reconcile_total,
// controller_runtime_reconcile_errors_total and
// controller_runtime_reconcile_time_seconds. Those are per controller;
// the reconcile errors and durations here are per EtcdCluster, so that an
// alert or a dashboard can name the cluster that is in trouble.
//
// The values come from what a reconcile pass already observed: the
// EtcdCluster's status as the pass computed it and etcd's own answers. Recording
// them makes no API call of any kind. A healthy cluster is looked at every
// 10 s, so the gauges are at most that old, and the leader-change counter
// samples the leader at that rate: etcd's own
// etcd_server_leader_changes_seen_total counts every change.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/remediation"
)

// Label names.
const (
	LabelNamespace = "namespace"
	LabelCluster   = "cluster"
	LabelMember    = "member"
	LabelReason    = "reason"
	LabelAlarm     = "alarm"
)

// Metric names.
const (
	DesiredMembersName     = "etcd_operator_cluster_desired_members"
	ReadyMembersName       = "etcd_operator_cluster_ready_members"
	VotingMembersName      = "etcd_operator_cluster_voting_members"
	LearnerMembersName     = "etcd_operator_cluster_learner_members"
	LeaderChangesName      = "etcd_operator_cluster_leader_changes_total"
	ClusterDBSizeName      = "etcd_operator_cluster_db_size_bytes"
	MemberDBSizeName       = "etcd_operator_member_db_size_bytes"
	MemberReplacementsName = "etcd_operator_member_replacements_total"
	ClusterAlarmsName      = "etcd_operator_cluster_alarms"
	ReconcileErrorsName    = "etcd_operator_cluster_reconcile_errors_total"
	ReconcileDurationName  = "etcd_operator_cluster_reconcile_duration_seconds"
	QuorumLostName         = "etcd_operator_cluster_quorum_lost"
)

// reconcileBuckets cover a pass that only reads (milliseconds) up to one that
// waits on etcd's call timeouts (seconds).
var reconcileBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// replacedMemory bounds how many replaced members are remembered per cluster
// to count each replacement once.
const replacedMemory = 64

// ClusterObservation is what one reconcile pass saw of one EtcdCluster.
type ClusterObservation struct {
	Namespace string
	Cluster   string
	// UID tells a re-created cluster of the same name from the old one.
	UID string
	// Desired is spec.replicas.
	Desired int
	// Ready is status.readyMembers.
	Ready int
	// Voting and Learners count the members by their role in etcd.
	Voting   int
	Learners int
	// LeaderID is the leader a majority of voters names; 0 when unknown.
	LeaderID uint64
	// MemberDBSizes holds, by EtcdMember name, the database size each member
	// reported this pass; members that did not answer are left out.
	MemberDBSizes map[string]int64
	// QuorumLost is the QuorumLost condition: the quorum is lost for good,
	// or a recovery is rebuilding it.
	QuorumLost bool

	// Alarms counts the active alarms by type (NOSPACE, CORRUPT); nil when
	// the pass could not tell, which leaves the series as they were.
	Alarms map[string]int
}

// AlarmTypes are the alarms whose series start at 0 for every cluster, so
// that an alert on them needs no absent().
var AlarmTypes = []string{etcd.AlarmNoSpace, etcd.AlarmCorrupt}

// Recorder owns the collectors and what must be remembered between passes.
type Recorder struct {
	desired, ready, voting, learners *prometheus.GaugeVec
	quorumLost                       *prometheus.GaugeVec
	leaderChanges                    *prometheus.CounterVec
	clusterDBSize, memberDBSize      *prometheus.GaugeVec
	alarms                           *prometheus.GaugeVec
	replacements                     *prometheus.CounterVec
	reconcileErrors                  *prometheus.CounterVec
	reconcileDuration                *prometheus.HistogramVec
	// reasons are pre-created at 0 for every cluster, so that the first
	// replacement shows as an increase instead of a new series.
	reasons []string

	mu       sync.Mutex
	clusters map[clusterKey]*clusterState
}

type clusterKey struct{ namespace, name string }

type clusterState struct {
	uid      string
	leaderID uint64
	members  map[string]bool
	// replaced are the last members counted as replaced, oldest first.
	replaced []string
}

// New makes a Recorder; reasons are the replacement reasons whose counters
// start at 0 for every cluster.
func New(reasons ...string) *Recorder {
	clusterLabels := []string{LabelNamespace, LabelCluster}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	return &Recorder{
		desired: gauge(DesiredMembersName,
			"Members the EtcdCluster's spec asks for (spec.replicas).", clusterLabels...),
		ready: gauge(ReadyMembersName,
			"Members whose Pod is ready and that etcd lists as started (status.readyMembers).", clusterLabels...),
		voting: gauge(VotingMembersName,
			"Members that are voters in etcd.", clusterLabels...),
		learners: gauge(LearnerMembersName,
			"Members that are learners in etcd.", clusterLabels...),
		quorumLost: gauge(QuorumLostName,
			"1 while the cluster's quorum is lost for good (the QuorumLost condition): too few voters are left for it to come back without an EtcdRecovery; 0 otherwise.", clusterLabels...),
		leaderChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: LeaderChangesName,
			Help: "Times the operator saw a different etcd leader than at its previous look at the cluster.",
		}, clusterLabels),
		clusterDBSize: gauge(ClusterDBSizeName,
			"Largest etcd database size, in bytes, any member reported.", clusterLabels...),
		memberDBSize: gauge(MemberDBSizeName,
			"Size of the member's etcd database in bytes, as it reported it.", LabelNamespace, LabelCluster, LabelMember),
		alarms: gauge(ClusterAlarmsName,
			"Active etcd alarms of the cluster, by type; a NOSPACE alarm means etcd refuses writes.", LabelNamespace, LabelCluster, LabelAlarm),
		replacements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MemberReplacementsName,
			Help: "Members self-heal replaced, by the reason it gave.",
		}, []string{LabelNamespace, LabelCluster, LabelReason}),
		reconcileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: ReconcileErrorsName,
			Help: "Reconcile passes of the EtcdCluster that ended in an error (and were retried with backoff).",
		}, clusterLabels),
		reconcileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    ReconcileDurationName,
			Help:    "How long reconcile passes of the EtcdCluster took, in seconds, including the etcd calls they made.",
			Buckets: reconcileBuckets,
		}, clusterLabels),
		reasons:  reasons,
		clusters: map[clusterKey]*clusterState{},
	}
}

func (r *Recorder) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		r.desired, r.ready, r.voting, r.learners, r.leaderChanges,
		r.clusterDBSize, r.memberDBSize, r.alarms, r.replacements,
		r.reconcileErrors, r.reconcileDuration, r.quorumLost,
	}
}

// Register adds every collector to reg.
func (r *Recorder) Register(reg prometheus.Registerer) error {
	for _, c := range r.collectors() {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// state returns the cluster's remembered state, starting afresh (and
// creating the counters at 0) for a cluster not seen before or re-created.
// The caller holds r.mu.
func (r *Recorder) state(namespace, name, uid string) *clusterState {
	key := clusterKey{namespace, name}
	st := r.clusters[key]
	switch {
	case st != nil && (uid == "" || st.uid == uid):
		return st
	case st != nil && st.uid == "":
		// First seen by MemberReplaced, which does not know the UID.
		st.uid = uid
		return st
	case st != nil:
		r.deleteSeries(namespace, name)
	}
	st = &clusterState{uid: uid, members: map[string]bool{}}
	r.clusters[key] = st
	r.leaderChanges.WithLabelValues(namespace, name).Add(0)
	r.reconcileErrors.WithLabelValues(namespace, name).Add(0)
	for _, reason := range r.reasons {
		r.replacements.WithLabelValues(namespace, name, reason).Add(0)
	}
	for _, a := range AlarmTypes {
		r.alarms.WithLabelValues(namespace, name, a).Set(0)
	}
	return st
}

// ObserveCluster sets the cluster's series from one pass's observation.
func (r *Recorder) ObserveCluster(o ClusterObservation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.state(o.Namespace, o.Cluster, o.UID)
	r.desired.WithLabelValues(o.Namespace, o.Cluster).Set(float64(o.Desired))
	r.ready.WithLabelValues(o.Namespace, o.Cluster).Set(float64(o.Ready))
	r.voting.WithLabelValues(o.Namespace, o.Cluster).Set(float64(o.Voting))
	r.learners.WithLabelValues(o.Namespace, o.Cluster).Set(float64(o.Learners))
	lost := 0.0
	if o.QuorumLost {
		lost = 1
	}
	r.quorumLost.WithLabelValues(o.Namespace, o.Cluster).Set(lost)

	// An unknown leader (an election, a pass that could not ask) is no
	// change: A, unknown, A is none and A, unknown, B is one.
	if o.LeaderID != 0 {
		if st.leaderID != 0 && st.leaderID != o.LeaderID {
			r.leaderChanges.WithLabelValues(o.Namespace, o.Cluster).Inc()
		}
		st.leaderID = o.LeaderID
	}

	var largest int64
	for member, size := range o.MemberDBSizes {
		r.memberDBSize.WithLabelValues(o.Namespace, o.Cluster, member).Set(float64(size))
		largest = max(largest, size)
	}
	for member := range st.members {
		if _, still := o.MemberDBSizes[member]; !still {
			r.memberDBSize.DeleteLabelValues(o.Namespace, o.Cluster, member)
			delete(st.members, member)
		}
	}
	for member := range o.MemberDBSizes {
		st.members[member] = true
	}
	if len(o.MemberDBSizes) > 0 {
		r.clusterDBSize.WithLabelValues(o.Namespace, o.Cluster).Set(float64(largest))
	} else {
		r.clusterDBSize.DeleteLabelValues(o.Namespace, o.Cluster)
	}
	if o.Alarms != nil {
		for _, a := range AlarmTypes {
			r.alarms.WithLabelValues(o.Namespace, o.Cluster, a).Set(float64(o.Alarms[a]))
		}
	}
}

// ObserveReconcile records one reconcile pass of an existing cluster: how
// long it took and whether it failed.
func (r *Recorder) ObserveReconcile(namespace, cluster, uid string, took time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state(namespace, cluster, uid)
	r.reconcileDuration.WithLabelValues(namespace, cluster).Observe(took.Seconds())
	if err != nil {
		r.reconcileErrors.WithLabelValues(namespace, cluster).Inc()
	}
}

// MemberReplaced counts one replacement. member identifies the replaced
// member (its UID); a second call for the same member, from a pass that read
// a stale cache, is not counted again.
func (r *Recorder) MemberReplaced(namespace, cluster, member, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.state(namespace, cluster, "")
	for _, m := range st.replaced {
		if m == member {
			return
		}
	}
	st.replaced = append(st.replaced, member)
	if len(st.replaced) > replacedMemory {
		st.replaced = st.replaced[len(st.replaced)-replacedMemory:]
	}
	r.replacements.WithLabelValues(namespace, cluster, reason).Inc()
}

// ForgetCluster deletes every series of a cluster that is gone.
func (r *Recorder) ForgetCluster(namespace, cluster string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.clusters, clusterKey{namespace, cluster})
	r.deleteSeries(namespace, cluster)
}

func (r *Recorder) deleteSeries(namespace, cluster string) {
	labels := prometheus.Labels{LabelNamespace: namespace, LabelCluster: cluster}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		r.desired, r.ready, r.voting, r.learners, r.leaderChanges,
		r.clusterDBSize, r.memberDBSize, r.alarms, r.replacements,
		r.reconcileErrors, r.reconcileDuration, r.quorumLost,
	} {
		v.DeletePartialMatch(labels)
	}
}

// ReplacementReasons are the reasons self-heal gives, whose counters start at
// 0 for every cluster.
var ReplacementReasons = []string{
	string(remediation.DataDirLost),
	string(remediation.DataCorrupt),
	string(remediation.Diverged),
	string(remediation.RemovedFromCluster),
	string(remediation.CrashLoop),
	string(remediation.Unresponsive),
	string(remediation.PodLost),
}

// defaultRecorder is the Recorder the operator uses, registered on
// controller-runtime's registry.
var defaultRecorder = New(ReplacementReasons...)

func init() {
	if err := defaultRecorder.Register(ctrlmetrics.Registry); err != nil {
		panic(err)
	}
}

// ObserveCluster records a pass's observation on the operator's Recorder.
func ObserveCluster(o ClusterObservation) { defaultRecorder.ObserveCluster(o) }

// MemberReplaced counts a replacement on the operator's Recorder.
func MemberReplaced(namespace, cluster, member, reason string) {
	defaultRecorder.MemberReplaced(namespace, cluster, member, reason)
}

// ObserveReconcile records a pass on the operator's Recorder.
func ObserveReconcile(namespace, cluster, uid string, took time.Duration, err error) {
	defaultRecorder.ObserveReconcile(namespace, cluster, uid, took, err)
}

// ForgetCluster deletes a gone cluster's series from the operator's
// recorders, its snapshot series included: a cluster that is gone has no
// backups to alert on.
func ForgetCluster(namespace, cluster string) {
	defaultRecorder.ForgetCluster(namespace, cluster)
	defaultBackupRecorder.ForgetCluster(namespace, cluster)
}
