package etcdcluster

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
)

// latchTarget adopts the spec as the target the pass works towards
// (status.observed), on every pass and whatever state the cluster is in: an
// edit made to shed a broken member or to give an OOM-killed one more memory
// must take effect now, not once the cluster is healthy again. What is
// half-done when the target changes is made consistent by the membership
// step itself: a member being added is finished, or removed if the new
// target has no room for it, and nothing is ever reversed half-way through
// an etcd call. observedGeneration records the generation adopted.
func (r *Reconciler) latchTarget(_ context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	if c.Status.ClusterToken == "" {
		c.Status.ClusterToken = v1alpha1.ClusterToken(c)
	}
	switch {
	case c.Status.Observed == nil || !specMatchesObserved(c):
		r.adoptSpec(s)
	case s.reached && !rotationRecorded(c.Status.TLS):
		// A CA rotation's second pass restarts nothing, so the members
		// look like the target; the pass's own deadline runs on (the TLS
		// phase, which knows the pass, keeps s.reached false meanwhile).
		c.Status.ProgressDeadline = nil
	}
	c.Status.ObservedGeneration = c.Generation
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
	armDeadline(s)
	s.reached = s.targetReached()
}

// armDeadline gives the target the pass now works towards (an adopted spec,
// a CA rotation's pass) spec.progressDeadlineSeconds from now.
func armDeadline(s *scope) {
	seconds := int32(defaultDeadlineSecs)
	if s.cluster.Spec.ProgressDeadlineSeconds != nil {
		seconds = *s.cluster.Spec.ProgressDeadlineSeconds
	}
	deadline := metav1.NewTime(s.now.Add(time.Duration(seconds) * time.Second))
	s.cluster.Status.ProgressDeadline = &deadline
}

// rotationRecorded: the last pass recorded a CA rotation under way.
func rotationRecorded(st *v1alpha1.TLSStatus) bool {
	return st != nil && (st.Peer != nil && st.Peer.Rotation != "" || st.Client != nil && st.Client.Rotation != "")
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

// deadlinePassed: the target is not reached and its progress deadline has
// passed. It is a report, never a reason to stop working.
func deadlinePassed(s *scope) bool {
	d := s.cluster.Status.ProgressDeadline
	return !s.reached && d != nil && !s.now.Before(d.Time)
}

// untilDeadline is when to look again so that a deadline passing is noticed
// without any other event: nothing in Kubernetes announces it.
func untilDeadline(s *scope) ctrl.Result {
	d := s.cluster.Status.ProgressDeadline
	if s.reached || d == nil || !s.now.Before(d.Time) {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: d.Sub(s.now) + time.Second/10}
}

// targetReached reports whether the cluster is exactly the latched target:
// the right number of members, each a ready voter, nothing half-done.
func (s *scope) targetReached() bool {
	desired := s.desiredReplicas()
	if desired == 0 {
		return len(s.deleting) == 0 && s.pausedReached()
	}
	// A removed member's Pod is still shutting down: the cluster is not yet
	// what the spec asks for, and it still shows in kubectl get pods. A
	// member judged broken is not what it asks for either, ready or not.
	if len(s.deleting) > 0 || len(s.leftoverPods) > 0 || len(s.members) != desired || len(s.broken) > 0 {
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
		// after the role is recorded. And it means rolled: every member
		// runs the target template.
		if !s.memberReady(m) || s.pods[m.Name].Labels[v1alpha1.RoleLabel] != v1alpha1.RoleLabelVoter {
			return false
		}
		if s.cluster.Status.Observed != nil && s.outdated(m) {
			return false
		}
		if p := s.pods[m.Name]; p != nil && pod.Outdated(m, p) {
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
	em, ok := s.inEtcd(m)
	return ok && em.Name != ""
}
