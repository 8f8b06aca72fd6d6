package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/metrics"
)

// EventRecorder is the part of the events API the controller uses.
type EventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Reconciler reconciles EtcdCluster objects.
type Reconciler struct {
	client.Client
	// APIReader reads past the cache where a stale read could create a
	// duplicate member.
	APIReader client.Reader
	Recorder  EventRecorder
	Dialer    etcd.Dialer
	// ClusterDomain is the DNS suffix of cluster Services.
	ClusterDomain string
	// Now is the clock; tests set it.
	Now func() time.Time

	// lastViewCheck maps cluster UID to the last per-member view check.
	lastViewCheck sync.Map
	// divergedSince maps a member (namespace/name/UID) to when a disagreement with the quorum
	// that could be a lag was first seen.
	divergedSince sync.Map
}

// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdclusters/status,verbs=get;patch
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdmembers,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdmembers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile only orchestrates: fetch, observe, run the phases, and write
// status once at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, reterr error) {
	cluster := &v1alpha1.EtcdCluster{}
	if err := r.Get(ctx, req.NamespacedName, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.ForgetCluster(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Deletion needs no work here: members, Pods, volumes and Services are
	// owned and cascade, and each member's finalizer skips the etcd-side
	// removal once its cluster is going away.
	if !cluster.DeletionTimestamp.IsZero() {
		metrics.ForgetCluster(req.Namespace, req.Name)
		return ctrl.Result{}, nil
	}
	began := time.Now()
	// Registered before the status patch's defer, so it runs after it and
	// counts a failed patch as a failed pass.
	defer func() {
		metrics.ObserveReconcile(req.Namespace, req.Name, string(cluster.UID), time.Since(began), reterr)
	}()
	before := cluster.DeepCopy()
	s, err := r.newScope(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		updateStatus(s, reterr == nil)
		r.announceStalled(before, cluster)
		if err := r.patchStatus(ctx, before, cluster); err != nil {
			reterr = errors.Join(reterr, err)
		}
	}()
	return runPhases(ctx, s, []phase{
		r.latchTarget,
		r.reconcileServices,
		r.syncMemberStatus,
		r.reconcilePDB,
		r.reconcileMembership,
	})
}

// announceStalled records a Warning Event when the cluster becomes Stalled,
// once per transition rather than on every pass that finds it so.
func (r *Reconciler) announceStalled(before, after *v1alpha1.EtcdCluster) {
	now := meta.FindStatusCondition(after.Status.Conditions, v1alpha1.StalledCondition)
	if now == nil || now.Status != metav1.ConditionTrue {
		return
	}
	was := meta.FindStatusCondition(before.Status.Conditions, v1alpha1.StalledCondition)
	if was != nil && was.Status == metav1.ConditionTrue && was.Reason == now.Reason {
		return
	}
	r.event(after, corev1.EventTypeWarning, now.Reason, "Stall", "%s", now.Message)
}

func (r *Reconciler) patchStatus(ctx context.Context, before, after *v1alpha1.EtcdCluster) error {
	patch := client.MergeFrom(before)
	data, err := patch.Data(after)
	if err != nil {
		return err
	}
	// An idle cluster makes no API writes: skip the empty patch.
	if string(data) == "{}" {
		return nil
	}
	if err := r.Status().Patch(ctx, after, patch); err != nil {
		return fmt.Errorf("failed to patch status of EtcdCluster %s: %w", after.Name, err)
	}
	return nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) event(obj runtime.Object, eventType, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, eventType, reason, action, format, args...)
	}
}

// SetupWithManager registers the controller. Pod events are mapped to their
// cluster so a member becoming ready moves the cluster on at once, instead of
// on a polling interval.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.EtcdCluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&v1alpha1.EtcdMember{}).
		Owns(&corev1.Service{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToCluster),
			builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		Named("etcdcluster").
		Complete(r)
}

func podToCluster(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[v1alpha1.ClusterLabel]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}
