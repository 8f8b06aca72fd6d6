package etcdcluster

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/controller/ratelimit"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/metrics"
	"github.com/quorumctl/etcd-operator/internal/unreachable"
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
	// Metrics reads a member's metrics endpoint when the quorum is lost and
	// its client endpoint does not answer; nil leaves such a member
	// unanswered.
	Metrics etcd.MetricsReader
	// ClusterDomain is the DNS suffix of cluster Services.
	ClusterDomain string
	// Now is the clock; tests set it.
	Now func() time.Time
	// ElectionGrace is how long a look that read the member list
	// linearizably asks again the voters that answered without a leader
	// (see reaskLeaderless); zero judges them on their first answer.
	ElectionGrace time.Duration
	// Workers is how many clusters are reconciled at once.
	Workers int
	// OperatorImage runs the check of a restore's source and the seed's
	// download of the snapshot.
	OperatorImage string
	// Credentials is which restore sources the check Job may reach with
	// ambient credentials.
	Credentials backup.CredentialsPolicy
	// NetworkPolicy is what every cluster's NetworkPolicy admits besides
	// the cluster's own Pods, and whether the operator may keep them.
	NetworkPolicy NetworkPolicyOptions
	// ServedCertificate reads the certificate a member's endpoint serves,
	// for a CA rotation's second pass; nil dials it (tests set it).
	ServedCertificate func(ctx context.Context, endpoint string) (*x509.Certificate, error)

	// memos keeps per-cluster timers and restore refusals between
	// passes; see memo.
	memos memos
	// maintDone has the cluster looked at as soon as a background
	// maintenance call returns; nil in tests, which poll.
	maintDone chan event.GenericEvent
}

// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdclusters/status,verbs=patch
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdmembers,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdmembers/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;patch;update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;create;patch

// Reconcile only orchestrates: fetch, observe, run the phases, and write
// status once at the end. Every phase runs on every pass; a failed one is
// reported in status and retried, and never stops self-heal.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, reterr error) {
	cluster := &v1alpha1.EtcdCluster{}
	if err := r.Get(ctx, req.NamespacedName, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Deletion needs no work here: members, Pods, volumes and Services are
	// owned and cascade, and each member's finalizer skips the etcd-side
	// removal once its cluster is going away.
	if !cluster.DeletionTimestamp.IsZero() {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	began := time.Now()
	var s *scope
	// Registered before the status patch's defer, so it runs after it and
	// counts a failed patch as a failed pass.
	defer func() {
		failed := reterr
		if s != nil {
			failed = errors.Join(append([]error{reterr}, s.phaseErrs...)...)
		}
		metrics.ObserveReconcile(req.Namespace, req.Name, string(cluster.UID), time.Since(began), failed)
	}()
	before := cluster.DeepCopy()
	s, err := r.newScope(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		updateStatus(s)
		r.announceStalled(before, cluster)
		r.announceQuorumLost(before, cluster)
		r.announceMaintenance(before, cluster)
		if err := r.patchStatus(ctx, before, cluster); err != nil {
			reterr = errors.Join(reterr, err)
		}
	}()
	result = runPhases(ctx, s, []phase{
		r.latchTarget,
		r.reconcileTLS,
		r.reconcileServices,
		r.reconcileNetworkPolicy,
		r.syncMemberStatus,
		r.reconcilePDB,
		r.observeMaintenance,
		r.reconcileMembership,
		r.reconcileAuth,
	})
	// While no member answers, the pass's own requeue is spaced out; a
	// deadline's report is not, and any event of the cluster still brings
	// a pass at once.
	result.RequeueAfter = unreachable.Stretch(result.RequeueAfter, s.retryDelay)
	return soonest(result, untilDeadline(s)), nil
}

func (r *Reconciler) forget(key types.NamespacedName) {
	metrics.ForgetCluster(key.Namespace, key.Name)
	r.memos.forget(key)
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
// on a polling interval; Node events reach the clusters with a member on the
// node, so a node going away starts the node-loss clock without a poll.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.EtcdMember{}, memberNodeField,
		func(obj client.Object) []string {
			if n := obj.(*v1alpha1.EtcdMember).Status.NodeName; n != "" {
				return []string{n}
			}
			return nil
		}); err != nil {
		return fmt.Errorf("failed to index EtcdMembers by node: %w", err)
	}
	r.maintDone = make(chan event.GenericEvent, maintDoneBuffer)
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.EtcdCluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.maintDone, &handler.EnqueueRequestForObject{})).
		Owns(&v1alpha1.EtcdMember{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.Secret{}).
		Owns(&batchv1.Job{}).
		// The snapshot a version upgrade waits for moves it on as it ends.
		Owns(&v1alpha1.EtcdSnapshot{})
	if r.NetworkPolicy.Permitted {
		// A policy deleted or edited by hand is restored at once.
		b = b.Owns(&networkingv1.NetworkPolicy{})
	}
	return b.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToCluster),
			builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.nodeToClusters),
			builder.WithPredicates(nodeAvailabilityChanged())).
		Watches(&v1alpha1.EtcdRecovery{}, handler.EnqueueRequestsFromMapFunc(recoveryToCluster)).
		// A user's (or cert-manager's) Secret is no object of the
		// cluster's: a change there is found through the clusters that
		// name it.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.sourceSecretToClusters),
			builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		Named("etcdcluster").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1), RateLimiter: ratelimit.Capped()}).
		Complete(r)
}

func podToCluster(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[v1alpha1.ClusterLabel]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}

// memberNodeField indexes EtcdMembers by status.nodeName.
const memberNodeField = "status.nodeName"

// nodeToClusters maps a Node to the clusters with a member on it.
func (r *Reconciler) nodeToClusters(ctx context.Context, obj client.Object) []reconcile.Request {
	var members v1alpha1.EtcdMemberList
	if err := r.List(ctx, &members, client.MatchingFields{memberNodeField: obj.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list the members on a node", "node", obj.GetName())
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var out []reconcile.Request
	for _, m := range members.Items {
		key := types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.ClusterName}
		if !seen[key] {
			seen[key] = true
			out = append(out, reconcile.Request{NamespacedName: key})
		}
	}
	return out
}

// nodeAvailabilityChanged passes Node events that can change whether a
// member on it is lost: its Ready condition, its cordon, and its deletion.
// Heartbeats that change nothing else are dropped.
func nodeAvailabilityChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return true },
		DeleteFunc: func(event.DeleteEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			was, is := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
			return was.Spec.Unschedulable != is.Spec.Unschedulable || nodeReady(was) != nodeReady(is)
		},
	}
}

func nodeReady(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}
