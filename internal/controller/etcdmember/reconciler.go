package etcdmember

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/component/memberstatus"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/component/pvc"
	"github.com/quorumctl/etcd-operator/internal/component/refusal"
	"github.com/quorumctl/etcd-operator/internal/controller/ratelimit"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
)

// EventRecorder is the part of the events API the controller uses.
type EventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Reconciler reconciles EtcdMember objects.
type Reconciler struct {
	client.Client
	// APIReader reads what the cache does not hold: the client Service's
	// EndpointSlices, and a root Secret the user named (spec.auth); the
	// client when nil.
	APIReader       client.Reader
	Recorder        EventRecorder
	Dialer          etcd.Dialer
	ClusterDomain   string
	ImageRepository string
	// Workers is how many members are reconciled at once.
	Workers int
	// OperatorImage downloads a restored cluster's snapshot in its seed.
	OperatorImage string
	// Credentials is which restore sources the seed's download may reach
	// with ambient credentials.
	Credentials backup.CredentialsPolicy

	// disruptions keeps a cluster's removals and restarts from interleaving.
	disruptions disruptions
	// drains times the client Service drains before restarts.
	drains drains
}

// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdmembers,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdmembers/status,verbs=patch
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdmembers/finalizers,verbs=update
// +kubebuilder:rbac:groups=etcd.quorumctl.io,resources=etcdclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list

// Reconcile makes one member real and reports on it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, reterr error) {
	m := &v1alpha1.EtcdMember{}
	if err := r.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !m.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, m)
	}
	if !controllerutil.ContainsFinalizer(m, v1alpha1.MemberFinalizer) {
		patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(m, v1alpha1.MemberFinalizer)
		if err := r.Patch(ctx, m, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to add finalizer to EtcdMember %s: %w", m.Name, err)
		}
	}
	cluster := &v1alpha1.EtcdCluster{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.ClusterName}, cluster); err != nil {
		// Without its cluster a member is garbage about to be collected.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := m.DeepCopy()
	obs := observation{}
	defer func() {
		updateStatus(m, obs)
		if err := r.patchStatus(ctx, before, m); err != nil {
			reterr = errors.Join(reterr, err)
		}
	}()
	res, err := r.reconcilePod(ctx, cluster, m, &obs)
	// A volume that does not grow leaves the member running on it: its
	// grow comes after the rest of the pass, which it never stops.
	return res, errors.Join(err, r.growVolume(ctx, m))
}

// reconcilePod makes the member's volume, startup config and Pod real, and
// records in obs what it saw for the status. Reconcile keeps the loading
// and the status write around it, so that every return here, error or not,
// is reported the same way.
func (r *Reconciler) reconcilePod(ctx context.Context, cluster *v1alpha1.EtcdCluster, m *v1alpha1.EtcdMember, obs *observation) (ctrl.Result, error) {
	if m.Pending() {
		return ctrl.Result{}, nil
	}
	if m.Spec.Dormant {
		// Paused: the Pod goes, the volume, startup config and identity stay.
		obs.dormant = true
		return ctrl.Result{}, r.deletePod(ctx, m)
	}
	if _, err := pvc.Ensure(ctx, r.Client, m); err != nil {
		return ctrl.Result{}, err
	}
	params := r.podParams(cluster, m)
	current, err := r.currentPod(ctx, m)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.disruptions.settle(m, current, podReady(current))
	if current == nil {
		// A Pod whose certificates or trust bundle do not exist yet would
		// sit in ContainerCreating and retry its mounts on the kubelet's
		// backoff; the cluster controller creates them within a pass.
		if missing, err := r.missingTLSMaterial(ctx, m); err != nil || missing != "" {
			if missing != "" {
				ctrl.LoggerFrom(ctx).V(1).Info("Waiting for the member's TLS material", "missing", missing)
			}
			return ctrl.Result{RequeueAfter: requeueTLSMaterial}, err
		}
		r.movePeerURL(ctx, cluster, m)
	}
	if m.LostPod(current) {
		// tmpfs went with the Pod: a new Pod would start with nothing under
		// the old member ID. The cluster controller replaces the member.
		obs.podLost = true
		return ctrl.Result{}, nil
	}
	// The first boot is latched only once the startup ConfigMap says so
	// (a self-only --initial-cluster): the cluster controller promotes a
	// learner only after the latch, so a voter whose data dir is lost can
	// never restart under its old ID with the member list of its add.
	booting := podReady(current) && !m.HasBooted()
	if booting {
		now := metav1.Now()
		m.Status.FirstReadyTime = &now
	}
	// The startup values must be current before any container starts: the
	// kubelet reads them at each start, including restarts in place.
	if err := pod.SyncStartupConfig(ctx, r.Client, params); err != nil {
		if booting {
			m.Status.FirstReadyTime = nil
		}
		return ctrl.Result{}, err
	}
	// What the ConfigMap now holds, for the cluster controller to wait on.
	m.Status.ForceNewCluster = m.Spec.ForceNewCluster
	p, err := pod.Ensure(ctx, r.Client, params)
	if err != nil {
		r.reportRefusal(ctx, m, err, obs)
		// Retried on the workqueue's backoff: what the API server refused
		// may be allowed later (the PriorityClass created, the quota
		// raised), and the condition then clears with the Pod's creation.
		return ctrl.Result{}, err
	}
	if restarted, err := r.restartToForce(ctx, m, p); err != nil || restarted {
		return ctrl.Result{}, err
	}
	if restarted, held, err := r.restartIfOutdated(ctx, m, p); err != nil || restarted || held {
		if held {
			return ctrl.Result{RequeueAfter: requeueDisruption}, err
		}
		return ctrl.Result{}, err
	}
	obs.pod = p
	if err := pod.SetRoleLabel(ctx, r.Client, p, pod.ServesClients(m)); err != nil {
		return ctrl.Result{}, err
	}
	if podReady(p) && (m.Status.Version == "" || m.Status.PodUID != p.UID) {
		obs.version = r.observeVersion(ctx, cluster, m)
	}
	return ctrl.Result{}, nil
}

// podParams are what the member's Pod and startup config are rendered from.
func (r *Reconciler) podParams(cluster *v1alpha1.EtcdCluster, m *v1alpha1.EtcdMember) pod.Params {
	params := pod.Params{
		Member:          m,
		ClusterFormed:   cluster.ClusterFormed(),
		ClusterDomain:   r.ClusterDomain,
		ImageRepository: r.ImageRepository,
		OperatorImage:   r.OperatorImage,
	}
	if m.Spec.Restore != nil {
		// The cluster controller created the seed only once the same
		// policy let it check the source.
		params.RestoreAmbientCredentials = r.Credentials.Decide(m.Spec.Restore.Source).Ambient
	}
	return params
}

func (r *Reconciler) currentPod(ctx context.Context, m *v1alpha1.EtcdMember) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	err := r.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Name}, p)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get Pod %s: %w", m.Name, err)
	}
	return p, nil
}

// restartIfOutdated deletes a Pod built from another template than the
// member's, so that the next pass re-creates it from the member's: this is
// how a rollout's change of one member's template reaches its Pod, on the
// same volume, with the same member ID. It does so only once the cluster
// controller has approved the restart for the member's current spec
// (status.restartApproved), which it does one member at a time, after its
// gate: whatever changed a member's spec, this controller never restarts
// members on its own, and so never several at once. A Pod from before
// templates were hashed gets the hash of the current template, unless a
// rollout changed the template after the Pod was created.
func (r *Reconciler) restartIfOutdated(ctx context.Context, m *v1alpha1.EtcdMember, p *corev1.Pod) (restarted, held bool, err error) {
	if !p.DeletionTimestamp.IsZero() {
		return false, false, nil
	}
	h, hashed := p.Annotations[pod.TemplateHashAnnotation]
	outdated := pod.Outdated(m, p)
	// A rollout by an operator from before approvals changed the template
	// of a Pod from before hashes; its RolledAt was the approval.
	rolledBefore := !hashed && m.Status.RolledAt != nil && p.CreationTimestamp.Before(m.Status.RolledAt)
	switch {
	case rolledBefore:
		outdated = true
	case !outdated && h != pod.TemplateHash(m):
		// Unhashed, or hashed the way an older operator did: recorded in
		// today's form, so that approvals, which carry today's hash, match.
		patch := client.MergeFrom(p.DeepCopy())
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[pod.TemplateHashAnnotation] = pod.TemplateHash(m)
		if err := r.Patch(ctx, p, patch, client.FieldOwner(v1alpha1.FieldOwner)); err != nil {
			return false, false, fmt.Errorf("failed to record the template hash on Pod %s: %w", p.Name, err)
		}
		return false, false, nil
	}
	if !outdated {
		return false, false, nil
	}
	if !pod.RestartApproved(m) && !rolledBefore {
		ctrl.LoggerFrom(ctx).V(1).Info("The member's Pod is outdated; waiting for the cluster controller to approve its restart", "pod", p.Name)
		return false, false, nil
	}
	// The cluster controller approved it from its look; etcd has the last
	// word, now, with no removal of this cluster in between.
	defer r.disruptions.lock(m)()
	if ok, why, err := r.restartAllowed(ctx, m); err != nil || !ok {
		if why != "" {
			ctrl.LoggerFrom(ctx).Info("Holding an approved restart", "pod", p.Name, "reason", why)
		}
		if err == nil {
			err = r.undrain(ctx, m, p)
		}
		return false, true, err
	}
	// Out of the client Service first, so that no new client request is
	// sent to a member that is about to stop.
	if drained, err := r.drain(ctx, m, p); err != nil || !drained {
		return false, true, err
	}
	ctrl.LoggerFrom(ctx).Info("Re-creating the member's Pod from its new template", "pod", p.Name)
	if r.Recorder != nil {
		r.Recorder.Eventf(m, p, corev1.EventTypeNormal, "PodOutdated", "RestartMember",
			"Deleting Pod %s to re-create it from the member's new template (etcd %s)", p.Name, m.Spec.Version)
	}
	if err := r.Delete(ctx, p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
		return false, false, fmt.Errorf("failed to delete outdated Pod %s: %w", p.Name, err)
	}
	r.disruptions.restarted(m, p.UID)
	r.drains.end(p.UID)
	return true, false, nil
}

// reportRefusal puts the API server's refusal of the member's Pod in the
// member's condition, and in a Warning Event when it is new: a Pod that is
// never created leaves no Pod to describe, so this is where users look.
func (r *Reconciler) reportRefusal(ctx context.Context, m *v1alpha1.EtcdMember, err error, obs *observation) {
	var create *pod.CreateError
	if !errors.As(err, &create) {
		return
	}
	msg, refused := refusal.Of(create.Err)
	if !refused {
		return
	}
	obs.podRefused = msg
	if !newRefusal(m, msg) {
		return
	}
	ctrl.LoggerFrom(ctx).Info("The API server refused to create the member's Pod", "pod", create.Key.Name, "message", msg)
	if r.Recorder != nil {
		r.Recorder.Eventf(m, nil, corev1.EventTypeWarning, v1alpha1.MemberPodCreateFailedReason, "CreatePod",
			"The API server refused to create Pod %s: %s", create.Key.Name, msg)
	}
}

// deletePod removes the member's Pod if it exists.
func (r *Reconciler) deletePod(ctx context.Context, m *v1alpha1.EtcdMember) error {
	current, err := r.currentPod(ctx, m)
	if err != nil || current == nil || !current.DeletionTimestamp.IsZero() {
		return err
	}
	if err := r.Delete(ctx, current); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to delete Pod %s of dormant member: %w", m.Name, err)
	}
	return nil
}

// observeVersion asks the member itself which etcd it runs. Best effort: a
// failure leaves the version unknown until the next pass.
func (r *Reconciler) observeVersion(ctx context.Context, cluster *v1alpha1.EtcdCluster, m *v1alpha1.EtcdMember) string {
	access, err := etcdaccess.For(ctx, r.Client, r.APIReader, cluster, []*v1alpha1.EtcdMember{m})
	if err != nil {
		return ""
	}
	ep := access.URL(m.ClientURLIn(r.ClusterDomain))
	c, err := r.Dialer.Dial(ctx, append([]string{ep}, r.tokenEndpoints(ctx, m, access)...), access.Options...)
	if err != nil {
		return ""
	}
	defer c.Close()
	st, err := c.Status(ctx, ep)
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Could not read the member's version", "error", err.Error())
		return ""
	}
	return st.Version
}

// patchStatus applies the member controller's status fields when they
// changed, and only those: the cluster controller's fields are its own.
func (r *Reconciler) patchStatus(ctx context.Context, before, after *v1alpha1.EtcdMember) error {
	if equality.Semantic.DeepEqual(memberstatus.Member.Project(&before.Status), memberstatus.Member.Project(&after.Status)) {
		return nil
	}
	if err := memberstatus.Apply(ctx, r.Client, after, memberstatus.Member); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to apply the status of EtcdMember %s: %w", after.Name, err)
	}
	return nil
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.EtcdMember{}).
		Owns(&corev1.Pod{}).
		Owns(&corev1.PersistentVolumeClaim{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Named("etcdmember").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1), RateLimiter: ratelimit.Capped()}).
		Complete(r)
}

func podReady(p *corev1.Pod) bool {
	if p == nil || !p.DeletionTimestamp.IsZero() {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
