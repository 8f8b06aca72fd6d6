package etcdcluster

import (
	"context"
	"crypto/x509"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/carotation"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
	"github.com/quorumctl/etcd-operator/internal/tlssource"
)

// A Secret or cert-manager source brings its own CA, and a new one arrives
// with the certificate it signed: the user's Secret (or cert-manager's)
// then holds only the new CA and leaf. etcd reads its CA files only at
// start, so copying that leaf to members that trust only the old CA would
// have their peers refuse it. The operator therefore keeps, per section,
// what the members are given in a Secret of its own (adopted): the leaf
// they serve and the CA(s) it came with, and during a rotation the offered
// CA (next.crt, pass 1) or the replaced one (previous.crt, pass 2). The
// passes are package carotation's, as for the operator's own CA; only
// Begin differs (the next CA is the source's, not made here). See
// docs/design/0020-ca-rotation.md.
const sourceCAKey = etcdaccess.TrustBundleKey

// sourceStateSecretName is the operator's Secret that remembers what a
// source section's members are given.
func sourceStateSecretName(cluster, section string) string {
	return cluster + "-" + section + "-source-state"
}

// sourceState is a source section's adopted certificate and rotation.
type sourceState struct {
	secret *corev1.Secret
	// leaf and cas are what the members are given: the source's
	// certificate and the ca.crt it came with. leaf is nil while the
	// members keep per-member certificates of the operator's CA (cas),
	// before pass 2 of a switch from OperatorManaged.
	leaf *certs.KeyPair
	cas  certs.Bundle
	// next is the source's new ca.crt while members roll onto trusting it
	// (pass 1); previous is the replaced one (pass 2).
	next, previous certs.Bundle
	// offered is what the source holds now; offeredCAs its ca.crt.
	offered    *certs.KeyPair
	offeredCAs certs.Bundle
}

// trusted: the CAs the section's members trust for the source.
func (st *sourceState) trusted() certs.Bundle { return certs.NewBundle(st.cas, st.next, st.previous) }

// changed: the source's ca.crt is not the adopted one.
func (st *sourceState) changed() bool { return !st.offeredCAs.Equal(st.cas) }

// rotating: a rotation of the source's CA is under way (passes 1 and 2;
// pass 3 is seen on the members' bundles).
func (st *sourceState) rotating() bool { return len(st.next) > 0 || len(st.previous) > 0 }

// adoptSource reads the section's adopted state, creating it from what the
// source holds the first time. A renewal under the adopted CA is adopted at
// once (members take it in place, as before); a new CA is only recorded as
// offered, for rotateCAs to begin the three passes with. A source whose CA
// changes again during pass 1 retargets the rotation to the newest CA:
// nothing serves the next CA yet, so the members only roll once more.
//
// sourceID names the source offered; a state created from it records it
// (tls_sourceswitch.go keeps it afterwards).
//
// operator is the operator's own CA of the section, nil for none. When the
// members still hold per-member certificates it issued (a switch from
// OperatorManaged), the state is created with that CA as the adopted
// one and no shared certificate, so that the members keep their own
// certificates, still issued by it, until pass 2 gives them the source's.
func (r *Reconciler) adoptSource(ctx context.Context, s *scope, section, sourceID string, offered *certs.KeyPair, offeredCAs []*x509.Certificate, operator *caState) (*sourceState, error) {
	name := sourceStateSecretName(s.cluster.Name, section)
	secret, err := r.getSecret(ctx, s, name)
	if err != nil {
		return nil, err
	}
	if secret == nil || len(secret.Data) == 0 {
		// None yet, or emptied by the end of a switch back to the
		// operator's CA (tls_sourceswitch.go): made afresh.
		onOperator, err := r.membersIssuedBy(ctx, s, section, operator)
		if err != nil {
			return nil, err
		}
		var fromOperator *caState
		if onOperator {
			fromOperator = operator
		}
		data := map[string][]byte{corev1.TLSCertKey: offered.CertPEM, corev1.TLSPrivateKeyKey: offered.KeyPEM, sourceCAKey: certs.NewBundle(offeredCAs).PEM()}
		from := sourceID
		if fromOperator != nil {
			data = map[string][]byte{sourceCAKey: certs.NewBundle(fromOperator.trusted()).PEM()}
			from = tlssource.ID(v1alpha1.CertificateSourceOperatorManaged, v1alpha1.CertificateSourceSpec{})
		}
		if secret == nil {
			secret = r.ownedSecret(s, name, corev1.SecretTypeOpaque, data)
			secret.Annotations = map[string]string{adoptedSourceNote: from}
			if err := r.Create(ctx, secret); err != nil {
				return nil, fmt.Errorf("failed to create Secret %s: %w", name, err)
			}
		} else {
			secret = secret.DeepCopy()
			secret.Data, secret.Annotations = data, map[string]string{adoptedSourceNote: from}
			if err := r.Update(ctx, secret); err != nil {
				return nil, fmt.Errorf("failed to update Secret %s: %w", name, err)
			}
		}
	}
	st, err := readSourceState(secret)
	if err != nil {
		return nil, &sourceInvalidError{message: fmt.Sprintf(
			"the operator's Secret %s/%s, which holds the certificate the %s members are given, is damaged (%v); delete it to adopt the source's current certificate", s.cluster.Namespace, name, section, err)}
	}
	st.offered, st.offeredCAs = offered, certs.NewBundle(offeredCAs)
	data := map[string][]byte{}
	for k, v := range secret.Data {
		data[k] = v
	}
	switch {
	case !st.changed() && offered == nil:
		// Back to the operator's CA, which the members' certificates
		// come from now: no shared one.
		delete(data, corev1.TLSCertKey)
		delete(data, corev1.TLSPrivateKeyKey)
		delete(data, nextCertKey)
	case !st.changed():
		if st.leaf == nil || !st.leaf.Cert.Equal(offered.Cert) {
			// A renewal under the same CA, or a switch to a source of
			// the same CA (tls_sourceswitch.go), the operator's own
			// included.
			data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey] = offered.CertPEM, offered.KeyPEM
		}
		// Back to the adopted CA during pass 1 (with a new certificate
		// or the old one): nothing to rotate.
		delete(data, nextCertKey)
	case len(st.next) > 0 && !st.offeredCAs.Equal(st.next):
		data[nextCertKey] = st.offeredCAs.PEM()
	}
	if sameData(data, secret.Data) {
		return st, nil
	}
	updated := secret.DeepCopy()
	updated.Data = data
	if err := r.Update(ctx, updated); err != nil {
		return nil, fmt.Errorf("failed to update Secret %s: %w", name, err)
	}
	st, err = readSourceState(updated)
	if err != nil {
		return nil, err
	}
	st.offered, st.offeredCAs = offered, certs.NewBundle(offeredCAs)
	return st, nil
}

// membersIssuedBy: some member's Secret holds a certificate of the section
// issued by the operator's CA (any CA it trusts), which is how a section
// that was OperatorManaged is told apart from one created with its source.
func (r *Reconciler) membersIssuedBy(ctx context.Context, s *scope, section string, operator *caState) (bool, error) {
	if operator == nil {
		return false, nil
	}
	published, err := r.publishedCertificates(ctx, s)
	if err != nil {
		return false, err
	}
	for _, mc := range published {
		leaf := mc.of(section)
		if leaf == nil {
			continue
		}
		for _, ca := range operator.trusted() {
			if certs.IssuedBy(leaf.Cert, ca) {
				return true, nil
			}
		}
	}
	return false, nil
}

func readSourceState(secret *corev1.Secret) (*sourceState, error) {
	st := &sourceState{secret: secret}
	if len(secret.Data[corev1.TLSCertKey]) > 0 || len(secret.Data[corev1.TLSPrivateKeyKey]) > 0 {
		// None until pass 2 of a switch from the operator's own CA: the
		// members keep their per-member certificates meanwhile.
		leaf, err := certs.ParseKeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
		if err != nil {
			return nil, err
		}
		st.leaf = leaf
	}
	for key, into := range map[string]*certs.Bundle{sourceCAKey: &st.cas, nextCertKey: &st.next, previousCertKey: &st.previous} {
		if len(secret.Data[key]) == 0 {
			continue
		}
		b, err := certs.ParseBundle(secret.Data[key])
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("%s holds no certificate", key)
		}
		*into = b
	}
	if len(st.cas) == 0 {
		return nil, fmt.Errorf("has no %s", sourceCAKey)
	}
	return st, nil
}

// sourceInput is what rotateCAs hands package carotation for a source
// section: no expiry (the source renews its CA), a new CA offered when the
// source's ca.crt is not the adopted one.
func (r *Reconciler) sourceInput(ctx context.Context, s *scope, sec *tlsSection, published map[string]memberCerts) carotation.Input {
	st := sec.adopted
	in := carotation.Input{
		Stored:  carotation.Stored{Next: len(st.next) > 0, Previous: len(st.previous) > 0},
		Offered: st.changed(),
		Now:     s.now, OnBundle: s.onBundle(sec), Behind: s.behind(sec),
		// One change at a time: the operator's own CA of the section
		// (the client side with mutual TLS) is not rotating meanwhile.
		Rolling: s.rollingOtherwise() || sec.phase != "",
		Paused:  s.cluster.Spec.Rollout.Paused,
		KeepOld: keepOldCA(s.cluster),
	}
	if in.Previous {
		in.Switched = r.switchedSource(ctx, s, sec, published)
	}
	return in
}

// stepSourceRotation writes the step into the section's state Secret, as
// one update that fails on a conflict.
func (r *Reconciler) stepSourceRotation(ctx context.Context, s *scope, sec *tlsSection, d carotation.Decision) error {
	st := sec.adopted
	secret := st.secret.DeepCopy()
	var reason, note string
	what := fmt.Sprintf("%s CA of the %s source", sec.name, sec.source)
	switch d.Step {
	case carotation.Begin:
		secret.Data[nextCertKey] = st.offeredCAs.PEM()
		reason, note = "CARotationStarted", fmt.Sprintf("The %s changed: pass 1 of 3, members restart one at a time to trust the old and the new CA, and keep serving the certificate of the old one", what)
	case carotation.Switch:
		if !st.offeredCAs.Equal(st.next) {
			// adoptSource retargets next to what the source holds; a
			// pass that read both at different times waits for the next.
			return nil
		}
		secret.Data[previousCertKey] = secret.Data[sourceCAKey]
		secret.Data[sourceCAKey] = st.next.PEM()
		delete(secret.Data, nextCertKey)
		reason, note = "CARotationSwitching", fmt.Sprintf("Every member trusts the old and the new %s CA: pass 2 of 3, the source's new certificate is copied into the members' Secrets, without restarts", sec.name)
		if st.offered == nil {
			// Back to the operator's CA: the members get certificates
			// of their own from it (memberLeaf).
			delete(secret.Data, corev1.TLSCertKey)
			delete(secret.Data, corev1.TLSPrivateKeyKey)
			note = fmt.Sprintf("Every member trusts the old and the new %s CA: pass 2 of 3, the operator issues each member a certificate of its CA, without restarts", sec.name)
		} else {
			secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey] = st.offered.CertPEM, st.offered.KeyPEM
		}
	case carotation.Drop:
		delete(secret.Data, previousCertKey)
		reason, note = "CARotationDroppingOldCA", fmt.Sprintf("Every member serves the certificate of the new %s CA: pass 3 of 3, members restart one at a time to trust it alone", sec.name)
	}
	if err := r.Update(ctx, secret); err != nil {
		return fmt.Errorf("failed to write step %s of the %s CA rotation into Secret %s: %w", d.Step, sec.name, secret.Name, err)
	}
	st.secret = secret
	ctrl.LoggerFrom(ctx).Info("CA rotation of a certificate source", "section", sec.name, "step", d.Step)
	r.event(s.cluster, corev1.EventTypeNormal, reason, "RotateCA", "%s", note)
	return nil
}

// switchedSource: every member's Secret holds the adopted certificate and
// the member is seen serving it on the section's port.
func (r *Reconciler) switchedSource(ctx context.Context, s *scope, sec *tlsSection, published map[string]memberCerts) bool {
	if sec.shared == nil {
		// Back to the operator's CA: per-member certificates of it.
		return r.switched(ctx, s, sec, published)
	}
	for _, m := range append(append([]*v1alpha1.EtcdMember{}, s.members...), s.deleting...) {
		if m.Spec.TLS == nil || m.Pending() || m.Spec.Dormant {
			continue
		}
		leaf := published[m.Name].of(sec.name)
		if leaf == nil || !leaf.Cert.Equal(sec.shared.Cert) {
			ctrl.LoggerFrom(ctx).V(1).Info("CA rotation: the member's Secret does not hold the new certificate yet", "member", m.Name, "section", sec.name)
			return false
		}
		endpoint := r.peerURL(m)
		if sec.name == v1alpha1.TLSSectionClient {
			endpoint = r.clientURL(m)
		}
		served, err := r.servedCertificate(ctx, s, endpoint)
		if err != nil || !served.Equal(sec.shared.Cert) {
			ctrl.LoggerFrom(ctx).V(1).Info("CA rotation: the member does not serve its new certificate yet", "member", m.Name, "section", sec.name, "error", err)
			return false
		}
	}
	return true
}

// sourceSecretToClusters wakes the clusters whose Secret source, or
// cert-manager's Secret, changed: a new CA there begins a rotation, a
// renewal is copied to the members.
func (r *Reconciler) sourceSecretToClusters(ctx context.Context, obj client.Object) []reconcile.Request {
	var list v1alpha1.EtcdClusterList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, c := range list.Items {
		t := c.Spec.TLS
		if t == nil {
			continue
		}
		names := []string{certManagerSecretName(c.Name, v1alpha1.TLSSectionPeer), certManagerSecretName(c.Name, v1alpha1.TLSSectionClient)}
		if t.PeerSource() == v1alpha1.CertificateSourceSecret {
			names = append(names, t.Peer.SecretName)
		}
		if t.ClientSource() == v1alpha1.CertificateSourceSecret {
			names = append(names, t.Client.SecretName)
		}
		for _, n := range names {
			if n == obj.GetName() {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
				break
			}
		}
	}
	return out
}
