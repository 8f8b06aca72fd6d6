package etcdcluster

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// latchTarget implements the locking pattern: the operator works towards
// status.observed, not spec. A new spec is adopted only once the current
// target is reached, or once its deadline has passed: a replica edit in the
// middle of a bootstrap or a scale would otherwise leave etcd's membership and
// the members' --initial-cluster disagreeing.
func (r *Reconciler) latchTarget(_ context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	if c.Status.ClusterToken == "" {
		c.Status.ClusterToken = v1alpha1.ClusterToken(c)
	}
	if c.Status.Observed == nil {
		r.adoptSpec(s)
		return ctrl.Result{}, nil
	}
	changed := !specMatchesObserved(c)
	reached := s.reached
	switch {
	case reached && changed:
		r.adoptSpec(s)
	case reached:
		c.Status.ProgressDeadline = nil
	case deadlinePassed(s):
		switch {
		case !c.ClusterFormed():
			// Without a cluster ID no member may be trusted with "existing",
			// and the seed's "new" may already have run: starting over on
			// this object could split-brain, so bootstrap failure is final.
			s.terminal = v1alpha1.BootstrapFailedReason
		case changed:
			r.adoptSpec(s)
		default:
			s.terminal = v1alpha1.DeadlineExceededReason
		}
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) adoptSpec(s *scope) {
	c := s.cluster
	c.Status.Observed = &v1alpha1.ObservedClusterSpec{
		Replicas:       c.DesiredReplicas(),
		MemberTemplate: *c.Spec.MemberTemplate.DeepCopy(),
	}
	if c.Status.Observed.Version == "" {
		c.Status.Observed.Version = v1alpha1.DefaultEtcdVersion
	}
	seconds := int32(defaultDeadlineSecs)
	if c.Spec.ProgressDeadlineSeconds != nil {
		seconds = *c.Spec.ProgressDeadlineSeconds
	}
	deadline := metav1.NewTime(s.now.Add(time.Duration(seconds) * time.Second))
	c.Status.ProgressDeadline = &deadline
	s.reached = s.targetReached()
}

func specMatchesObserved(c *v1alpha1.EtcdCluster) bool {
	o := c.Status.Observed
	if o == nil || o.Replicas != c.DesiredReplicas() {
		return false
	}
	want := c.Spec.MemberTemplate.DeepCopy()
	if want.Version == "" {
		want.Version = v1alpha1.DefaultEtcdVersion
	}
	return equality.Semantic.DeepEqual(*want, o.MemberTemplate)
}

func deadlinePassed(s *scope) bool {
	d := s.cluster.Status.ProgressDeadline
	return d != nil && !s.now.Before(d.Time)
}

// targetReached reports whether the cluster is exactly the latched target:
// the right number of members, each a ready voter, nothing half-done.
func (s *scope) targetReached() bool {
	desired := s.desiredReplicas()
	if desired == 0 {
		return len(s.deleting) == 0 && s.pausedReached()
	}
	// A removed member's Pod is still shutting down: the cluster is not yet
	// what the spec asks for, and it still shows in kubectl get pods.
	if len(s.deleting) > 0 || len(s.leftoverPods) > 0 || len(s.members) != desired {
		return false
	}
	if !s.cluster.ClusterFormed() || !s.etcd.usable() || len(s.etcd.learners()) > 0 {
		return false
	}
	if len(s.etcd.list.Members) != desired {
		return false
	}
	for _, m := range s.members {
		// Ready also means served: each voter's Pod carries the label the
		// client Service selects, which the member controller sets right
		// after the role is recorded.
		if !s.memberReady(m) || s.pods[m.Name].Labels[v1alpha1.RoleLabel] != v1alpha1.RoleLabelVoter {
			return false
		}
	}
	return true
}

// memberReady: the Pod passes its readiness probe and etcd lists the member
// as started.
func (s *scope) memberReady(m *v1alpha1.EtcdMember) bool {
	if m.Pending() || m.Spec.Dormant || !s.podReady(m.Name) || !s.etcd.usable() {
		return false
	}
	em, ok := s.etcd.byPeerURL(s.peerURLs[m.Name])
	return ok && em.Name != ""
}
