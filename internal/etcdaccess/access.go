// Package etcdaccess works out how the operator reaches one cluster's
// members: over http or https, with which client certificate and CAs, and
// with which etcd credentials. The cluster controller, the member
// controller's finalizer and anything else that dials a cluster take their
// dial options from here, so all of them speak TLS when it is on.
package etcdaccess

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// Labels of the trust bundle ConfigMaps; TrustLabel's value is the section.
const (
	TrustLabel = "etcd.quorumctl.io/trust"
	// PasswordKey is the key of the root password in its Secret.
	PasswordKey = "password"
)

// Access is how to reach a cluster's members.
type Access struct {
	// Options carry the TLS and credentials of every dial.
	Options []etcd.DialOption
	// HTTPS: every member serves TLS on its client port, so the operator
	// dials https; until then it dials plaintext, which every member
	// serves while the cluster turns to TLS.
	HTTPS bool
	// CertificateIdentity: every member checks client certificates, so
	// the operator's own certificate (common name root) identifies it and
	// no password is sent.
	CertificateIdentity bool
	// PasswordMissing: auth is asked for but the root password cannot be
	// read; the message says why.
	PasswordMissing string
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

// RootSecretName is the Secret holding root's password for the cluster.
func RootSecretName(c *v1alpha1.EtcdCluster) string {
	if c.Spec.Auth != nil && c.Spec.Auth.RootSecretName != "" {
		return c.Spec.Auth.RootSecretName
	}
	return v1alpha1.GeneratedRootSecretName(c.Name)
}

// Shape is what the members' TLS shapes alone say about reaching them,
// without reading any certificate or Secret: Jobs that dial the cluster
// (snapshots) are built from it, and For from it adds the material.
type Shape struct {
	// TLS: some member speaks TLS, or the cluster asks for it.
	TLS bool
	// HTTPS: every member serves TLS on its client port.
	HTTPS bool
	// Mutual: every member serves TLS and checks client certificates, so a
	// client certificate with common name root is root without a password.
	Mutual bool
	// Auth: etcd authentication is asked for.
	Auth bool
}

// ShapeOf decides the Shape of reaching the cluster's members.
func ShapeOf(c *v1alpha1.EtcdCluster, members []*v1alpha1.EtcdMember) Shape {
	anyTLS, allClientTLS, allMutual := false, len(members) > 0, len(members) > 0
	for _, m := range members {
		t := m.Spec.TLS
		if t != nil && (t.Client != nil || t.Peer != nil) {
			anyTLS = true
		}
		if t == nil || t.Client == nil {
			allClientTLS, allMutual = false, false
			continue
		}
		// A plaintext listener beside TLS does not matter: the operator
		// dials https then, where the certificate is checked.
		if !t.Client.ClientCertAuth {
			allMutual = false
		}
	}
	return Shape{TLS: c.Spec.TLS != nil || anyTLS, HTTPS: allClientTLS, Mutual: allMutual, Auth: c.Spec.Auth != nil}
}

// URL is a member's client URL with the scheme the shape dials.
func (s Shape) URL(clientURL string) string { return Access{HTTPS: s.HTTPS}.URL(clientURL) }

// For reads what reaching the cluster takes. cached reads the operator's
// own, labelled objects; direct reads the user's root Secret, which the
// label-filtered cache cannot see.
func For(ctx context.Context, cached, direct client.Reader, c *v1alpha1.EtcdCluster, members []*v1alpha1.EtcdMember) (Access, error) {
	var a Access
	shape := ShapeOf(c, members)
	a.HTTPS = shape.HTTPS
	if shape.TLS {
		cfg, err := clientTLS(ctx, cached, c)
		if err != nil {
			return a, err
		}
		a.Options = append(a.Options, etcd.WithClientTLS(cfg))
		a.CertificateIdentity = shape.Mutual && len(cfg.Certificates) > 0
	}
	if !shape.Auth || a.CertificateIdentity {
		return a, nil
	}
	pw, why, err := RootPassword(ctx, direct, c)
	if err != nil {
		return a, err
	}
	if why != "" {
		a.PasswordMissing = why
		return a, nil
	}
	a.Options = append(a.Options, etcd.WithPassword(etcd.RootUser, pw))
	return a, nil
}

// RootPassword reads root's password. A missing Secret or key is reported
// in why, not as an error: it is the user's to fix.
func RootPassword(ctx context.Context, direct client.Reader, c *v1alpha1.EtcdCluster) (pw, why string, err error) {
	name := RootSecretName(c)
	var s corev1.Secret
	err = direct.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, &s)
	switch {
	case apierrors.IsNotFound(err):
		return "", fmt.Sprintf("Secret %s/%s with root's password does not exist", c.Namespace, name), nil
	case err != nil:
		return "", "", fmt.Errorf("failed to get Secret %s/%s: %w", c.Namespace, name, err)
	}
	v := strings.TrimRight(string(s.Data[PasswordKey]), "\r\n")
	if v == "" {
		return "", fmt.Sprintf("Secret %s/%s has no %q key with root's password", c.Namespace, name, PasswordKey), nil
	}
	return v, "", nil
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
	cfg.Certificates = []tls.Certificate{pair}
	return cfg, nil
}

// TrustBundleKey is the key of a trust bundle ConfigMap, which is also the
// file name etcd is pointed at.
const TrustBundleKey = "ca.crt"
