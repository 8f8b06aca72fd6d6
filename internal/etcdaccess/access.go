// Package etcdaccess works out how the operator reaches one cluster's
// members: over http or https, with which client certificate and CAs, and,
// with etcd's authentication on, as which user (see Identity).
// The cluster controller, the member
// controller's finalizer and anything else that dials a cluster take their
// dial options from here, so all of them speak TLS when it is on.
package etcdaccess

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// TrustLabel marks the trust bundle ConfigMaps; its value is the section.
const TrustLabel = "etcd.quorumctl.io/trust"

// Access is how to reach a cluster's members.
type Access struct {
	// Options carry the TLS and the credentials of every dial.
	Options []etcd.DialOption
	// HTTPS: the members serve TLS on their client port.
	HTTPS bool
	// Identity is how the operator proves who it is once etcd's
	// authentication is on; IdentityNone while spec.auth does not ask for it.
	Identity Identity
	// CertificateUser is the common name of the operator's client
	// certificate with IdentityCertificate: etcd's user for the operator.
	CertificateUser string
	// CredentialsErr says why root's password could not be read (a
	// *RootSecretError); the dials then go without it, and etcd refuses
	// them once its authentication is on.
	CredentialsErr error
}

// Identity is how the operator authenticates to etcd.
type Identity string

const (
	// IdentityNone: spec.auth does not ask for authentication.
	IdentityNone Identity = ""
	// IdentityCertificate: every member checks client certificates, so
	// etcd takes the operator's user from its certificate's common name.
	// No password is sent: a password is exchanged for a token through
	// raft, which a cluster without a quorum cannot do, while a
	// certificate is checked by each member alone.
	IdentityCertificate Identity = "Certificate"
	// IdentityPassword: root and its password from the cluster's root
	// Secret.
	IdentityPassword Identity = "Password"
)

// IdentityOf decides how the operator (and the Jobs that act for it)
// authenticate to a cluster whose members have the shape.
func IdentityOf(c *v1alpha1.EtcdCluster, shape Shape) Identity {
	switch {
	case !c.AuthEnabled():
		return IdentityNone
	case shape.Mutual:
		return IdentityCertificate
	}
	return IdentityPassword
}

// RootSecretError: the Secret with root's password cannot be used. It
// names the Secret and what is wrong, never the content.
type RootSecretError struct {
	Secret string
	// Missing: there is no such Secret; otherwise its key password is
	// missing or empty.
	Missing bool
}

func (e *RootSecretError) Error() string {
	if e.Missing {
		return fmt.Sprintf("Secret %s with root's password does not exist", e.Secret)
	}
	return fmt.Sprintf("Secret %s has no root password under key %q", e.Secret, v1alpha1.RootPasswordKey)
}

// URL is a member's client URL with the scheme the operator dials.
func (a Access) URL(clientURL string) string {
	scheme := "http://"
	if a.HTTPS {
		scheme = "https://"
	}
	if i := strings.Index(clientURL, "://"); i >= 0 {
		return scheme + clientURL[i+3:]
	}
	return scheme + clientURL
}

// Shape is what the members' TLS shapes alone say about reaching them,
// without reading any certificate or Secret: Jobs that dial the cluster
// (snapshots) are built from it, and For from it adds the material.
type Shape struct {
	// TLS: some member speaks TLS, or the cluster asks for it.
	TLS bool
	// HTTPS: every member serves TLS on its client port.
	HTTPS bool
	// Mutual: every member checks client certificates.
	Mutual bool
}

// ShapeOf decides the Shape of reaching the cluster's members, from the
// members, which are what is dialled. A cluster without members yet (a
// restore's target) is reached as its spec says.
//
// While TLS is turned on for a running cluster (docs/design/0023), a member
// given client TLS with its recorded client URL still http serves both
// schemes once restarted; it is dialled over https only once the cluster
// controller has switched clients (status.tls.transition.clientsHTTPS),
// which it does when every member serves both. Until then plaintext, which
// every member serves throughout the first pass.
func ShapeOf(c *v1alpha1.EtcdCluster, members []*v1alpha1.EtcdMember) Shape {
	if len(members) == 0 {
		t := c.Spec.TLS
		return Shape{TLS: t != nil, HTTPS: t != nil, Mutual: t != nil && t.Client.IsMutual()}
	}
	anyTLS, allClientTLS, allMutual := c.Spec.TLS != nil, true, true
	for _, m := range members {
		t := m.Spec.TLS
		if t != nil && (t.Client != nil || t.Peer != nil) {
			anyTLS = true
		}
		if t == nil || t.Client == nil {
			allClientTLS, allMutual = false, false
			continue
		}
		if strings.HasPrefix(m.Spec.ClientURL, "http://") && !ClientsSwitched(c) {
			allClientTLS = false
		}
		if !t.Client.ClientCertAuth {
			allMutual = false
		}
	}
	// Client certificates are checked on the https side alone.
	return Shape{TLS: anyTLS, HTTPS: allClientTLS, Mutual: allMutual && allClientTLS}
}

// ClientsSwitched: the cluster controller has moved the operator's clients
// to https while TLS is being turned on (see ShapeOf).
func ClientsSwitched(c *v1alpha1.EtcdCluster) bool {
	st := c.Status.TLS
	return st != nil && st.Transition != nil && st.Transition.ClientsHTTPS
}

// URL is a member's client URL with the scheme the shape dials.
func (s Shape) URL(clientURL string) string { return Access{HTTPS: s.HTTPS}.URL(clientURL) }

// For reads what reaching the cluster takes from the operator's own,
// labelled objects: the client trust bundles and its client certificate,
// and root's password when the operator authenticates with it. live reads
// a root Secret the user named, which the operator's cache does not hold
// (nil: cached reads it too).
func For(ctx context.Context, cached, live client.Reader, c *v1alpha1.EtcdCluster, members []*v1alpha1.EtcdMember) (Access, error) {
	shape := ShapeOf(c, members)
	a := Access{HTTPS: shape.HTTPS, Identity: IdentityOf(c, shape)}
	if shape.TLS {
		cfg, err := clientTLS(ctx, cached, c)
		if err != nil {
			return a, err
		}
		a.Options = append(a.Options, etcd.WithClientTLS(cfg))
		if a.Identity == IdentityCertificate && len(cfg.Certificates) > 0 && cfg.Certificates[0].Leaf != nil {
			a.CertificateUser = cfg.Certificates[0].Leaf.Subject.CommonName
		}
	}
	if a.Identity != IdentityPassword {
		return a, nil
	}
	if live == nil || c.RootSecretName() == v1alpha1.GeneratedRootSecretName(c.Name) {
		live = cached
	}
	password, err := RootPassword(ctx, live, c)
	switch {
	case errors.As(err, new(*RootSecretError)):
		a.CredentialsErr = err
	case err != nil:
		return a, err
	default:
		a.Options = append(a.Options, etcd.WithPassword(etcd.RootUser, password))
	}
	return a, nil
}

// RootPassword reads root's password from the cluster's root Secret. A
// Secret that is missing or holds no password is a *RootSecretError.
func RootPassword(ctx context.Context, r client.Reader, c *v1alpha1.EtcdCluster) (string, error) {
	name := c.RootSecretName()
	var s corev1.Secret
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, &s)
	switch {
	case apierrors.IsNotFound(err):
		return "", &RootSecretError{Secret: c.Namespace + "/" + name, Missing: true}
	case err != nil:
		return "", fmt.Errorf("failed to get Secret %s/%s with root's password: %w", c.Namespace, name, err)
	}
	pw := string(s.Data[v1alpha1.RootPasswordKey])
	if pw == "" {
		return "", &RootSecretError{Secret: c.Namespace + "/" + name}
	}
	return pw, nil
}

// clientTLS trusts every client trust bundle the cluster has (whichever
// signed a member's certificate is among them) and presents the operator's
// own client certificate, once it exists.
func clientTLS(ctx context.Context, r client.Reader, c *v1alpha1.EtcdCluster) (*tls.Config, error) {
	var cms corev1.ConfigMapList
	if err := r.List(ctx, &cms, client.InNamespace(c.Namespace),
		client.MatchingLabels{v1alpha1.ClusterLabel: c.Name, TrustLabel: v1alpha1.TLSSectionClient}); err != nil {
		return nil, fmt.Errorf("failed to list the client trust bundles of %s: %w", c.Name, err)
	}
	pool := x509.NewCertPool()
	for _, cm := range cms.Items {
		b, err := certs.ParseBundle([]byte(cm.Data[TrustBundleKey]))
		if err != nil {
			continue
		}
		for _, ca := range b {
			pool.AddCert(ca)
		}
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	var s corev1.Secret
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: v1alpha1.OperatorClientSecretName(c.Name)}, &s)
	switch {
	case apierrors.IsNotFound(err):
		return cfg, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get the operator's client certificate of %s: %w", c.Name, err)
	}
	pair, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		// The TLS phase re-issues a broken one; until then dial without.
		return cfg, nil
	}
	// The leaf names the operator's etcd user when auth is on.
	if pair.Leaf == nil && len(pair.Certificate) > 0 {
		pair.Leaf, _ = x509.ParseCertificate(pair.Certificate[0])
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg, nil
}

// TrustBundleKey is the key of a trust bundle ConfigMap, which is also the
// file name etcd is pointed at.
const TrustBundleKey = "ca.crt"
