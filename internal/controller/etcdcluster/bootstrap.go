package etcdcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/memberstatus"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/etcdversion"
)

// reconcileBootstrap forms the cluster from a single seed. The seed is found
// by its spec.bootstrap flag, never by list order, and the cluster counts as
// formed only when etcd, asked through the seed alone, lists exactly the seed.
func (r *Reconciler) reconcileBootstrap(ctx context.Context, s *scope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if s.desiredReplicas() == 0 {
		return ctrl.Result{}, nil
	}
	seed := s.seed()
	if seed == nil {
		if len(s.deleting) > 0 {
			s.setProgress(v1alpha1.BootstrappingReason, "waiting for %d member(s) to finish deleting", len(s.deleting))
			return ctrl.Result{}, nil
		}
		// The cache can trail a create made moments ago; a second seed would
		// form a second cluster, so ask the API server itself.
		if exists, err := r.liveSeedExists(ctx, s.cluster); err != nil || exists {
			return ctrl.Result{RequeueAfter: requeueSoon}, err
		}
		restore, proceed, res, err := r.restoreGate(ctx, s)
		if !proceed || err != nil {
			return res, err
		}
		log.Info("Creating the seed member", "restore", restore != nil)
		created, err := r.createMember(ctx, s, newMember{template: s.cluster.Status.Observed.MemberTemplate, seed: true, restore: restore})
		if err != nil {
			return ctrl.Result{}, err
		}
		s.setProgress(v1alpha1.BootstrappingReason, "created seed member %s", created.Name)
		return ctrl.Result{}, r.setInitialCluster(ctx, created, fmt.Sprintf("%s=%s", created.Name, r.peerURL(created)))
	}
	if seed.Pending() {
		s.setProgress(v1alpha1.BootstrappingReason, "configuring seed member %s", seed.Name)
		return ctrl.Result{}, r.setInitialCluster(ctx, seed, fmt.Sprintf("%s=%s", seed.Name, r.peerURL(seed)))
	}
	if !s.podReady(seed.Name) {
		if !r.observeRestore(s, seed) {
			s.setProgress(v1alpha1.BootstrappingReason, "waiting for seed member %s to start", seed.Name)
		}
		return ctrl.Result{}, nil
	}
	list, err := r.seedMemberList(ctx, s, seed)
	if err != nil {
		s.setProgress(v1alpha1.BootstrappingReason, "seed member %s does not answer yet: %v", seed.Name, err)
		return ctrl.Result{RequeueAfter: requeueEtcdRefused}, nil
	}
	if len(list.Members) != 1 || !r.isSeed(list.Members[0], seed) {
		// Anything but the seed alone means this is not the cluster the seed
		// formed; latching its ID would bless the wrong cluster.
		s.setProgress(v1alpha1.BootstrappingReason, "seed member %s reports %d members; expected only itself", seed.Name, len(list.Members))
		return ctrl.Result{RequeueAfter: requeueUnreachable}, nil
	}
	s.cluster.Status.ClusterID = etcd.FormatMemberID(list.ClusterID)
	if v, err := etcdversion.Parse(seed.Spec.Version); err == nil {
		s.cluster.Status.MinorSince = &v1alpha1.MinorMark{Minor: v.MinorString()}
	}
	log.Info("Cluster formed", "clusterID", s.cluster.Status.ClusterID, "seed", seed.Name)
	r.restoreFormed(ctx, s)
	r.event(s.cluster, corev1.EventTypeNormal, "ClusterFormed", "Bootstrap",
		"Seed member %s formed etcd cluster %s", seed.Name, s.cluster.Status.ClusterID)
	if err := r.patchMemberStatus(ctx, seed, list.Members[0].IDString(), v1alpha1.MemberRoleVoter); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeueSoon}, nil
}

func (r *Reconciler) isSeed(m etcd.Member, seed *v1alpha1.EtcdMember) bool {
	if m.Name == seed.Name {
		return true
	}
	for _, u := range m.PeerURLs {
		if u == r.peerURL(seed) {
			return true
		}
	}
	return false
}

// seedMemberList asks the seed, and only the seed, for the membership.
func (r *Reconciler) seedMemberList(ctx context.Context, s *scope, seed *v1alpha1.EtcdMember) (etcd.MemberList, error) {
	ctx, cancel := context.WithTimeout(ctx, etcdInspectTimeout)
	defer cancel()
	c, err := r.Dialer.Dial(ctx, []string{s.access.URL(r.clientURL(seed))}, s.access.Options...)
	if err != nil {
		return etcd.MemberList{}, err
	}
	defer c.Close()
	return c.MemberList(ctx)
}

func (r *Reconciler) liveSeedExists(ctx context.Context, cluster *v1alpha1.EtcdCluster) (bool, error) {
	var live v1alpha1.EtcdMemberList
	if err := r.APIReader.List(ctx, &live, client.InNamespace(cluster.Namespace),
		client.MatchingLabels{v1alpha1.ClusterLabel: cluster.Name}); err != nil {
		return false, fmt.Errorf("failed to list EtcdMembers of %s: %w", cluster.Name, err)
	}
	for _, m := range live.Items {
		if m.Spec.Bootstrap && isControlledBy(&m, cluster) {
			return true, nil
		}
	}
	return false, nil
}

// newMember is what a member is created from.
type newMember struct {
	template v1alpha1.MemberTemplate
	seed     bool
	// replaces names the broken member this one takes the place of.
	replaces string
	// restore is what a restored cluster's seed restores.
	restore *v1alpha1.MemberRestore
}

// memberFrom is a like-for-like replacement of x.
func memberFrom(x *v1alpha1.EtcdMember) newMember {
	return newMember{template: *x.Spec.MemberTemplate.DeepCopy(), replaces: x.Name}
}

// createMember creates an EtcdMember. Its spec.initialCluster stays empty
// until etcd's side of the add is done, so no Pod can start with a
// membership etcd has not agreed to. The name is chosen here rather than by
// the API server, so that the member's URLs, which derive from it, are
// recorded in the same write.
func (r *Reconciler) createMember(ctx context.Context, s *scope, nm newMember) (*v1alpha1.EtcdMember, error) {
	c := s.cluster
	// A member is created only with every certificate it needs: its Pod
	// would otherwise start half-configured, or not at all.
	if c.Spec.TLS != nil && (s.tls == nil || !s.tls.decided) {
		msg := "waiting for the cluster's certificates before creating a member"
		if s.tls != nil && s.tls.pending != "" {
			msg += ": " + s.tls.pending
		}
		return nil, &tlsPendingError{message: msg}
	}
	labels := map[string]string{}
	if md := nm.template.AdditionalMetadata; md != nil {
		for k, v := range md.Labels {
			labels[k] = v
		}
	}
	for k, v := range v1alpha1.ClusterLabels(c.Name) {
		labels[k] = v
	}
	for attempt := 0; ; attempt++ {
		name := v1alpha1.MemberNamePrefix(c.Name) + utilrand.String(5)
		peerURL, clientURL, memberTLS := s.newMemberTLS(
			v1alpha1.PeerURL(name, c.Name, c.Namespace, r.ClusterDomain), v1alpha1.ClientURL(name, c.Name, c.Namespace, r.ClusterDomain))
		m := &v1alpha1.EtcdMember{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: labels},
			Spec: v1alpha1.EtcdMemberSpec{
				ClusterName:    c.Name,
				Bootstrap:      nm.seed,
				ClusterToken:   c.Status.ClusterToken,
				PeerURL:        peerURL,
				ClientURL:      clientURL,
				TLS:            memberTLS,
				Replaces:       nm.replaces,
				Restore:        nm.restore,
				MemberTemplate: *nm.template.DeepCopy(),
			},
		}
		if err := controllerutil.SetControllerReference(c, m, r.Scheme()); err != nil {
			return nil, err
		}
		err := r.Create(ctx, m)
		switch {
		case err == nil:
			s.members = append(s.members, m)
			s.peerURLs[m.Name] = m.Spec.PeerURL
			return m, nil
		case apierrors.IsAlreadyExists(err) && attempt < 3:
			continue
		}
		return nil, fmt.Errorf("failed to create EtcdMember for %s: %w", c.Name, err)
	}
}

func (r *Reconciler) setInitialCluster(ctx context.Context, m *v1alpha1.EtcdMember, initialCluster string) error {
	patch := client.MergeFrom(m.DeepCopy())
	m.Spec.InitialCluster = initialCluster
	if err := r.Patch(ctx, m, patch); err != nil {
		return fmt.Errorf("failed to set initialCluster of EtcdMember %s: %w", m.Name, err)
	}
	return nil
}

// patchMemberStatus records what etcd says about a member: its ID, latched
// once, and its role. Each has its own field manager, so clearing the role
// can never clear an ID that a read behind the API server does not show.
func (r *Reconciler) patchMemberStatus(ctx context.Context, m *v1alpha1.EtcdMember, id string, role v1alpha1.MemberRole) error {
	if m.Status.MemberID == "" && id != "" {
		m.Status.MemberID = id
		if err := memberstatus.Apply(ctx, r.Client, m, memberstatus.MemberID); err != nil {
			return fmt.Errorf("failed to record the member ID of EtcdMember %s: %w", m.Name, err)
		}
	}
	if m.Status.Role == role {
		return nil
	}
	m.Status.Role = role
	if err := memberstatus.Apply(ctx, r.Client, m, memberstatus.Role); err != nil {
		return fmt.Errorf("failed to record the role of EtcdMember %s: %w", m.Name, err)
	}
	return nil
}
