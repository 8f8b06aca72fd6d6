package etcdcluster

import (
	"context"
	"crypto/x509"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
	"github.com/quorumctl/etcd-operator/internal/tlssource"
)

// sourceInvalidError is a certificate source that cannot be used as it
// stands (a missing Secret, a missing key, a certificate that does not fit):
// only a person can fix it. status.go turns it into Ready's
// TLSSourceInvalid reason with this message, which names the object.
type sourceInvalidError struct{ message string }

func (e *sourceInvalidError) Error() string { return e.message }

// tlsPendingError: members cannot be created yet because their
// certificates are being issued.
type tlsPendingError struct{ message string }

func (e *tlsPendingError) Error() string { return e.message }

// prepareSection reads (or creates) what the section's certificates come
// from: the operator's CA, the user's Secret, or cert-manager's.
func (r *Reconciler) prepareSection(ctx context.Context, s *scope, name string) (*tlsSection, error) {
	spec := s.cluster.Spec.TLS
	sec := &tlsSection{name: name, source: spec.PeerSource()}
	src := spec.Peer.CertificateSourceSpec
	mutual := false
	if name == v1alpha1.TLSSectionClient {
		sec.source, src, mutual = spec.ClientSource(), spec.Client.CertificateSourceSpec, spec.Client.IsMutual()
	}
	if sec.source == v1alpha1.CertificateSourceOperatorManaged || mutual {
		st, err := r.ensureCA(ctx, s, name)
		if err != nil {
			return nil, err
		}
		sec.ca, sec.rotation = st.signing, st
		sec.wanted = certs.NewBundle(st.trusted())
		sec.caNotAfter = sec.ca.Cert.NotAfter
	}
	if sec.source == v1alpha1.CertificateSourceOperatorManaged {
		sec.leafCA = sec.ca
		sec.sourceID = tlssource.ID(sec.source, src)
		return r.prepareSwitchBack(ctx, s, sec)
	}
	sec.sourceID = tlssource.ID(sec.source, src)
	secretName := src.SecretName
	field := "spec.tls." + name + ".secretName"
	if sec.source == v1alpha1.CertificateSourceCertManager {
		if err := r.ensureCertificate(ctx, s, name, src.IssuerRef); err != nil {
			return nil, err
		}
		secretName, field = certManagerSecretName(s.cluster.Name, name), "the cert-manager Certificate "+certificateName(s.cluster.Name, name)
	}
	var issuer *v1alpha1.IssuerReference
	if sec.source == v1alpha1.CertificateSourceCertManager {
		issuer = src.IssuerRef
	}
	shared, cas, err := r.readSourceSecret(ctx, s, name, secretName, field, issuer)
	if err != nil || shared == nil {
		return nil, err
	}
	// The members are given what the operator adopted from the source,
	// which is what the source holds unless its CA changed: then the old
	// certificate stays until every member trusts the new CA.
	operator, err := r.operatorCA(ctx, s, sec, name)
	if err != nil {
		return nil, err
	}
	adopted, err := r.adoptSource(ctx, s, name, sec.sourceID, shared, cas, operator)
	if err != nil {
		return nil, err
	}
	sec.adopted, sec.shared = adopted, adopted.leaf
	if sec.shared == nil {
		// A switch from OperatorManaged before its pass 2: the members
		// keep per-member certificates of the operator's CA, renewed
		// from it as before (memberLeaf).
		if operator == nil {
			return nil, &sourceInvalidError{message: fmt.Sprintf(
				"the operator's CA Secret %s/%s is missing: the %s members hold certificates of it until the switch to %s reaches its pass 2; restore it from a backup",
				s.cluster.Namespace, v1alpha1.CASecretName(s.cluster.Name, name), name, tlssource.Describe(sec.sourceID))}
		}
		sec.leafCA = operator.signing
		sec.wanted = certs.NewBundle(sec.wanted, adopted.trusted())
		if sec.caNotAfter.IsZero() || operator.signing.Cert.NotAfter.Before(sec.caNotAfter) {
			sec.caNotAfter = operator.signing.Cert.NotAfter
		}
		return sec, nil
	}
	// The source renews it (the user or cert-manager); a watch on its
	// Secret brings the change in, and the pass comes back anyway when two
	// thirds of the certificate's life have passed.
	sec.noteRenewal(certs.ExternalRenewalTime(sec.shared.Cert))
	sec.wanted = certs.NewBundle(sec.wanted, adopted.trusted())
	if sec.caNotAfter.IsZero() || sec.shared.Cert.NotAfter.Before(sec.caNotAfter) {
		sec.caNotAfter = sec.shared.Cert.NotAfter
	}
	return sec, nil
}

// prepareSwitchBack: an OperatorManaged section whose state Secret of a
// source is still there is being switched back from that source. The
// operator's CA is then offered as a source's new CA would be, with no
// shared certificate: the three passes carry it, pass 2 giving the members
// per-member certificates of it again, and the state Secret is emptied once
// the roll has ended (recordSourceSwitch).
func (r *Reconciler) prepareSwitchBack(ctx context.Context, s *scope, sec *tlsSection) (*tlsSection, error) {
	state, err := r.getSecret(ctx, s, sourceStateSecretName(s.cluster.Name, sec.name))
	if err != nil || state == nil || len(state.Data) == 0 {
		// None, or emptied when a switch back ended.
		return sec, err
	}
	mutual := sec.name == v1alpha1.TLSSectionClient && s.cluster.Spec.TLS.Client.IsMutual()
	if !mutual && tlssource.OperatorCAUnused(state.Annotations[adoptedSourceNote]) {
		// A rotation of the operator's CA the switch away cut short ends
		// before the CA is offered again (tls_sourceswitch.go).
		st, err := r.endUnusedRotation(ctx, s, sec.name, sec.rotation, state.Annotations[adoptedSourceNote])
		if err != nil {
			return nil, err
		}
		sec.ca, sec.rotation, sec.leafCA = st.signing, st, st.signing
		sec.wanted, sec.caNotAfter = certs.NewBundle(st.trusted()), st.signing.Cert.NotAfter
	}
	// Offered: every CA of the operator's the members may hold certificates
	// of. That is its signing CA alone, but for a switch away begun during
	// the operator's own rotation and not past its pass 1 (the members
	// still hold the operator's certificates, and the state took over
	// both CAs): back to both, nothing to roll but the source's CA away.
	adopted, err := r.adoptSource(ctx, s, sec.name, sec.sourceID, nil, sec.rotation.trusted(), nil)
	if err != nil {
		return nil, err
	}
	sec.adopted, sec.shared = adopted, adopted.leaf
	if sec.name == v1alpha1.TLSSectionClient && s.cluster.Spec.TLS.Client.IsMutual() {
		// The operator's client CA signs client certificates, the
		// operator's own included: the members trusted it all along.
		sec.wanted = certs.NewBundle(sec.wanted, adopted.trusted())
		return sec, nil
	}
	// The members trust what the state says: the operator's CA only from
	// the roll's pass 1 (as next), so that the passes are counted right.
	sec.wanted = adopted.trusted()
	return sec, nil
}

// operatorCA is the operator's own CA of a section whose source is a
// Secret or cert-manager, if it has one: with mutual TLS on the client side
// it is the one prepareSection keeps anyway; otherwise one left from when
// the section was OperatorManaged, read and never created here.
func (r *Reconciler) operatorCA(ctx context.Context, s *scope, sec *tlsSection, section string) (*caState, error) {
	if sec.rotation != nil {
		return sec.rotation, nil
	}
	name := v1alpha1.CASecretName(s.cluster.Name, section)
	secret, err := r.getSecret(ctx, s, name)
	if err != nil || secret == nil {
		return nil, err
	}
	st, err := readCAState(secret)
	if err != nil {
		return nil, &sourceInvalidError{message: fmt.Sprintf(
			"the operator's CA Secret %s/%s is damaged (%v); restore it from a backup, or delete it if no member holds certificates of it", s.cluster.Namespace, name, err)}
	}
	return st, nil
}

// ensureCA returns the section's operator-managed CA, creating it once,
// with the rotation state its Secret keeps (see tls_rotation.go). It is
// replaced only by a rotation: etcd reads its CA files only at start, so a
// new CA needs the three passes of a bundle roll.
func (r *Reconciler) ensureCA(ctx context.Context, s *scope, section string) (*caState, error) {
	caLife, _ := s.cluster.Spec.TLS.Lifetimes()
	name := v1alpha1.CASecretName(s.cluster.Name, section)
	secret := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.cluster.Namespace, Name: name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		ca, err := certs.NewCA(caCommonName(s, section), s.now, caLife)
		if err != nil {
			return nil, err
		}
		secret = r.ownedSecret(s, name, corev1.SecretTypeTLS, map[string][]byte{
			corev1.TLSCertKey: ca.CertPEM, corev1.TLSPrivateKeyKey: ca.KeyPEM,
		})
		if err := r.Create(ctx, secret); err != nil {
			// An AlreadyExists here is a cache behind: the next pass reads it.
			return nil, fmt.Errorf("failed to create CA Secret %s: %w", name, err)
		}
		return &caState{secret: secret, signing: ca}, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get CA Secret %s: %w", name, err)
	}
	st, err := readCAState(secret)
	if err != nil {
		return nil, &sourceInvalidError{message: fmt.Sprintf(
			"the operator's CA Secret %s/%s is damaged (%v); restore it from a backup: the members trust only that CA", s.cluster.Namespace, name, err)}
	}
	return st, nil
}

// caCommonName is the same for every CA of a section, the rotated ones
// included: a member asking for a client certificate names the CAs it
// accepts by subject, and one name covers both while both are trusted.
func caCommonName(s *scope, section string) string {
	return fmt.Sprintf("%s %s CA (%s)", s.cluster.Name, section, s.cluster.Namespace)
}

// readSourceSecret reads a user's (or cert-manager's, when issuer is set)
// Secret and checks it can serve every member: a key that fits, a CA that
// signed it, the members' names, and both server and client use.
func (r *Reconciler) readSourceSecret(ctx context.Context, s *scope, section, name, field string, issuer *v1alpha1.IssuerReference) (*certs.KeyPair, []*x509.Certificate, error) {
	certManager := issuer != nil
	ref := s.cluster.Namespace + "/" + name
	invalid := func(format string, args ...any) error {
		return &sourceInvalidError{message: fmt.Sprintf("Secret %s (%s): ", ref, field) + fmt.Sprintf(format, args...)}
	}
	var secret corev1.Secret
	reader := r.APIReader
	if certManager {
		reader = r.Client
	}
	err := reader.Get(ctx, client.ObjectKey{Namespace: s.cluster.Namespace, Name: name}, &secret)
	switch {
	case apierrors.IsNotFound(err) && certManager:
		s.tls.pending = fmt.Sprintf("waiting for cert-manager to issue %s's %s certificate into Secret %s", s.cluster.Name, section, ref)
		return nil, nil, nil
	case apierrors.IsNotFound(err):
		return nil, nil, invalid("does not exist")
	case err != nil:
		return nil, nil, fmt.Errorf("failed to get Secret %s: %w", ref, err)
	}
	for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey, etcdaccess.TrustBundleKey} {
		if len(secret.Data[k]) == 0 {
			if certManager {
				s.tls.pending = fmt.Sprintf("waiting for cert-manager to fill %s of Secret %s", k, ref)
				return nil, nil, nil
			}
			return nil, nil, invalid("has no %s", k)
		}
	}
	if certManager && !issuedBy(&secret, issuer) {
		// The issuer changed (spec.tls.<section>.issuerRef): cert-manager
		// reissues, and what the Secret holds until then is the old
		// issuer's, which is no switch to the new one yet.
		s.tls.pending = fmt.Sprintf("waiting for cert-manager to reissue %s's %s certificate into Secret %s from %s %s", s.cluster.Name, section, ref, issuerKind(issuer), issuer.Name)
		return nil, nil, nil
	}
	pair, err := certs.ParseKeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, nil, invalid("%v", err)
	}
	cas, err := certs.ParseCertificates(secret.Data[etcdaccess.TrustBundleKey])
	if err != nil || len(cas) == 0 {
		return nil, nil, invalid("ca.crt holds no certificate")
	}
	if !usableBothWays(pair.Cert) {
		return nil, nil, invalid("its certificate must allow both server and client authentication (members dial each other with it)")
	}
	for _, m := range append(append([]*v1alpha1.EtcdMember{}, s.members...), s.deleting...) {
		host := hostOf(r.peerURL(m))
		if err := certs.Verify(pair.Cert, cas, host, s.now); err != nil {
			return nil, nil, invalid("its certificate does not serve member %s as %s: %v", m.Name, host, err)
		}
	}
	// Members get random names, so only a wildcard serves the ones not yet
	// created; checking one such name now keeps the first member from
	// starting with a certificate its later peers would refuse.
	next := v1alpha1.MemberHost(v1alpha1.MemberNamePrefix(s.cluster.Name)+"xxxxx", s.cluster.Name, s.cluster.Namespace, r.clusterDomain())
	if err := certs.Verify(pair.Cert, cas, next, s.now); err != nil {
		wildcard := "*" + next[strings.Index(next, "."):]
		return nil, nil, invalid("its certificate does not serve new members (such as %s): it needs the name %s (%v)", next, wildcard, err)
	}
	if err := certs.Verify(pair.Cert, cas, "", s.now); err != nil {
		return nil, nil, invalid("its certificate is not valid under its ca.crt: %v", err)
	}
	return pair, cas, nil
}

func usableBothWays(c *x509.Certificate) bool {
	if len(c.ExtKeyUsage) == 0 {
		return true
	}
	return (slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageAny)) &&
		(slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth) || slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageAny))
}

// ownedSecret is a Secret of the cluster, collected with it.
func (r *Reconciler) ownedSecret(s *scope, name string, t corev1.SecretType, data map[string][]byte) *corev1.Secret {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.cluster.Namespace, Labels: v1alpha1.ClusterLabels(s.cluster.Name)},
		Type:       t,
		Data:       data,
	}
	_ = controllerutil.SetControllerReference(s.cluster, secret, r.Scheme())
	return secret
}

// readBundles lists the cluster's trust bundles.
func (r *Reconciler) readBundles(ctx context.Context, s *scope) error {
	var cms corev1.ConfigMapList
	if err := r.List(ctx, &cms, client.InNamespace(s.cluster.Namespace),
		client.MatchingLabels{v1alpha1.ClusterLabel: s.cluster.Name}, client.HasLabels{etcdaccess.TrustLabel}); err != nil {
		return fmt.Errorf("failed to list the trust bundles of %s: %w", s.cluster.Name, err)
	}
	for _, cm := range cms.Items {
		b, err := certs.ParseBundle([]byte(cm.Data[etcdaccess.TrustBundleKey]))
		if err == nil {
			s.tls.bundles[cm.Name] = b
		}
	}
	return nil
}

// ensureBundle stores a trust bundle in an immutable ConfigMap named by its
// content and returns the name.
func (r *Reconciler) ensureBundle(ctx context.Context, s *scope, section string, b certs.Bundle) (string, error) {
	if len(b) == 0 {
		return "", fmt.Errorf("no CA to trust for the %s side of %s", section, s.cluster.Name)
	}
	name := fmt.Sprintf("%s-%s-trust-%s", s.cluster.Name, section, b.Hash())
	if _, ok := s.tls.bundles[name]; ok {
		return name, nil
	}
	labels := v1alpha1.ClusterLabels(s.cluster.Name)
	labels[etcdaccess.TrustLabel] = section
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.cluster.Namespace, Labels: labels},
		Immutable:  ptr.To(true),
		Data:       map[string]string{etcdaccess.TrustBundleKey: string(b.PEM())},
	}
	if err := controllerutil.SetControllerReference(s.cluster, cm, r.Scheme()); err != nil {
		return "", err
	}
	if err := r.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("failed to create trust bundle %s: %w", name, err)
	}
	s.tls.bundles[name] = b
	return name, nil
}

// collectBundles deletes trust bundles nothing refers to any more: not the
// current one of a section, not a member's spec. In this version a bundle
// changes only when a Secret or cert-manager source's CA does; members keep
// the bundle they were created with.
func (r *Reconciler) collectBundles(ctx context.Context, s *scope) error {
	keep := map[string]bool{s.tls.peer.bundle: true, s.tls.client.bundle: true}
	for _, m := range append(append([]*v1alpha1.EtcdMember{}, s.members...), s.deleting...) {
		for _, section := range []string{v1alpha1.TLSSectionPeer, v1alpha1.TLSSectionClient} {
			if e := endpointOf(m.Spec.TLS, section); e != nil {
				keep[e.TrustBundle] = true
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.tls.bundles)) {
		if keep[name] {
			continue
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.cluster.Namespace}}
		if err := r.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete unused trust bundle %s: %w", name, err)
		}
		delete(s.tls.bundles, name)
	}
	return nil
}
