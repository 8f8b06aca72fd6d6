// Package controller registers the operator's controllers with a manager.
package controller

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/controller/etcdcluster"
	"github.com/quorumctl/etcd-operator/internal/controller/etcdmember"
	"github.com/quorumctl/etcd-operator/internal/controller/etcdrecovery"
	"github.com/quorumctl/etcd-operator/internal/controller/etcdsnapshot"
	"github.com/quorumctl/etcd-operator/internal/controller/etcdsnapshotschedule"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// Options are the operator-wide settings the controllers need.
type Options struct {
	// EtcdImageRepository is where member images come from; the tag is v<version>.
	EtcdImageRepository string
	// ClusterDomain is the DNS suffix of Services, such as cluster.local.
	ClusterDomain string
	// OperatorImage is the operator's own image, which runs the snapshot
	// Jobs and the restore's download in the seed's Pod.
	OperatorImage string
	// Dialer reaches etcd; nil means the real client.
	Dialer etcd.Dialer
	// Metrics reads members' metrics endpoints; nil means the real reader
	// with the real Dialer, and none with a given one (a test's fake etcd
	// has no metrics endpoint to read).
	Metrics etcd.MetricsReader
	// MaxConcurrentReconciles is how many clusters, and how many members,
	// are reconciled at once; 0 means 1.
	MaxConcurrentReconciles int
	// NetworkPolicy is what every cluster's NetworkPolicy admits besides
	// the cluster's own Pods, and whether the operator may keep them.
	NetworkPolicy etcdcluster.NetworkPolicyOptions
	// Credentials is which snapshot storage the operator's Pods may reach
	// with ambient cloud credentials; the zero value allows none.
	Credentials backup.CredentialsPolicy
}

// Setup registers the EtcdCluster, EtcdMember, EtcdSnapshot,
// EtcdSnapshotSchedule and EtcdRecovery controllers.
func Setup(mgr ctrl.Manager, opts Options) error {
	dialer := opts.Dialer
	if dialer == nil {
		// Defragmentation and compaction run in the background, so they may
		// take as long as a large database needs.
		dialer = etcd.NewDialer(etcd.WithDefragmentTimeout(etcdcluster.MaintenanceCallTimeout))
	}
	metrics := opts.Metrics
	if metrics == nil && opts.Dialer == nil {
		metrics = etcd.NewMetricsReader(nil)
	}
	if err := (&etcdcluster.Reconciler{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Recorder:      mgr.GetEventRecorder("etcdcluster-controller"),
		Dialer:        dialer,
		Metrics:       metrics,
		ClusterDomain: opts.ClusterDomain,
		Workers:       opts.MaxConcurrentReconciles,
		OperatorImage: opts.OperatorImage,
		NetworkPolicy: opts.NetworkPolicy,
		Credentials:   opts.Credentials,
		ElectionGrace: etcdcluster.ElectionGrace,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up the EtcdCluster controller: %w", err)
	}
	if err := (&etcdmember.Reconciler{
		Client:          mgr.GetClient(),
		APIReader:       mgr.GetAPIReader(),
		Recorder:        mgr.GetEventRecorder("etcdmember-controller"),
		Dialer:          dialer,
		ClusterDomain:   opts.ClusterDomain,
		ImageRepository: opts.EtcdImageRepository,
		Workers:         opts.MaxConcurrentReconciles,
		OperatorImage:   opts.OperatorImage,
		Credentials:     opts.Credentials,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up the EtcdMember controller: %w", err)
	}
	if err := (&etcdsnapshot.Reconciler{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Recorder:      mgr.GetEventRecorder("etcdsnapshot-controller"),
		OperatorImage: opts.OperatorImage,
		ClusterDomain: opts.ClusterDomain,
		Credentials:   opts.Credentials,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up the EtcdSnapshot controller: %w", err)
	}
	if err := (&etcdsnapshotschedule.Reconciler{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Recorder:      mgr.GetEventRecorder("etcdsnapshotschedule-controller"),
		OperatorImage: opts.OperatorImage,
		Credentials:   opts.Credentials,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up the EtcdSnapshotSchedule controller: %w", err)
	}
	if err := (&etcdrecovery.Reconciler{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Recorder:      mgr.GetEventRecorder("etcdrecovery-controller"),
		Dialer:        dialer,
		Metrics:       metrics,
		ClusterDomain: opts.ClusterDomain,
		OperatorImage: opts.OperatorImage,
		Credentials:   opts.Credentials,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up the EtcdRecovery controller: %w", err)
	}
	return nil
}
