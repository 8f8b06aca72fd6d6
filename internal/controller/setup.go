// Package controller registers the operator's controllers with a manager.
package controller

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/internal/controller/etcdcluster"
	"github.com/quorumctl/etcd-operator/internal/controller/etcdmember"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// Options are the operator-wide settings the controllers need.
type Options struct {
	// EtcdImageRepository is where member images come from; the tag is v<version>.
	EtcdImageRepository string
	// ClusterDomain is the DNS suffix of Services, such as cluster.local.
	ClusterDomain string
	// Dialer reaches etcd; nil means the real client.
	Dialer etcd.Dialer
}

// Setup registers the EtcdCluster and EtcdMember controllers.
func Setup(mgr ctrl.Manager, opts Options) error {
	dialer := opts.Dialer
	if dialer == nil {
		dialer = etcd.NewDialer()
	}
	if err := (&etcdcluster.Reconciler{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Recorder:      mgr.GetEventRecorder("etcdcluster-controller"),
		Dialer:        dialer,
		ClusterDomain: opts.ClusterDomain,
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
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up the EtcdMember controller: %w", err)
	}
	return nil
}
