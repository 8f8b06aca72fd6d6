package etcdcluster

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
)

// requeueTLSTransition looks again while a CA roll waits on something no
// Kubernetes object announces: the kubelet bringing a renewed certificate
// into a running Pod, which the members are then asked to prove.
const requeueTLSTransition = 5 * time.Second

// tlsView is what this pass decided about the cluster's TLS.
type tlsView struct {
	// decided is false when the pass could not work the TLS out (a source
	// is invalid or a read failed): members then keep the TLS they have.
	decided bool
	peer    *tlsSection
	client  *tlsSection
	// bundles are the cluster's trust bundle ConfigMaps by name.
	bundles map[string]certs.Bundle
	// pending names what the pass waits for (cert-manager issuing).
	pending string
}

// tlsSection is one side's trust and certificate sources.
type tlsSection struct {
	name   string
	source v1alpha1.CertificateSource
	plan   certs.TrustPlan
	// bundle is the ConfigMap of plan.Target.
	bundle string
	// ca and previous are the operator's CA of the section and, during a
	// rotation, the one it replaces. For the client side with another
	// source, ca issues only client certificates (the operator's).
	ca, previous *certs.KeyPair
	// wanted is what the section's certificates come from now.
	wanted certs.Bundle
	// shared is the certificate every member serves with a Secret or a
	// cert-manager source.
	shared *certs.KeyPair
	// common is what every TLS-speaking member trusts.
	common certs.Bundle
	// caNotAfter, nextRenewal are for status.
	caNotAfter  time.Time
	nextRenewal time.Time
}

// reconcileTLS keeps every certificate and trust bundle the cluster's TLS
// needs and decides the TLS each member must run (memberTLS). It restarts
// nothing itself: a member whose TLS differs from its target is outdated,
// and the rollout restarts it, one member at a time. Renewed certificates
// go into the members' Secrets, which etcd reads at every handshake.
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
	rotate := r.rotationRequested(s)
	for _, name := range []string{v1alpha1.TLSSectionPeer, v1alpha1.TLSSectionClient} {
		sec, err := r.prepareSection(ctx, s, name, rotate)
		if err != nil {
			return ctrl.Result{}, err
		}
		if name == v1alpha1.TLSSectionPeer {
			s.tls.peer = sec
		} else {
			s.tls.client = sec
		}
	}
	if rotate != "" {
		if s.cluster.Status.TLS == nil {
			s.cluster.Status.TLS = &v1alpha1.TLSStatus{}
		}
		s.cluster.Status.TLS.RotatedFor = rotate
		r.event(s.cluster, corev1.EventTypeNormal, "CARotationStarted", "RotateCA",
			"Rotating the operator-managed CAs: members trust the old and the new CA first, then their certificates switch, then the old CA is dropped")
	}
	published, err := r.publishedCertificates(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, sec := range []*tlsSection{s.tls.peer, s.tls.client} {
		if err := r.planSection(ctx, s, sec, published); err != nil {
			return ctrl.Result{}, err
		}
	}
	s.tls.decided = true
	if err := r.publish(ctx, s, published); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.collectBundles(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	r.recordTLSStatus(s)
	if s.tls.pending != "" && s.progress.reason == "" {
		s.setProgress(v1alpha1.TLSSourcePendingReason, "%s", s.tls.pending)
	}
	for _, sec := range []*tlsSection{s.tls.peer, s.tls.client} {
		if sec.plan.Phase != certs.PhaseSteady {
			return ctrl.Result{RequeueAfter: requeueTLSTransition}, nil
		}
	}
	return ctrl.Result{}, nil
}

// rotationRequested is the rotate-ca annotation's value when it asks for a
// rotation not yet acted on.
func (r *Reconciler) rotationRequested(s *scope) string {
	v := s.cluster.Annotations[v1alpha1.RotateCAAnnotation]
	if v == "" || (s.cluster.Status.TLS != nil && s.cluster.Status.TLS.RotatedFor == v) {
		return ""
	}
	return v
}

// planSection decides the section's trust from what is wanted, what is in
// use and what the members run.
func (r *Reconciler) planSection(ctx context.Context, s *scope, sec *tlsSection, published map[string]memberCerts) error {
	known := certs.NewBundle(sec.wanted)
	for _, b := range s.tls.bundles {
		known = certs.NewBundle(known, b)
	}
	if sec.previous != nil {
		known = certs.NewBundle(known, []*x509.Certificate{sec.previous.Cert})
	}
	loaded := s.loadedBundles(sec.name)
	var inUse []*x509.Certificate
	for _, m := range published {
		if c := m.of(sec.name); c != nil {
			inUse = append(inUse, certs.IssuerIn(c.Cert, known))
		}
	}
	if sec.name == v1alpha1.TLSSectionClient {
		for _, c := range published[""].clients {
			inUse = append(inUse, certs.IssuerIn(c, known))
		}
	}
	in := certs.TrustInput{Wanted: sec.wanted, InUse: certs.NewBundle(inUse), Loaded: loaded}
	// Before an old CA may leave, every member must be seen serving a
	// certificate of a wanted one: the kubelet brings a renewed Secret into
	// a running Pod only after a while.
	if first := certs.PlanTrust(in); first.Switch && sec.wanted.ContainsAll(in.InUse) && first.Phase != certs.PhaseSteady {
		in.InUse = certs.NewBundle(in.InUse, r.servedIssuers(ctx, s, sec, known))
	}
	sec.plan = certs.PlanTrust(in)
	sec.common = commonOf(loaded)
	name, err := r.ensureBundle(ctx, s, sec.name, sec.plan.Target)
	if err != nil {
		return err
	}
	sec.bundle = name
	if sec.previous != nil && sec.plan.Phase == certs.PhaseSteady && !sec.plan.Target.Contains(sec.previous.Cert) {
		return r.dropPreviousCA(ctx, s, sec)
	}
	return nil
}

func commonOf(loaded []certs.Bundle) certs.Bundle {
	if len(loaded) == 0 {
		return nil
	}
	c := loaded[0]
	for _, l := range loaded[1:] {
		c = c.Intersect(l)
	}
	return c
}

// loadedBundles are the bundles of the section that members run with: the
// one each running Pod mounts, and the one each member's spec names (its
// next Pod's). Members without TLS on the section impose nothing.
func (s *scope) loadedBundles(section string) []certs.Bundle {
	var out []certs.Bundle
	add := func(name string) {
		if name != "" {
			out = append(out, s.tls.bundles[name])
		}
	}
	for _, m := range append(append([]*v1alpha1.EtcdMember{}, s.members...), s.deleting...) {
		if e := endpointOf(m.Spec.TLS, section); e != nil {
			add(e.TrustBundle)
		}
		if p := s.pods[m.Name]; p != nil {
			add(podTrustBundle(p, section))
		}
	}
	return out
}

func endpointOf(t *v1alpha1.MemberTLS, section string) *v1alpha1.MemberTLSEndpoint {
	if t == nil {
		return nil
	}
	if section == v1alpha1.TLSSectionPeer {
		return t.Peer
	}
	return t.Client
}

// podTrustBundle is the trust ConfigMap a Pod mounts for the section.
func podTrustBundle(p *corev1.Pod, section string) string {
	want := "tls-" + section + "-trust"
	for _, v := range p.Spec.Volumes {
		if v.Name == want && v.ConfigMap != nil {
			return v.ConfigMap.Name
		}
	}
	return ""
}

// servedIssuers asks every member speaking TLS on the section for the
// certificate it serves. A member that does not answer may still serve any
// CA it trusts, so all of those count.
func (r *Reconciler) servedIssuers(ctx context.Context, s *scope, sec *tlsSection, known certs.Bundle) []*x509.Certificate {
	var out []*x509.Certificate
	c, err := r.Dialer.Dial(ctx, r.endpoints(s), s.access.Options...)
	if err != nil {
		for _, l := range s.loadedBundles(sec.name) {
			out = append(out, l...)
		}
		return out
	}
	defer c.Close()
	for _, m := range s.members {
		if endpointOf(m.Spec.TLS, sec.name) == nil {
			continue
		}
		ep := servedEndpoint(m, sec.name, r.clientURL(m), r.peerURL(m))
		cert, err := c.ServedCertificate(ctx, ep)
		if err != nil {
			if e := endpointOf(m.Spec.TLS, sec.name); e != nil {
				out = append(out, s.tls.bundles[e.TrustBundle]...)
			}
			continue
		}
		out = append(out, certs.IssuerIn(cert, known))
	}
	return out
}

// servedEndpoint is where a member serves the section's TLS: its client
// URL, its peer URL, or the transition port while its peer URL is still
// plaintext.
func servedEndpoint(m *v1alpha1.EtcdMember, section, clientURL, peerURL string) string {
	raw := peerURL
	if section == v1alpha1.TLSSectionClient {
		raw = clientURL
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if u.Scheme == "http" && section == v1alpha1.TLSSectionPeer {
		u.Host = fmt.Sprintf("%s:%d", u.Hostname(), v1alpha1.PeerTLSTransitionPort)
	}
	u.Scheme = "https"
	return u.String()
}

// memberTLS is the TLS the member must run, with the URLs that go with it.
// Until the pass has decided, it is what the member runs now.
func (s *scope) memberTLS(m *v1alpha1.EtcdMember) (t *v1alpha1.MemberTLS, peerURL, clientURL string) {
	peerURL, clientURL = m.Spec.PeerURL, m.Spec.ClientURL
	if s.tls == nil || !s.tls.decided || s.cluster.Spec.TLS == nil {
		return m.Spec.TLS, peerURL, clientURL
	}
	spec := s.cluster.Spec.TLS
	// Plaintext stays until every member serves TLS, so that the operator
	// and clients always find one scheme every member serves. Once dropped
	// from a member it is not brought back by another member's restart.
	plaintext := spec.Client.AllowPlaintext
	if !plaintext {
		dropped := m.Spec.TLS != nil && m.Spec.TLS.Client != nil && !m.Spec.TLS.Client.Plaintext
		plaintext = !dropped && !s.everyMemberRuns(func(t *v1alpha1.MemberTLS) bool { return t.Client != nil })
	}
	t = &v1alpha1.MemberTLS{
		Peer: &v1alpha1.MemberTLSEndpoint{TrustBundle: s.tls.peer.bundle},
		Client: &v1alpha1.MemberTLSEndpoint{
			TrustBundle:    s.tls.client.bundle,
			ClientCertAuth: spec.Client.IsMutual(),
			Plaintext:      plaintext,
		},
	}
	clientURL = withScheme(clientURL, "https")
	// A plaintext peer URL moves to the TLS transition port once every
	// member dials its peers with TLS; until then the member listens on
	// both.
	if strings.HasPrefix(peerURL, "http://") && s.everyMemberRuns(func(t *v1alpha1.MemberTLS) bool { return t.Peer != nil }) {
		peerURL = transitionPeerURL(peerURL)
	}
	return t, peerURL, clientURL
}

// everyMemberRuns: every member's spec and running Pod have TLS as ok says.
// A Pod not built from its member's spec does not count.
func (s *scope) everyMemberRuns(ok func(*v1alpha1.MemberTLS) bool) bool {
	for _, m := range append(append([]*v1alpha1.EtcdMember{}, s.members...), s.deleting...) {
		if m.Spec.TLS == nil || !ok(m.Spec.TLS) {
			return false
		}
		p := s.pods[m.Name]
		if p == nil || pod.Outdated(m, p.Annotations) {
			return false
		}
	}
	return true
}

// tlsOutdated: the member's TLS or URLs differ from their target.
func (s *scope) tlsOutdated(m *v1alpha1.EtcdMember) bool {
	t, peer, clientURL := s.memberTLS(m)
	return !equality.Semantic.DeepEqual(t, m.Spec.TLS) || peer != m.Spec.PeerURL || clientURL != m.Spec.ClientURL
}

// newMemberURLs are the URLs a member created now gets: TLS as soon as every
// member can speak it, plaintext while a cluster is turning to TLS.
func (s *scope) newMemberURLs(peerURL, clientURL string) (string, string, *v1alpha1.MemberTLS) {
	if s.tls == nil || !s.tls.decided || s.cluster.Spec.TLS == nil {
		return peerURL, clientURL, nil
	}
	probe := &v1alpha1.EtcdMember{Spec: v1alpha1.EtcdMemberSpec{PeerURL: peerURL, ClientURL: clientURL}}
	t, _, c := s.memberTLS(probe)
	if len(s.members) == 0 || s.everyMemberRuns(func(t *v1alpha1.MemberTLS) bool { return t.Peer != nil }) {
		peerURL = withScheme(peerURL, "https")
	}
	return peerURL, c, t
}

func withScheme(u, scheme string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		return scheme + u[i:]
	}
	return u
}

func transitionPeerURL(peerURL string) string {
	u, err := url.Parse(peerURL)
	if err != nil {
		return peerURL
	}
	u.Scheme = "https"
	u.Host = fmt.Sprintf("%s:%d", u.Hostname(), v1alpha1.PeerTLSTransitionPort)
	return u.String()
}

// recordTLSStatus reports each section's phase, bundle and dates.
func (r *Reconciler) recordTLSStatus(s *scope) {
	st := s.cluster.Status.TLS
	if st == nil {
		st = &v1alpha1.TLSStatus{}
	}
	sectionStatus := func(sec *tlsSection) *v1alpha1.TLSSectionStatus {
		out := &v1alpha1.TLSSectionStatus{TrustBundle: sec.bundle, Phase: sec.plan.Phase}
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
	st.Peer, st.Client = sectionStatus(s.tls.peer), sectionStatus(s.tls.client)
	s.cluster.Status.TLS = st
}
