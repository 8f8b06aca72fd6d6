package plugin

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
)

// TLSFlags are the user's own client certificate files, as etcdctl names them.
type TLSFlags struct {
	CACert, Cert, Key string
}

// issueTimeout bounds the wait for the operator to fill a requested client
// certificate; it does so within a pass, every few seconds.
const issueTimeout = 30 * time.Second

// RequestedClientSecretName is the Secret kubectl etcd asks the operator to
// fill with a client certificate.
func RequestedClientSecretName(cluster string) string { return cluster + "-kubectl-etcd" }

// requestedCommonName is the common name of the certificate kubectl etcd
// asks for; etcd without authentication does not look at it, and step 2's
// authentication takes it as the etcd user.
const requestedCommonName = "root"

// servesTLS reports whether a member Pod serves TLS on its client port,
// from the flags the operator gave it.
func servesTLS(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--listen-client-urls="); ok {
				return strings.Contains(v, "https://")
			}
		}
	}
	return false
}

// security works out how to dial the cluster's forwarded members: https
// when every running member serves TLS, with a client certificate.
func (e *Env) security(ctx context.Context, s *session, running []string) (bool, []etcd.DialOption, error) {
	https := len(running) > 0
	for _, name := range running {
		if !servesTLS(s.pods[name]) {
			https = false
		}
	}
	if !https && s.cluster.Spec.TLS == nil {
		return false, nil, nil
	}
	cfg, err := e.clientTLS(ctx, s.cluster)
	if err != nil {
		return false, nil, err
	}
	return https, []etcd.DialOption{etcd.WithClientTLS(cfg)}, nil
}

// clientTLS uses the user's files, or else a certificate the operator
// issues on request, or else the administrators' certificate.
func (e *Env) clientTLS(ctx context.Context, c *v1alpha1.EtcdCluster) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if e.TLS.Cert != "" || e.TLS.Key != "" {
		pair, err := tls.LoadX509KeyPair(e.TLS.Cert, e.TLS.Key)
		if err != nil {
			return nil, fmt.Errorf("failed to load --cert %s and --key %s: %w", e.TLS.Cert, e.TLS.Key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
		if e.TLS.CACert == "" {
			return nil, errors.New("--cert and --key need --cacert, the CA that signed the members' certificates")
		}
	}
	if e.TLS.CACert != "" {
		data, err := os.ReadFile(e.TLS.CACert)
		if err != nil {
			return nil, fmt.Errorf("failed to read --cacert: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("--cacert %s holds no PEM certificate", e.TLS.CACert)
		}
	}
	if len(cfg.Certificates) > 0 {
		return cfg, nil
	}
	secret, err := e.issuedClientSecret(ctx, c)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("failed to use the client certificate in Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	cfg.Certificates = []tls.Certificate{pair}
	if cfg.RootCAs == nil {
		cfg.RootCAs = x509.NewCertPool()
		cfg.RootCAs.AppendCertsFromPEM(secret.Data[etcdaccess.TrustBundleKey])
	}
	return cfg, nil
}

// issuedClientSecret asks the operator for a client certificate through a
// labelled, annotated Secret and waits until it is filled. Without the
// permission to create it, the administrators' Secret is the fallback.
func (e *Env) issuedClientSecret(ctx context.Context, c *v1alpha1.EtcdCluster) (*corev1.Secret, error) {
	name := RequestedClientSecretName(c.Name)
	secret := &corev1.Secret{}
	err := e.Kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: c.Namespace, Labels: v1alpha1.ClusterLabels(c.Name),
			Annotations: map[string]string{v1alpha1.IssueClientCertificateAnnotation: requestedCommonName},
		}, Type: corev1.SecretTypeOpaque}
		if err := e.Kube.Create(ctx, secret); err != nil {
			if apierrors.IsForbidden(err) {
				return e.adminSecret(ctx, c, err)
			}
			return nil, fmt.Errorf("failed to ask the operator for a client certificate: %w", err)
		}
	case apierrors.IsForbidden(err):
		return e.adminSecret(ctx, c, err)
	case err != nil:
		return nil, fmt.Errorf("failed to get Secret %s/%s: %w", c.Namespace, name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, issueTimeout, true, func(ctx context.Context) (bool, error) {
		if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, secret); err != nil {
			return false, nil
		}
		return len(secret.Data[corev1.TLSCertKey]) > 0 && len(secret.Data[corev1.TLSPrivateKeyKey]) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the operator did not issue a client certificate into Secret %s/%s within %s (is it running?); pass --cacert, --cert and --key instead", c.Namespace, name, issueTimeout)
	}
	return secret, nil
}

func (e *Env) adminSecret(ctx context.Context, c *v1alpha1.EtcdCluster, cause error) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	name := v1alpha1.AdminClientSecretName(c.Name)
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, secret); err != nil {
		return nil, fmt.Errorf("EtcdCluster %s/%s uses TLS: pass --cacert, --cert and --key, or allow creating Secrets (to have the operator issue a certificate) or reading Secret %s: %w",
			c.Namespace, c.Name, name, errors.Join(cause, err))
	}
	return secret, nil
}

// advertisedClientHost is the host:port of the https client URL a member
// Pod advertises, from the flags the operator gave it; empty if it
// advertises none.
func advertisedClientHost(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		for _, a := range c.Args {
			v, ok := strings.CutPrefix(a, "--advertise-client-urls=")
			if !ok {
				continue
			}
			for raw := range strings.SplitSeq(v, ",") {
				if u, err := url.Parse(raw); err == nil && u.Scheme == "https" && u.Port() != "" {
					return u.Host
				}
			}
		}
	}
	return ""
}

// namedEndpoints names each tunnelled member over https by the host of the
// client URL it advertises, and maps that host:port to the member's own
// tunnel. clientv3 verifies a certificate against the endpoint's host and
// ignores tls.Config.ServerName, so dialling the tunnel as
// https://127.0.0.1:PORT works only with certificates that list 127.0.0.1
// (the operator's own); a certificate from a Secret or cert-manager lists
// the members' DNS names, and against it every call would hang until its
// timeout. A Pod that advertises no https URL keeps the tunnel's address
// as its name.
func (s *session) namedEndpoints(running []string) (map[string]string, map[string]string, error) {
	endpoints := map[string]string{}
	addresses := map[string]string{}
	owner := map[string]string{}
	for _, name := range running {
		t, ok := s.tunnels[name]
		if !ok {
			continue
		}
		local, err := url.Parse(t.Endpoint())
		if err != nil {
			return nil, nil, fmt.Errorf("the tunnel to member Pod %s has an invalid endpoint %q: %w", name, t.Endpoint(), err)
		}
		host := cmp.Or(advertisedClientHost(s.pods[name]), local.Host)
		if other, ok := owner[host]; ok {
			return nil, nil, fmt.Errorf("member Pods %s and %s of EtcdCluster %s both advertise client address %s", other, name, s.ref(), host)
		}
		owner[host] = name
		endpoints[name] = "https://" + host
		addresses[host] = local.Host
	}
	return endpoints, addresses, nil
}
