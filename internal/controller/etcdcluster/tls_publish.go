package etcdcluster

import (
	"bytes"
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
)

// Organizations of the client certificates the operator issues; etcd knows
// the holder by the common name, these tell people apart in audits.
const (
	operatorOrganization = "etcd-operator"
	adminOrganization    = "etcd-administrators"
	// requestedOrganization marks certificates issued on request.
	requestedOrganization = "etcd-requested"
)

// memberCerts are the certificates published in one member's Secret.
type memberCerts struct {
	secret       *corev1.Secret
	peer, client *certs.KeyPair
}

func (m memberCerts) of(section string) *certs.KeyPair {
	if section == v1alpha1.TLSSectionPeer {
		return m.peer
	}
	return m.client
}

// publishedCertificates reads what the members' Secrets hold now.
func (r *Reconciler) publishedCertificates(ctx context.Context, s *scope) (map[string]memberCerts, error) {
	out := map[string]memberCerts{}
	for _, m := range append(append([]*v1alpha1.EtcdMember{}, s.members...), s.deleting...) {
		secret, err := r.getSecret(ctx, s, v1alpha1.MemberTLSSecretName(m.Name))
		if err != nil {
			return nil, err
		}
		mc := memberCerts{secret: secret}
		if secret != nil {
			mc.peer, _ = certs.ParseKeyPair(secret.Data[pod.PeerCertKey], secret.Data[pod.PeerKeyKey])
			mc.client, _ = certs.ParseKeyPair(secret.Data[pod.ClientCertKey], secret.Data[pod.ClientKeyKey])
		}
		out[m.Name] = mc
	}
	return out, nil
}

func (r *Reconciler) getSecret(ctx context.Context, s *scope, name string) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.cluster.Namespace, Name: name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get Secret %s: %w", name, err)
	}
	return secret, nil
}

// publish keeps every member's Secret, the operator's client certificate,
// the administrators' and those asked for, renewing what is due. Secrets change in place:
// etcd and the operator read certificates afresh at every handshake.
func (r *Reconciler) publish(ctx context.Context, s *scope, published map[string]memberCerts) error {
	for _, m := range s.members {
		if err := r.publishMember(ctx, s, m, published[m.Name]); err != nil {
			return err
		}
	}
	sec := s.tls.client
	if sec.ca == nil {
		return nil
	}
	bundle := sec.wanted.PEM()
	if err := r.publishClient(ctx, s, v1alpha1.OperatorClientSecretName(s.cluster.Name), "root", operatorOrganization, bundle); err != nil {
		return err
	}
	requested, err := r.requestedClientSecrets(ctx, s)
	if err != nil {
		return err
	}
	for _, secret := range requested {
		cn := secret.Annotations[v1alpha1.IssueClientCertificateAnnotation]
		if err := r.publishClient(ctx, s, secret.Name, cn, requestedOrganization, bundle); err != nil {
			return err
		}
	}
	if sec.source != v1alpha1.CertificateSourceOperatorManaged {
		return nil
	}
	return r.publishClient(ctx, s, v1alpha1.AdminClientSecretName(s.cluster.Name), "root", adminOrganization, bundle)
}

// requestedClientSecrets are the Secrets of the cluster that ask for a
// client certificate (kubectl etcd creates one); whoever may create
// Secrets in the namespace may read the administrators' one anyway.
func (r *Reconciler) requestedClientSecrets(ctx context.Context, s *scope) ([]corev1.Secret, error) {
	var list corev1.SecretList
	if err := r.List(ctx, &list, client.InNamespace(s.cluster.Namespace), client.MatchingLabels{v1alpha1.ClusterLabel: s.cluster.Name}); err != nil {
		return nil, fmt.Errorf("failed to list the Secrets of %s: %w", s.cluster.Name, err)
	}
	var out []corev1.Secret
	for _, secret := range list.Items {
		if secret.Annotations[v1alpha1.IssueClientCertificateAnnotation] != "" {
			out = append(out, secret)
		}
	}
	return out, nil
}

func (r *Reconciler) publishMember(ctx context.Context, s *scope, m *v1alpha1.EtcdMember, mc memberCerts) error {
	data := map[string][]byte{}
	if mc.secret != nil {
		maps.Copy(data, mc.secret.Data)
	}
	// A new peer certificate comes with a new operator-issued client one:
	// a CA rotation tells that the kubelet has brought the Secret's
	// current content into the Pod by the client certificate the member
	// serves, and the two files come in one piece (see switched).
	peer, err := r.memberLeaf(s, s.tls.peer, m, mc.peer, false)
	if err != nil {
		return err
	}
	reissued := peer != nil && (mc.peer == nil || !peer.Cert.Equal(mc.peer.Cert))
	clientLeaf, err := r.memberLeaf(s, s.tls.client, m, mc.client, reissued)
	if err != nil {
		return err
	}
	for _, sec := range []*tlsSection{s.tls.peer, s.tls.client} {
		kp := peer
		if sec == s.tls.client {
			kp = clientLeaf
		}
		if kp == nil {
			continue
		}
		certKey, keyKey := pod.PeerCertKey, pod.PeerKeyKey
		if sec.name == v1alpha1.TLSSectionClient {
			certKey, keyKey = pod.ClientCertKey, pod.ClientKeyKey
		}
		data[certKey], data[keyKey] = kp.CertPEM, kp.KeyPEM
	}
	name := v1alpha1.MemberTLSSecretName(m.Name)
	if mc.secret == nil {
		secret := &corev1.Secret{Data: data}
		secret.Name, secret.Namespace = name, m.Namespace
		secret.Labels = v1alpha1.MemberLabels(s.cluster.Name, m.Name)
		secret.Type = corev1.SecretTypeOpaque
		if err := controllerutil.SetControllerReference(m, secret, r.Scheme()); err != nil {
			return err
		}
		if err := r.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create the certificates of member %s: %w", m.Name, err)
		}
		return nil
	}
	if sameData(mc.secret.Data, data) {
		return nil
	}
	patch := client.MergeFrom(mc.secret.DeepCopy())
	mc.secret.Data = data
	if err := r.Patch(ctx, mc.secret, patch); err != nil {
		return fmt.Errorf("failed to update the certificates of member %s: %w", m.Name, err)
	}
	r.event(m, corev1.EventTypeNormal, "CertificatesRenewed", "RenewCertificates",
		"Renewed the certificates of member %s; etcd serves them from its next handshake, without a restart", m.Name)
	return nil
}

// memberLeaf is the certificate the member's Secret must hold for the
// section, or nil to leave it as it is; renew asks for a new one.
func (r *Reconciler) memberLeaf(s *scope, sec *tlsSection, m *v1alpha1.EtcdMember, have *certs.KeyPair, renew bool) (*certs.KeyPair, error) {
	if sec.shared != nil {
		// The source renews it; the member's Secret follows in place.
		return sec.shared, nil
	}
	// OperatorManaged, or a switch from it before its pass 2.
	signer := sec.leafCA
	host := hostOf(r.peerURL(m))
	if have != nil && !renew && !certs.RenewalDue(have.Cert, s.now) && have.Cert.VerifyHostname(host) == nil && certs.IssuedBy(have.Cert, signer.Cert) {
		sec.noteRenewal(certs.RenewalTime(have.Cert))
		return have, nil
	}
	_, leafLife := s.cluster.Spec.TLS.Lifetimes()
	dns, ips := certs.MemberNames(m.Name, v1alpha1.PeerServiceName(s.cluster.Name), v1alpha1.ClientServiceName(s.cluster.Name), m.Namespace, r.clusterDomain())
	if host != "" && !contains(dns, host) {
		dns = append(dns, host)
	}
	kp, err := certs.Issue(signer, certs.LeafRequest{CommonName: m.Name, DNSNames: dns, IPs: ips, Server: true, Client: true, Lifetime: leafLife}, s.now)
	if err != nil {
		return nil, err
	}
	sec.noteRenewal(certs.RenewalTime(kp.Cert))
	return kp, nil
}

// publishClient keeps a client certificate for common name cn, from the
// client CA, with the client trust bundle beside it.
func (r *Reconciler) publishClient(ctx context.Context, s *scope, name, cn, org string, bundle []byte) error {
	sec := s.tls.client
	existing, err := r.getSecret(ctx, s, name)
	if err != nil {
		return err
	}
	signer := sec.ca
	var have *certs.KeyPair
	if existing != nil {
		have, _ = certs.ParseKeyPair(existing.Data[corev1.TLSCertKey], existing.Data[corev1.TLSPrivateKeyKey])
	}
	data := map[string][]byte{}
	if have != nil && !certs.RenewalDue(have.Cert, s.now) && certs.IssuedBy(have.Cert, signer.Cert) {
		data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey] = have.CertPEM, have.KeyPEM
		sec.noteRenewal(certs.RenewalTime(have.Cert))
	} else {
		_, leafLife := s.cluster.Spec.TLS.Lifetimes()
		kp, err := certs.Issue(signer, certs.LeafRequest{CommonName: cn, Organization: []string{org}, Client: true, Lifetime: leafLife}, s.now)
		if err != nil {
			return err
		}
		data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey] = kp.CertPEM, kp.KeyPEM
		sec.noteRenewal(certs.RenewalTime(kp.Cert))
	}
	data[etcdaccess.TrustBundleKey] = bundle
	if existing == nil {
		if err := r.Create(ctx, r.ownedSecret(s, name, corev1.SecretTypeTLS, data)); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create client certificate Secret %s: %w", name, err)
		}
		return nil
	}
	if sameData(existing.Data, data) {
		return nil
	}
	patch := client.MergeFrom(existing.DeepCopy())
	existing.Data = data
	if err := r.Patch(ctx, existing, patch); err != nil {
		return fmt.Errorf("failed to update client certificate Secret %s: %w", name, err)
	}
	return nil
}

func sameData(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, func(x, y []byte) bool { return bytes.Equal(x, y) })
}
