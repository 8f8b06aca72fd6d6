package etcdcluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
	tt "github.com/quorumctl/etcd-operator/internal/tlstransition"
)

// requeueTransition looks again while TLS is being turned on: the steps
// wait on restarts, whose end the member's Pod announces, but also on
// etcd's member list, which no object does.
const requeueTransition = 5 * time.Second

// transitionTLS takes the step of turning TLS on for the running cluster
// this pass (package tlstransition decides it; docs/design/0023). Like a CA
// rotation's, its steps only write: a member's spec (ToBoth, ToTLS), which
// the rollout then restarts one member at a time, drained from the client
// Service first and the leader last; the status (SwitchClients), which
// moves the operator's own client to https from the next pass
// (etcdaccess.ShapeOf); or etcd's membership (UpdatePeerURL), for a member
// that came back on https before its URL moved. Each step is decided from
// what the objects and etcd say now, so an operator restarted between two
// steps takes the next one.
//
// It runs once spec.tls is set and some member is short of TLS, and goes
// on until every member runs TLS with an https peer URL; a cluster created
// with TLS never enters it.
func (r *Reconciler) transitionTLS(ctx context.Context, s *scope) (ctrl.Result, error) {
	was := transitionOf(s.cluster)
	if s.cluster.Spec.TLS == nil || !s.tls.decided {
		return ctrl.Result{}, nil
	}
	if was == nil && !s.shortOfTLS() {
		return ctrl.Result{}, nil
	}
	st := &v1alpha1.TLSTransitionStatus{
		ClientsHTTPS:            etcdaccess.ClientsSwitched(s.cluster),
		ReleasePlaintextRequest: s.cluster.Annotations[v1alpha1.ReleasePlaintextAnnotation],
	}
	if was != nil {
		st.Phase, st.Wait = was.Phase, was.Wait
	}
	s.tls.transition = st
	in, why := s.transitionInput()
	d := tt.Decide(in)
	if d.Action == tt.Done && why == "" {
		s.tls.transition = nil
		if was != nil {
			ctrl.LoggerFrom(ctx).Info("TLS transition complete")
			r.event(s.cluster, corev1.EventTypeNormal, "TLSTransitionCompleted", "TurnOnTLS",
				"TLS is on: every member serves TLS alone and is known to its peers by an https URL; plaintext is refused")
		}
		return ctrl.Result{}, nil
	}
	res := ctrl.Result{RequeueAfter: requeueTransition}
	if d.Phase != tt.PhaseNone {
		st.Phase = string(d.Phase)
	}
	st.Wait = string(d.Wait)
	if why != "" {
		// Something else moves the members (a membership change, another
		// rollout, a CA rotation, no view of etcd): one change at a time.
		ctrl.LoggerFrom(ctx).V(1).Info("TLS transition waits", "for", why)
		st.Wait = string(tt.ReasonRestarting)
		return res, nil
	}
	switch d.Action {
	case tt.Wait:
		return res, nil
	case tt.ToBoth:
		m := s.member(d.Member)
		err := r.patchMemberSpec(ctx, m, func(m *v1alpha1.EtcdMember) {
			// Recorded now if an older operator left them empty: the
			// member must keep its http URLs through this pass.
			m.Spec.PeerURL, m.Spec.ClientURL = r.peerURL(m), r.clientURL(m)
			_, _, m.Spec.TLS = s.newMemberTLS(m.Spec.PeerURL, m.Spec.ClientURL)
		})
		if err != nil {
			return res, err
		}
		r.event(s.cluster, corev1.EventTypeNormal, "TLSAdding", "TurnOnTLS",
			"Turning TLS on, pass 1 of 2: member %s restarts to serve TLS beside plaintext", m.Name)
	case tt.SwitchClients:
		st.ClientsHTTPS = true
		st.Phase, st.Wait = string(tt.PhaseClientsMaySwitch), string(tt.ReasonPlaintextInUse)
		r.event(s.cluster, corev1.EventTypeNormal, "TLSClientsMaySwitch", "TurnOnTLS",
			"Every member serves TLS beside plaintext and the operator now uses https: move clients to https, then set the annotation %s", v1alpha1.ReleasePlaintextAnnotation)
	case tt.ToTLS:
		m := s.member(d.Member)
		err := r.patchMemberSpec(ctx, m, func(m *v1alpha1.EtcdMember) {
			m.Spec.PeerURL, m.Spec.ClientURL = withScheme(r.peerURL(m), "https"), withScheme(r.clientURL(m), "https")
		})
		if err != nil {
			return res, err
		}
		r.event(s.cluster, corev1.EventTypeNormal, "TLSRefusingPlaintext", "TurnOnTLS",
			"Turning TLS on, pass 2 of 2: member %s restarts to serve TLS alone; its peer URL moves to https while it is down", m.Name)
	case tt.UpdatePeerURL:
		if err := r.movePeerURL(ctx, s, s.member(d.Member)); err != nil {
			return res, err
		}
	}
	armDeadline(s)
	return ctrl.Result{RequeueAfter: time.Second}, nil
}

func transitionOf(c *v1alpha1.EtcdCluster) *v1alpha1.TLSTransitionStatus {
	if c.Status.TLS == nil {
		return nil
	}
	return c.Status.TLS.Transition
}

// shortOfTLS: some member's spec asks for less than TLS alone.
func (s *scope) shortOfTLS() bool {
	for _, m := range s.members {
		if tt.SpecPass(m) != tt.TLS {
			return true
		}
	}
	return false
}

// transitionActive: TLS is being turned on (this pass found it under way).
func (s *scope) transitionActive() bool {
	return s.tls != nil && s.tls.transition != nil
}

// transitionInput is what the pass observed for tlstransition.Decide, and
// why no step may be taken now, if none may: the transition takes its steps
// from a cluster of the target's size that nothing else is changing.
func (s *scope) transitionInput() (tt.Input, string) {
	in := tt.Input{
		ClientsOnTLS:      s.tls.transition.ClientsHTTPS,
		PlaintextReleased: s.tls.transition.ReleasePlaintextRequest != "",
		Paused:            s.cluster.Spec.Rollout.Paused,
	}
	var why string
	switch {
	case !s.etcd.usable():
		why = "a view of etcd's members"
	case s.settling() != "":
		why = s.settling()
	case len(s.counted()) != s.desiredReplicas():
		why = "the cluster to reach its size"
	case s.rotationSummary() != "":
		why = "the CA rotation to end"
	case s.cluster.Status.Observed != nil && s.templateRolling():
		why = "the rollout of the new template to end"
	}
	leader := s.quorumView().LeaderID
	var last []tt.Member
	for _, m := range s.counted() {
		tm := tt.Member{Name: m.Name, Spec: tt.SpecPass(m), Ready: s.healthyMember(m)}
		if p := s.pods[m.Name]; p != nil && p.DeletionTimestamp.IsZero() {
			tm.Up = true
			tm.Running = runningPass(p)
		}
		em, listed := s.inEtcd(m)
		for _, u := range em.PeerURLs {
			if strings.HasPrefix(u, "https://") {
				tm.PeerHTTPS = true
			}
		}
		if listed && em.ID == leader && leader != 0 {
			last = append(last, tm)
			continue
		}
		in.Members = append(in.Members, tm)
	}
	in.Members = append(in.Members, last...)
	return in, why
}

// templateRolling: some member is not on the target's template yet.
func (s *scope) templateRolling() bool {
	for _, m := range s.members {
		if !equality.Semantic.DeepEqual(m.Spec.MemberTemplate, s.cluster.Status.Observed.MemberTemplate) {
			return true
		}
	}
	return false
}

// runningPass is the pass the etcd in the Pod was started with, read from
// its flags.
func runningPass(p *corev1.Pod) tt.Pass {
	certificates, https := pod.PeerTLSOf(p)
	switch {
	case https:
		return tt.TLS
	case certificates:
		return tt.Both
	}
	return tt.Plain
}

func (r *Reconciler) patchMemberSpec(ctx context.Context, m *v1alpha1.EtcdMember, change func(*v1alpha1.EtcdMember)) error {
	patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
	change(m)
	if err := r.Patch(ctx, m, patch); err != nil {
		return fmt.Errorf("failed to set the TLS of EtcdMember %s: %w", m.Name, err)
	}
	return nil
}

// movePeerURL tells etcd the member's https peer URL. The member
// controller does it before it creates the member's Pod (see
// etcdmember.movePeerURL); this is for a member whose Pod came up first (an
// operator restarted between the two): unreachable by its peers until
// then, so moved at once.
func (r *Reconciler) movePeerURL(ctx context.Context, s *scope, m *v1alpha1.EtcdMember) error {
	em, ok := s.inEtcd(m)
	if !ok {
		return fmt.Errorf("member %s is not in etcd's member list", m.Name)
	}
	url := r.peerURL(m)
	_, _, err := r.withClient(ctx, s, func(c etcd.Client) (etcd.Member, etcd.MemberList, error) {
		list, err := c.MemberUpdate(ctx, em.ID, []string{url})
		return etcd.Member{}, list, err
	})
	if err != nil {
		return fmt.Errorf("failed to move the peer URL of member %s to %s: %w", m.Name, url, err)
	}
	ctrl.LoggerFrom(ctx).Info("Moved a member's peer URL to https", "member", m.Name, "peerURL", url)
	r.event(s.cluster, corev1.EventTypeNormal, "TLSPeerURLUpdated", "TurnOnTLS",
		"Told etcd the https peer URL of member %s, %s", m.Name, url)
	return nil
}

// transitionSummary says where turning TLS on stands, for the
// TLSTransitioning reason; "" when it is not under way.
func (s *scope) transitionSummary() string {
	if !s.transitionActive() {
		return ""
	}
	st := s.tls.transition
	var msg string
	switch tt.Phase(st.Phase) {
	case tt.PhaseClientsMaySwitch:
		msg = "turning TLS on: every member serves https beside plaintext; move clients to https"
	case tt.PhaseRefusingPlaintext:
		msg = "turning TLS on, pass 2 of 2: members restart one at a time to serve TLS alone"
	default:
		msg = "turning TLS on, pass 1 of 2: members restart one at a time to serve TLS beside plaintext"
	}
	switch tt.Reason(st.Wait) {
	case tt.ReasonPlaintextInUse:
		msg += fmt.Sprintf(", then set the annotation %s to take plaintext away", v1alpha1.ReleasePlaintextAnnotation)
	case tt.ReasonPaused:
		msg += "; spec.rollout.paused holds the next restart"
	case tt.ReasonQuorum:
		msg += "; a member's peer URL moves only while every other member serves"
	}
	return msg
}
