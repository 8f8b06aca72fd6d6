package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
)

// RootUser is etcd's superuser; membership changes need its role.
const RootUser = "root"

// Security is how one dial authenticates: TLS for https endpoints (a client
// certificate in it also names the etcd user when the cluster checks client
// certificates), and an etcd user and password.
type Security struct {
	TLS      *tls.Config
	Username string
	Password string
}

// DialOption sets part of a dial's Security.
type DialOption func(*Security)

// WithClientTLS dials https endpoints with cfg.
func WithClientTLS(cfg *tls.Config) DialOption {
	return func(s *Security) { s.TLS = cfg }
}

// WithPassword authenticates to etcd as user. With auth off in etcd the
// credentials are ignored, so a dial may carry them before auth is enabled.
func WithPassword(user, password string) DialOption {
	return func(s *Security) { s.Username, s.Password = user, password }
}

// ResolveSecurity applies opts over base; Dialer implementations use it.
func ResolveSecurity(base Security, opts ...DialOption) Security {
	for _, o := range opts {
		o(&base)
	}
	return base
}

// HasClientCertificate reports whether a TLS configuration presents a
// client certificate, which identifies its holder to a cluster that checks
// client certificates.
func (s Security) HasClientCertificate() bool {
	return s.TLS != nil && (len(s.TLS.Certificates) > 0 || s.TLS.GetClientCertificate != nil)
}

// SecurityClient are the calls about authentication and certificates.
type SecurityClient interface {
	// MemberUpdate sets a member's peer URLs, as etcdctl member update does.
	MemberUpdate(ctx context.Context, id uint64, peerURLs []string) (MemberList, error)
	// AuthEnabled reports whether etcd's authentication is on.
	AuthEnabled(ctx context.Context) (bool, error)
	// EnableAuth creates the root role and the root user with password
	// (or sets root's password), grants it the role, and turns
	// authentication on. Each step tolerates having been done before.
	EnableAuth(ctx context.Context, rootPassword string) error
	// DisableAuth turns authentication off.
	DisableAuth(ctx context.Context) error
	// CheckPassword authenticates user with password and reports etcd's
	// answer: nil, or an error IsAuthFailed recognises.
	CheckPassword(ctx context.Context, user, password string) error
	// ChangePassword sets a user's password.
	ChangePassword(ctx context.Context, user, password string) error
	// ServedCertificate is the certificate a TLS endpoint (an https URL)
	// presents in a handshake, read without judging it.
	ServedCertificate(ctx context.Context, endpoint string) (*x509.Certificate, error)
}
