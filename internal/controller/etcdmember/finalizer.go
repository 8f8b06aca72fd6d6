package etcdmember

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
	"github.com/quorumctl/etcd-operator/internal/quorum"
)

const (
	requeueRemoval = 2 * time.Second
	removalTimeout = 10 * time.Second
	statusTimeout  = 2 * time.Second
)

// finalize removes a deleted member from etcd before letting it go. It is the
// second quorum gate: whoever deleted the member, etcd loses a voter only if
// the voters that remain keep a quorum of the smaller membership.
func (r *Reconciler) finalize(ctx context.Context, m *v1alpha1.EtcdMember) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(m, v1alpha1.MemberFinalizer) {
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx)
	cluster := &v1alpha1.EtcdCluster{}
	err := r.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.ClusterName}, cluster)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && !cluster.DeletionTimestamp.IsZero()):
		// The whole cluster is going: there is no membership left to keep
		// consistent, and waiting on etcd here would wedge the cascade.
		return ctrl.Result{}, r.releaseFinalizer(ctx, m)
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("failed to get EtcdCluster %s: %w", m.Spec.ClusterName, err)
	}
	// Out of the client Service first: a member that is leaving, for
	// instance a fenced one whose view disagrees with the quorum's, must not
	// take client traffic while its removal waits on the quorum gate.
	if err := r.stopClientTraffic(ctx, m); err != nil {
		return ctrl.Result{}, err
	}
	if rec := cluster.Status.Recovery; rec.Active() && m.Name != rec.Survivor {
		// A disaster recovery stops every member but its survivor. No
		// quorum is left to commit a MemberRemove, and the survivor's
		// --force-new-cluster drops these members from the membership
		// itself (or a snapshot restore forms a new one).
		log.Info("Releasing member stopped by a disaster recovery without removing it from etcd", "recovery", rec.Name)
		return ctrl.Result{}, r.releaseFinalizer(ctx, m)
	}
	unlock := r.disruptions.lock(m)
	done, wait, err := r.removeFromEtcd(ctx, cluster, m)
	unlock()
	if err != nil {
		return ctrl.Result{}, err
	}
	if !done {
		log.Info("Waiting to remove member from etcd", "reason", wait)
		return ctrl.Result{RequeueAfter: requeueRemoval}, nil
	}
	if err := r.releaseStrandedPod(ctx, m); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.releaseFinalizer(ctx, m)
}

// releaseStrandedPod force-deletes the member's Pod when its node is gone or
// not Ready. A graceful delete would leave it Terminating for as long as the
// node is away, holding its volume and showing in every listing, since no
// kubelet is there to confirm it. Forcing is safe here because etcd no
// longer lists the member: should the node come back with the Pod's
// containers, the kubelet stops them as orphans, and a member etcd has
// removed is refused by its peers in any case.
func (r *Reconciler) releaseStrandedPod(ctx context.Context, m *v1alpha1.EtcdMember) error {
	current, err := r.currentPod(ctx, m)
	if err != nil || current == nil || current.Spec.NodeName == "" {
		return err
	}
	node := &corev1.Node{}
	err = r.Get(ctx, types.NamespacedName{Name: current.Spec.NodeName}, node)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("failed to get Node %s: %w", current.Spec.NodeName, err)
	case nodeReady(node):
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("Force-deleting the removed member's Pod on an unavailable node", "pod", current.Name, "node", current.Spec.NodeName)
	if err := r.Delete(ctx, current, client.GracePeriodSeconds(0), client.Preconditions{UID: &current.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to force-delete Pod %s: %w", current.Name, err)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (r *Reconciler) stopClientTraffic(ctx context.Context, m *v1alpha1.EtcdMember) error {
	current, err := r.currentPod(ctx, m)
	if err != nil || current == nil {
		return err
	}
	return pod.SetRoleLabel(ctx, r.Client, current, false)
}

// removeFromEtcd reports done when etcd no longer lists the member.
func (r *Reconciler) removeFromEtcd(ctx context.Context, cluster *v1alpha1.EtcdCluster, m *v1alpha1.EtcdMember) (bool, string, error) {
	siblings, access, endpoints, err := r.reachOthers(ctx, cluster, m)
	if err != nil {
		return false, "", err
	}
	others := 0
	for _, s := range siblings {
		if s.Name != m.Name {
			others++
		}
	}
	if others == 0 {
		// The last member: nothing remains to be told it is gone.
		return true, "", nil
	}
	if len(endpoints) == 0 {
		return false, "no other member is running to remove it through", nil
	}
	ctx, cancel := context.WithTimeout(ctx, removalTimeout)
	defer cancel()
	c, err := r.Dialer.Dial(ctx, endpoints, access.Options...)
	if err != nil {
		return false, fmt.Sprintf("cannot reach etcd: %v", err), nil
	}
	defer c.Close()
	list, err := c.MemberList(ctx)
	if err != nil {
		return false, fmt.Sprintf("cannot list etcd members: %v", err), nil
	}
	self, found := findSelf(list, m, m.PeerURLIn(r.ClusterDomain))
	if !found {
		return true, "", nil
	}
	if !self.IsLearner {
		voters, healthyOthers, selfHealthy := r.countVoters(ctx, c, list, siblings, m, self.ID)
		target := int(cluster.DesiredReplicas())
		if cluster.Status.Observed != nil {
			target = int(cluster.Status.Observed.Replicas)
		}
		if !quorum.RemovalAllowed(voters, healthyOthers, target, selfHealthy) {
			return false, fmt.Sprintf("removing it would leave %d healthy of %d voters, below quorum %d or a quorum of the target %d",
				healthyOthers, voters-1, quorum.Size(voters-1), target), nil
		}
	}
	if _, err := c.MemberRemove(ctx, self.ID); err != nil {
		switch {
		case etcd.IsMemberNotFound(err):
			return true, "", nil
		case etcd.IsUnhealthyCluster(err), etcd.IsUnavailable(err):
			return false, fmt.Sprintf("etcd deferred the removal: %v", err), nil
		}
		return false, "", fmt.Errorf("failed to remove member %s from etcd: %w", m.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Removed member from etcd", "memberID", self.IDString())
	if r.Recorder != nil {
		r.Recorder.Eventf(cluster, m, corev1.EventTypeNormal, "MemberRemoved", "RemoveMember",
			"Removed member %s (%s) from etcd", m.Name, self.IDString())
	}
	return true, "", nil
}

// healthyVoters asks every started voter for its status at once, each with
// its own short deadline: a member on a lost node does not answer at all,
// and must not use up the time the removal itself needs.
//
// A NOSPACE alarm does not make a voter unhealthy: the alarm is the
// cluster's, listed by every member, and a removal under it (the old member
// of a replacement onto a larger volume, say) is as safe as any other.
func healthyVoters(ctx context.Context, c etcd.Client, list etcd.MemberList) map[uint64]bool {
	statuses := make([]*etcd.EndpointStatus, len(list.Members))
	var asked []int
	var eps []string
	for i, v := range list.Members {
		if !v.IsLearner && len(v.ClientURLs) > 0 {
			asked, eps = append(asked, i), append(eps, v.ClientURLs[0])
		}
	}
	for j, a := range etcd.StatusAll(ctx, c, eps, statusTimeout) {
		if a.Err == nil {
			statuses[asked[j]] = &a.Status
		}
	}
	var alarms []etcd.Alarm
	for _, st := range statuses {
		if st != nil && !st.Healthy() && st.LeaderID != 0 {
			callCtx, cancel := context.WithTimeout(ctx, statusTimeout)
			alarms, _ = c.AlarmList(callCtx)
			cancel()
			break
		}
	}
	out := map[uint64]bool{}
	for i, v := range list.Members {
		st := statuses[i]
		// A member that answers for another cluster (one that formed a
		// cluster of its own) holds none of this one's data.
		out[v.ID] = st != nil && st.HealthyDespiteNoSpace(alarms) && (st.ClusterID == 0 || list.ClusterID == 0 || st.ClusterID == list.ClusterID)
	}
	return out
}

func findSelf(list etcd.MemberList, m *v1alpha1.EtcdMember, peerURL string) (etcd.Member, bool) {
	for _, em := range list.Members {
		if m.Status.MemberID != "" && em.IDString() == m.Status.MemberID {
			return em, true
		}
		for _, u := range em.PeerURLs {
			if u == peerURL {
				return em, true
			}
		}
	}
	return etcd.Member{}, false
}

func (r *Reconciler) releaseFinalizer(ctx context.Context, m *v1alpha1.EtcdMember) error {
	r.disruptions.forget(m)
	// The optimistic lock keeps a finalizer added by someone else meanwhile
	// from being dropped with ours.
	patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(m, v1alpha1.MemberFinalizer)
	if err := r.Patch(ctx, m, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to remove finalizer from EtcdMember %s: %w", m.Name, err)
	}
	return nil
}

// reachOthers lists m's cluster's members and works out how to reach etcd
// through the ones other than m that run (a Pod, past their first add): the
// members to ask about m.
func (r *Reconciler) reachOthers(ctx context.Context, cluster *v1alpha1.EtcdCluster, m *v1alpha1.EtcdMember) ([]v1alpha1.EtcdMember, etcdaccess.Access, []string, error) {
	var list v1alpha1.EtcdMemberList
	if err := r.List(ctx, &list, client.InNamespace(m.Namespace),
		client.MatchingLabels{v1alpha1.ClusterLabel: m.Spec.ClusterName}); err != nil {
		return nil, etcdaccess.Access{}, nil, fmt.Errorf("failed to list EtcdMembers of %s: %w", m.Spec.ClusterName, err)
	}
	all := make([]*v1alpha1.EtcdMember, len(list.Items))
	for i := range list.Items {
		all[i] = &list.Items[i]
	}
	access, err := etcdaccess.For(ctx, r.Client, r.APIReader, cluster, all)
	if err != nil {
		return nil, etcdaccess.Access{}, nil, err
	}
	var endpoints []string
	for _, s := range list.Items {
		if s.Name != m.Name && s.Status.PodName != "" && !s.Pending() {
			endpoints = append(endpoints, access.URL(s.ClientURLIn(r.ClusterDomain)))
		}
	}
	return list.Items, access, endpoints, nil
}
