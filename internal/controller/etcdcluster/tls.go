package etcdcluster

import (
	"context"
	"errors"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/carotation"
	"github.com/quorumctl/etcd-operator/internal/certs"
)

// requeueTLSPending looks again while cert-manager issues: its Secret is
// not the cluster's own object, so no watch announces it.
const requeueTLSPending = 5 * time.Second

// tlsView is what this pass found and decided about the cluster's TLS.
type tlsView struct {
	// decided: every certificate a new member needs exists (no source is
	// invalid or pending), so members may be created.
	decided bool
	peer    *tlsSection
	client  *tlsSection
	// bundles are the cluster's trust bundle ConfigMaps by name.
	bundles map[string]certs.Bundle
	// pending names what the pass waits for (cert-manager issuing).
	pending string
	// transition is where turning TLS on for the running cluster stands,
	// nil when it is not under way (tls_transition.go).
	transition *v1alpha1.TLSTransitionStatus
}

// tlsSection is one side's trust and certificate source.
type tlsSection struct {
	name   string
	source v1alpha1.CertificateSource
	// bundle is the trust bundle ConfigMap of wanted.
	bundle string
	// ca is the operator's CA of the section. For the client side with
	// another source it exists only with mutual TLS, and signs only client
	// certificates (the operator's and those issued on request).
	ca *certs.KeyPair
	// rotation is the state of the operator's CA, nil without one.
	rotation *caState
	// wanted are the CAs members of the section trust.
	wanted certs.Bundle
	// shared is the certificate every member serves with a Secret or a
	// cert-manager source.
	shared *certs.KeyPair
	// leafCA signs the members' own certificates when there is no shared
	// one: the operator's CA with OperatorManaged, and still with a
	// source switched from it until the switch's pass 2.
	leafCA *certs.KeyPair
	// adopted is what a Secret or cert-manager source's members are
	// given, and its CA's rotation (tls_sourceca.go); nil for the
	// operator-managed source.
	adopted *sourceState
	// caNotAfter, nextRenewal are for status.
	caNotAfter  time.Time
	nextRenewal time.Time
	// phase is the pass of a CA rotation in progress, "" for none.
	phase string
	// wait is what holds the section's rotation, beside its own work.
	wait carotation.Wait
	// sourceID names the source the spec gives (package tlssource).
	sourceID string
	// switchFrom and switchTo name a switch of the source under way
	// (tls_sourceswitch.go); empty when none is.
	switchFrom, switchTo string
}

// reconcileTLS keeps every certificate and trust bundle the cluster's TLS
// needs, and takes the step of a CA rotation (tls_rotation.go). spec.tls is
// fixed at creation, so a member's TLS is decided when it is created
// (newMemberTLS); only its trust bundles change afterwards, which the
// rollout applies (targetTLS), restarting members one at a time. Renewed
// leaf certificates go into the members' Secrets in place; etcd reads them
// at every handshake, so a renewal restarts nothing.
func (r *Reconciler) reconcileTLS(ctx context.Context, s *scope) (ctrl.Result, error) {
	spec := s.cluster.Spec.TLS
	s.tls = &tlsView{bundles: map[string]certs.Bundle{}}
	if spec == nil {
		s.tls.decided = true
		s.cluster.Status.TLS = nil
		return ctrl.Result{}, nil
	}
	if err := r.readBundles(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	for _, name := range []string{v1alpha1.TLSSectionPeer, v1alpha1.TLSSectionClient} {
		sec, err := r.prepareSection(ctx, s, name)
		if err != nil {
			return ctrl.Result{}, err
		}
		if name == v1alpha1.TLSSectionPeer {
			s.tls.peer = sec
		} else {
			s.tls.client = sec
		}
	}
	if s.tls.pending != "" {
		// Nothing is published half: a member's Secret holds both sides'
		// certificates or it is not written, and no member is created.
		if s.progress.reason == "" {
			s.setProgress(v1alpha1.TLSSourcePendingReason, "%s", s.tls.pending)
		}
		// A running cluster waiting on its source (a switch to
		// cert-manager, a new issuer, a Certificate cert-manager cannot
		// issue) is not at its target either: the members keep what they
		// have, and Ready says what is awaited.
		s.reached = false
		return ctrl.Result{RequeueAfter: requeueTLSPending}, nil
	}
	for _, sec := range []*tlsSection{s.tls.peer, s.tls.client} {
		name, err := r.ensureBundle(ctx, s, sec.name, sec.wanted)
		if err != nil {
			return ctrl.Result{}, err
		}
		sec.bundle = name
	}
	published, err := r.publishedCertificates(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.publish(ctx, s, published); err != nil {
		return ctrl.Result{}, err
	}
	s.tls.decided = true
	if err := r.collectBundles(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	res, err := r.rotateCAs(ctx, s, published)
	// A failed rotation step leaves the transition's to be taken, and the
	// other way round; neither stops the phases after this one.
	tres, terr := r.transitionTLS(ctx, s)
	res, err = soonest(res, tres), errors.Join(err, terr)
	r.recordTLSStatus(s)
	// The pass's look at the target was taken before the trust bundles
	// were known: a rotation under way is no target reached, and one that
	// ended this pass leaves no deadline behind (latchTarget kept it, from
	// the rotation the last pass recorded).
	switch {
	case s.reached && (s.rotationSummary() != "" || s.switchSummary() != "" || s.transitionActive()):
		s.reached = false
	case s.reached:
		s.cluster.Status.ProgressDeadline = nil
	}
	return soonest(res, ctrl.Result{RequeueAfter: untilRenewal(s)}), err
}

// untilRenewal is when the next certificate falls due, so that a renewal
// does not wait for some other event to bring the cluster back.
func untilRenewal(s *scope) time.Duration {
	var next time.Time
	for _, sec := range []*tlsSection{s.tls.peer, s.tls.client} {
		if !sec.nextRenewal.IsZero() && (next.IsZero() || sec.nextRenewal.Before(next)) {
			next = sec.nextRenewal
		}
	}
	if next.IsZero() {
		return 0
	}
	// A second past due, so the pass that wakes sees it due.
	return max(next.Sub(s.now)+time.Second, time.Second)
}

// endpointOf is the member's TLS on one side, nil for none.
func endpointOf(t *v1alpha1.MemberTLS, section string) *v1alpha1.MemberTLSEndpoint {
	if t == nil {
		return nil
	}
	if section == v1alpha1.TLSSectionPeer {
		return t.Peer
	}
	return t.Client
}

// newMemberTLS is the TLS and URLs of a member created now: https on both
// sides when the cluster has TLS. Only called once the pass has decided
// (createMember checks).
func (s *scope) newMemberTLS(peerURL, clientURL string) (string, string, *v1alpha1.MemberTLS) {
	spec := s.cluster.Spec.TLS
	if spec == nil {
		return peerURL, clientURL, nil
	}
	t := &v1alpha1.MemberTLS{
		Peer: &v1alpha1.MemberTLSEndpoint{TrustBundle: s.tls.peer.bundle},
		Client: &v1alpha1.MemberTLSEndpoint{
			TrustBundle:    s.tls.client.bundle,
			ClientCertAuth: spec.Client.IsMutual(),
		},
	}
	if s.transitionActive() {
		// While TLS is turned on, a member joins serving both schemes,
		// reachable by plaintext peers and clients alike; the transition
		// then moves it on like the others (docs/design/0023).
		return peerURL, clientURL, t
	}
	return withScheme(peerURL, "https"), withScheme(clientURL, "https"), t
}

func withScheme(u, scheme string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		return scheme + u[i:]
	}
	return u
}

// recordTLSStatus reports each section's bundle and dates.
func (r *Reconciler) recordTLSStatus(s *scope) {
	sectionStatus := func(sec *tlsSection) *v1alpha1.TLSSectionStatus {
		out := &v1alpha1.TLSSectionStatus{TrustBundle: sec.bundle, Rotation: sec.phase}
		if was := sectionStatusOf(s.cluster.Status.TLS, sec.name); was != nil && was.Rotation != "" && sec.phase == "" {
			r.event(s.cluster, corev1.EventTypeNormal, "CARotationCompleted", "RotateCA",
				"The %s CA rotation is complete: every member trusts the new CA alone", sec.name)
		}
		if !sec.caNotAfter.IsZero() {
			t := metav1.NewTime(sec.caNotAfter)
			out.CANotAfter = &t
		}
		if !sec.nextRenewal.IsZero() {
			t := metav1.NewTime(sec.nextRenewal)
			out.NextRenewal = &t
		}
		return out
	}
	st := &v1alpha1.TLSStatus{Peer: sectionStatus(s.tls.peer), Client: sectionStatus(s.tls.client), Transition: s.tls.transition}
	if was := s.cluster.Status.TLS; was != nil {
		st.RotateCARequest = was.RotateCARequest
	}
	for _, sec := range []*tlsSection{s.tls.peer, s.tls.client} {
		if sec.rotation != nil && sec.rotation.request != "" {
			st.RotateCARequest = sec.rotation.request
		}
	}
	s.cluster.Status.TLS = st
}

func sectionStatusOf(st *v1alpha1.TLSStatus, section string) *v1alpha1.TLSSectionStatus {
	if st == nil {
		return nil
	}
	if section == v1alpha1.TLSSectionPeer {
		return st.Peer
	}
	return st.Client
}

// noteRenewal keeps the earliest renewal time of the section, which is
// certs.RenewalTime for what the operator issued and
// certs.ExternalRenewalTime for what a source issued.
func (sec *tlsSection) noteRenewal(t time.Time) {
	if sec.nextRenewal.IsZero() || t.Before(sec.nextRenewal) {
		sec.nextRenewal = t
	}
}
