package etcdcluster

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/carotation"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
)

// A CA rotation's state lives in the CA's Secret, beside the signing CA
// (tls.crt, tls.key), so that it survives operator restarts and each step
// is one write of one object: next.crt and next.key hold the new CA during
// pass 1, previous.crt the replaced one during pass 2, and the annotation
// the rotate-ca request the rotation answers.
const (
	nextCertKey         = "next.crt"
	nextKeyKey          = "next.key"
	previousCertKey     = "previous.crt"
	rotationRequestNote = "etcd.quorumctl.io/rotate-ca-request"
)

// requeueRotation looks again while a rotation waits on what no object of
// the cluster announces: the kubelet bringing reissued certificates into
// the members' Pods.
const requeueRotation = 5 * time.Second

// caState is a section's operator-managed CA and its rotation.
type caState struct {
	secret   *corev1.Secret
	signing  *certs.KeyPair
	next     *certs.KeyPair
	previous *x509.Certificate
	// request is the rotate-ca annotation value last acted on.
	request string
}

func readCAState(secret *corev1.Secret) (*caState, error) {
	signing, err := certs.ParseKeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, err
	}
	st := &caState{secret: secret, signing: signing, request: secret.Annotations[rotationRequestNote]}
	if len(secret.Data[nextCertKey]) > 0 {
		if st.next, err = certs.ParseKeyPair(secret.Data[nextCertKey], secret.Data[nextKeyKey]); err != nil {
			return nil, fmt.Errorf("%s: %w", nextCertKey, err)
		}
	}
	if len(secret.Data[previousCertKey]) > 0 {
		prev, err := certs.ParseCertificates(secret.Data[previousCertKey])
		if err != nil || len(prev) != 1 {
			return nil, fmt.Errorf("%s holds no single certificate", previousCertKey)
		}
		st.previous = prev[0]
	}
	return st, nil
}

// trusted are the CAs the section's members trust: the signing one, and
// during a rotation the new one (pass 1) or the replaced one (pass 2).
func (st *caState) trusted() []*x509.Certificate {
	out := []*x509.Certificate{st.signing.Cert}
	if st.next != nil {
		out = append(out, st.next.Cert)
	}
	if st.previous != nil {
		out = append(out, st.previous)
	}
	return out
}

// rotateCAs takes, for each section with an operator-managed CA, the step
// of its rotation this pass (package carotation decides it). The steps only
// write the CA's Secret; the members' restarts are the rollout's, which
// finds a member on another trust bundle than its section's outdated, and
// the reissued certificates are the next pass's publishing. A step is
// followed by a quick pass that acts on it.
func (r *Reconciler) rotateCAs(ctx context.Context, s *scope, published map[string]memberCerts) (ctrl.Result, error) {
	var res ctrl.Result
	var errs []error
	requested := s.cluster.Annotations[v1alpha1.RotateCAAnnotation]
	_, leafLife := s.cluster.Spec.TLS.Lifetimes()
	for _, sec := range []*tlsSection{s.tls.peer, s.tls.client} {
		st := sec.rotation
		if st == nil {
			continue
		}
		in := carotation.Input{
			Stored:    carotation.Stored{Next: st.next != nil, Previous: st.previous != nil},
			Requested: requested != "" && requested != st.request,
			NotBefore: st.signing.Cert.NotBefore, NotAfter: st.signing.Cert.NotAfter,
			LeafLifetime: leafLife, Now: s.now,
			OnBundle: s.onBundle(sec), Behind: s.behind(sec),
			Rolling: s.rollingOtherwise() || sec.sourceRotating(), Paused: s.cluster.Spec.Rollout.Paused,
			KeepOld: keepOldCA(s.cluster),
		}
		if in.Previous {
			in.Switched = r.switched(ctx, s, sec, published)
		}
		d := carotation.Decide(in)
		sec.phase, sec.wait = d.Phase, d.Wait
		if d.Phase != "" {
			res = soonest(res, ctrl.Result{RequeueAfter: requeueRotation})
		} else {
			// Come back when the CA falls due, and when it can no
			// longer wait for another rollout.
			for _, at := range []time.Time{carotation.DueAt(in.NotBefore, in.NotAfter, leafLife), carotation.UrgentAt(in.NotBefore, in.NotAfter, leafLife)} {
				if at.After(s.now) {
					res = soonest(res, ctrl.Result{RequeueAfter: at.Sub(s.now) + time.Second})
					break
				}
			}
		}
		if d.Wait == carotation.WaitRollout {
			ctrl.LoggerFrom(ctx).V(1).Info("CA rotation waits for the rollout in progress to end", "section", sec.name)
		}
		if d.Phase != "" && s.cluster.Status.ProgressDeadline == nil {
			// A rotation found under way without a deadline (begun by
			// an operator that set none) is held to one from now.
			armDeadline(s)
		}
		if d.Step == carotation.Stay {
			continue
		}
		// A section's failed step leaves the other's to be taken.
		if err := r.stepRotation(ctx, s, sec, d, requested); err != nil {
			errs = append(errs, err)
			continue
		}
		// Each pass is a target of its own, as a spec change is: every
		// member on the two-CA bundle, every member serving the new
		// certificates, every member on the new CA alone. A pass that
		// does not get there within spec.progressDeadlineSeconds is
		// reported as a stuck rollout is (DeadlineExceeded).
		armDeadline(s)
		res = soonest(res, ctrl.Result{RequeueAfter: time.Second})
	}
	sourceRes, sourceErrs := r.rotateSourceCAs(ctx, s, published)
	return soonest(res, sourceRes), errors.Join(append(errs, sourceErrs...)...)
}

// rotateSourceCAs takes, for each section with a Secret or cert-manager
// source (adopted), the step of its source CA's rotation this pass, and
// records a switch of the section's source. It runs after rotateCAs has
// taken the operator's own CAs' steps, whose phase it leaves in place while
// the source has none; a failed step of one section leaves the other's to
// be taken.
func (r *Reconciler) rotateSourceCAs(ctx context.Context, s *scope, published map[string]memberCerts) (ctrl.Result, []error) {
	var res ctrl.Result
	var errs []error
	for _, sec := range []*tlsSection{s.tls.peer, s.tls.client} {
		if sec.adopted == nil {
			continue
		}
		d := carotation.Decide(r.sourceInput(ctx, s, sec, published))
		// A switch of the section's source is this roll's work: recorded
		// whatever the operator's own CA of the section does.
		if err := r.recordSourceSwitch(ctx, s, sec, d.Phase != ""); err != nil {
			errs = append(errs, err)
			continue
		}
		if sec.phase != "" && d.Phase == "" {
			// The operator's own CA of the section is rotating (pass 3
			// seen on the bundle is the same for both).
			continue
		}
		sec.phase, sec.wait = d.Phase, d.Wait
		if d.Phase == "" {
			continue
		}
		res = soonest(res, ctrl.Result{RequeueAfter: requeueRotation})
		if s.cluster.Status.ProgressDeadline == nil {
			armDeadline(s)
		}
		if d.Step == carotation.Stay {
			continue
		}
		if err := r.stepSourceRotation(ctx, s, sec, d); err != nil {
			errs = append(errs, err)
			continue
		}
		armDeadline(s)
		res = soonest(res, ctrl.Result{RequeueAfter: time.Second})
	}
	return res, errs
}

// sourceRotating: the section's source CA is being rotated (passes 1 and
// 2), so the operator's own CA of the section waits, one change at a time.
func (sec *tlsSection) sourceRotating() bool {
	return sec.adopted != nil && sec.adopted.rotating()
}

// rollingOtherwise: the rollout has members to bring onto the target's
// template (a new version, say), whatever their trust bundles: another
// change in progress, which a rotation waits for before it begins.
func (s *scope) rollingOtherwise() bool {
	if s.cluster.Status.Observed == nil {
		return false
	}
	for _, m := range s.members {
		if !equality.Semantic.DeepEqual(m.Spec.MemberTemplate, s.cluster.Status.Observed.MemberTemplate) || s.podOutdated(m) {
			return true
		}
	}
	return false
}

// stepRotation writes the step into the CA's Secret, as one update that
// fails on a conflict: two passes never both begin a rotation.
func (r *Reconciler) stepRotation(ctx context.Context, s *scope, sec *tlsSection, d carotation.Decision, requested string) error {
	st := sec.rotation
	secret := st.secret.DeepCopy()
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	var reason, note string
	switch d.Step {
	case carotation.Begin:
		caLife, _ := s.cluster.Spec.TLS.Lifetimes()
		next, err := certs.NewCA(caCommonName(s, sec.name), s.now, caLife)
		if err != nil {
			return err
		}
		secret.Data[nextCertKey], secret.Data[nextKeyKey] = next.CertPEM, next.KeyPEM
		why := fmt.Sprintf("as asked by %s=%q", v1alpha1.RotateCAAnnotation, requested)
		if d.Expiring {
			why = fmt.Sprintf("since it expires at %s", st.signing.Cert.NotAfter.UTC().Format(time.RFC3339))
		}
		if d.DuringRollout {
			why += ", too close to its end to wait for the rollout in progress: members that rollout has not restarted yet restart once for both"
		}
		if requested != "" {
			// The new CA is newer than any request made so far: an
			// expiring rotation answers a pending request too.
			secret.Annotations[rotationRequestNote] = requested
		}
		reason, note = "CARotationStarted", fmt.Sprintf("Rotating the %s CA %s: pass 1 of 3, members restart one at a time to trust the old and the new CA", sec.name, why)
	case carotation.Switch:
		secret.Data[previousCertKey] = secret.Data[corev1.TLSCertKey]
		secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey] = secret.Data[nextCertKey], secret.Data[nextKeyKey]
		delete(secret.Data, nextCertKey)
		delete(secret.Data, nextKeyKey)
		reason, note = "CARotationSwitching", fmt.Sprintf("Every member trusts the old and the new %s CA: pass 2 of 3, certificates are reissued from the new CA, without restarts", sec.name)
	case carotation.Drop:
		delete(secret.Data, previousCertKey)
		reason, note = "CARotationDroppingOldCA", fmt.Sprintf("Every member serves certificates of the new %s CA: pass 3 of 3, members restart one at a time to trust it alone", sec.name)
	}
	if err := r.Update(ctx, secret); err != nil {
		return fmt.Errorf("failed to write step %s of the %s CA rotation into Secret %s: %w", d.Step, sec.name, secret.Name, err)
	}
	st.secret, st.request = secret, secret.Annotations[rotationRequestNote]
	ctrl.LoggerFrom(ctx).Info("CA rotation", "section", sec.name, "step", d.Step)
	r.event(s.cluster, corev1.EventTypeNormal, reason, "RotateCA", "%s", note)
	return nil
}

// onBundle: every member's spec names the section's trust bundle, its Pod
// (if it has one) was built from that spec, and no restart the rollout made
// is still coming back. A member that does not check the section's
// certificates (a client side without mutual TLS) loads no bundle of it.
func (s *scope) onBundle(sec *tlsSection) bool {
	for _, m := range append(append([]*v1alpha1.EtcdMember{}, s.members...), s.deleting...) {
		e := endpointOf(m.Spec.TLS, sec.name)
		if e == nil || !loadsTrust(sec.name, e) {
			continue
		}
		if e.TrustBundle != sec.bundle {
			return false
		}
		if p := s.pods[m.Name]; p != nil && (pod.Outdated(m, p) || !p.DeletionTimestamp.IsZero()) {
			return false
		}
		if m.Status.RolledAt != nil {
			// Restarted by the rollout and not yet back (clearRolledAt
			// forgets it then): its old Pod may be shutting down.
			return false
		}
	}
	return true
}

// behind: some member's spec, or the Pod that runs it, names another trust
// bundle of the section.
func (s *scope) behind(sec *tlsSection) bool {
	for _, m := range append(append([]*v1alpha1.EtcdMember{}, s.members...), s.deleting...) {
		e := endpointOf(m.Spec.TLS, sec.name)
		if e == nil || !loadsTrust(sec.name, e) {
			continue
		}
		if e.TrustBundle != sec.bundle {
			return true
		}
		if p := s.pods[m.Name]; p != nil {
			if b := pod.MountedTrustBundle(p, sec.name); b != "" && b != sec.bundle {
				return true
			}
		}
	}
	return false
}

func loadsTrust(section string, e *v1alpha1.MemberTLSEndpoint) bool {
	return section == v1alpha1.TLSSectionPeer || e.ClientCertAuth
}

// switched: every member is seen serving certificates of the section's
// signing CA. The operator reads what a member serves on its client port.
// The peer certificate sits in the same Secret, which the kubelet brings
// into the Pod in one piece, and publishMember reissues both leaves
// together, so a member serving the client certificate its Secret holds
// now also has the peer certificate the Secret holds now; the peer port
// itself may be closed to the operator by the cluster's NetworkPolicy. A
// member that does not answer holds the pass: it may present an old
// certificate when it comes back.
func (r *Reconciler) switched(ctx context.Context, s *scope, sec *tlsSection, published map[string]memberCerts) bool {
	if sec.name == v1alpha1.TLSSectionClient && sec.source != v1alpha1.CertificateSourceOperatorManaged {
		// The CA signs only client certificates, which the operator
		// hands out directly: no member serves one.
		return true
	}
	for _, m := range append(append([]*v1alpha1.EtcdMember{}, s.members...), s.deleting...) {
		if m.Spec.TLS == nil || m.Pending() || m.Spec.Dormant {
			continue
		}
		mc := published[m.Name]
		leaf := mc.of(sec.name)
		if leaf == nil || !certs.IssuedBy(leaf.Cert, sec.ca.Cert) {
			ctrl.LoggerFrom(ctx).V(1).Info("CA rotation: the member's Secret does not hold the new certificate yet", "member", m.Name, "section", sec.name)
			return false
		}
		endpoint, want := r.clientURL(m), mc.client
		if s.tls.client.source != v1alpha1.CertificateSourceOperatorManaged {
			// No operator-issued client leaf to tell the Secret's
			// version by: ask the peer port itself.
			endpoint, want = r.peerURL(m), mc.peer
		}
		served, err := r.servedCertificate(ctx, s, endpoint)
		if err != nil || want == nil || !served.Equal(want.Cert) {
			ctrl.LoggerFrom(ctx).V(1).Info("CA rotation: the member does not serve its new certificate yet", "member", m.Name, "section", sec.name, "error", err)
			return false
		}
	}
	return true
}

// servedCertificate is the certificate the endpoint presents.
func (r *Reconciler) servedCertificate(ctx context.Context, s *scope, endpoint string) (*x509.Certificate, error) {
	if r.ServedCertificate != nil {
		return r.ServedCertificate(ctx, endpoint)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return certs.ServedCertificate(ctx, s.access.URL(endpoint))
}

// targetTLS is the TLS the member must run: its own, with each side's trust
// bundle the section's current one. Only the bundles roll (spec.tls is
// fixed at creation); a client side without mutual TLS loads no bundle, so
// its recorded one is left as it is rather than restarting the member for
// a file it does not read.
func (s *scope) targetTLS(m *v1alpha1.EtcdMember) *v1alpha1.MemberTLS {
	t := m.Spec.TLS
	if t == nil || s.tls == nil || !s.tls.decided || s.tls.peer == nil || s.tls.client == nil {
		return t
	}
	out := t.DeepCopy()
	if out.Peer != nil && s.tls.peer.bundle != "" {
		out.Peer.TrustBundle = s.tls.peer.bundle
	}
	if out.Client != nil && out.Client.ClientCertAuth && s.tls.client.bundle != "" {
		out.Client.TrustBundle = s.tls.client.bundle
	}
	return out
}

// keepOldCA: the cluster's v1alpha1.KeepOldCAAnnotation holds pass 3.
func keepOldCA(c *v1alpha1.EtcdCluster) bool {
	return c.Annotations[v1alpha1.KeepOldCAAnnotation] != ""
}

// rotationPaused: a person holds some section's rotation, spec.rollout.paused
// its switch or v1alpha1.KeepOldCAAnnotation its drop of the old CA; the
// conditions say RolloutPaused, what a person has to undo.
func (s *scope) rotationPaused() bool {
	if s.tls == nil || s.tls.peer == nil || s.tls.client == nil {
		return false
	}
	for _, w := range []carotation.Wait{s.tls.peer.wait, s.tls.client.wait} {
		if w == carotation.WaitPaused || w == carotation.WaitKeepOld {
			return true
		}
	}
	return false
}

// rotationSummary says each section's pass, for the CARotating reason.
func (s *scope) rotationSummary() string {
	if s.tls == nil || s.tls.peer == nil || s.tls.client == nil {
		return ""
	}
	var parts []string
	for _, sec := range []*tlsSection{s.tls.peer, s.tls.client} {
		switch sec.phase {
		case v1alpha1.CARotationTrustingNewCA:
			if sec.wait == carotation.WaitPaused {
				parts = append(parts, sec.name+" CA: pass 1 of 3 done, every member trusts the old and the new CA; spec.rollout.paused holds the switch to certificates of the new CA")
				continue
			}
			parts = append(parts, sec.name+" CA: pass 1 of 3, members restart to trust the old and the new CA")
		case v1alpha1.CARotationSwitchingCertificates:
			if sec.wait == carotation.WaitKeepOld {
				parts = append(parts, sec.name+" CA: pass 2 of 3 done, every member serves certificates of the new CA and trusts the old one too; annotation "+v1alpha1.KeepOldCAAnnotation+" holds dropping the old CA")
				continue
			}
			parts = append(parts, sec.name+" CA: pass 2 of 3, waiting for every member to serve certificates of the new CA")
		case v1alpha1.CARotationDroppingOldCA:
			parts = append(parts, sec.name+" CA: pass 3 of 3, members restart to trust the new CA alone")
		}
	}
	return strings.Join(parts, "; ")
}
