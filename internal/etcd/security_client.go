package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// rootRole is etcd's built-in superuser role.
const rootRole = "root"

func (c *client) MemberUpdate(ctx context.Context, id uint64, peerURLs []string) (MemberList, error) {
	var list MemberList
	err := c.balanced(ctx, OpMemberUpdate, func(ctx context.Context) error {
		resp, err := c.cli.MemberUpdate(ctx, id, peerURLs)
		if err != nil {
			return err
		}
		list = toMemberList(resp.Header, resp.Members)
		return nil
	})
	return list, err
}

func (c *client) AuthEnabled(ctx context.Context) (bool, error) {
	var enabled bool
	err := c.balanced(ctx, OpAuthStatus, func(ctx context.Context) error {
		resp, err := c.cli.AuthStatus(ctx)
		if err != nil {
			return err
		}
		enabled = resp.Enabled
		return nil
	})
	return enabled, err
}

func (c *client) EnableAuth(ctx context.Context, rootPassword string) error {
	if rootPassword == "" {
		return &CallError{Op: OpEnableAuth, Err: errors.New("failed to enable auth: the root password is empty")}
	}
	return c.balanced(ctx, OpEnableAuth, func(ctx context.Context) error {
		if _, err := c.cli.RoleAdd(ctx, rootRole); err != nil && !isEtcdErr(err, rpctypes.ErrRoleAlreadyExist) {
			return fmt.Errorf("failed to add the root role: %w", err)
		}
		_, err := c.cli.UserAddWithOptions(ctx, RootUser, rootPassword, &clientv3.UserAddOptions{})
		switch {
		case isEtcdErr(err, rpctypes.ErrUserAlreadyExist):
			if _, err := c.cli.UserChangePassword(ctx, RootUser, rootPassword); err != nil {
				return fmt.Errorf("failed to set root's password: %w", err)
			}
		case err != nil:
			return fmt.Errorf("failed to add the root user: %w", err)
		}
		if _, err := c.cli.UserGrantRole(ctx, RootUser, rootRole); err != nil {
			return fmt.Errorf("failed to grant root the root role: %w", err)
		}
		if _, err := c.cli.AuthEnable(ctx); err != nil {
			return fmt.Errorf("failed to turn auth on: %w", err)
		}
		return nil
	})
}

func (c *client) DisableAuth(ctx context.Context) error {
	return c.balanced(ctx, OpDisableAuth, func(ctx context.Context) error {
		_, err := c.cli.AuthDisable(ctx)
		return err
	})
}

func (c *client) CheckPassword(ctx context.Context, user, password string) error {
	return c.balanced(ctx, OpCheckPassword, func(ctx context.Context) error {
		// Authenticate needs no token, and answers ErrAuthFailed for a
		// wrong password; a raw call leaves the client's own token alone.
		conn := c.cli.ActiveConnection()
		_, err := pb.NewAuthClient(conn).Authenticate(ctx, &pb.AuthenticateRequest{Name: user, Password: password})
		return clientv3.ContextError(ctx, err)
	})
}

func (c *client) ChangePassword(ctx context.Context, user, password string) error {
	return c.balanced(ctx, OpChangePassword, func(ctx context.Context) error {
		_, err := c.cli.UserChangePassword(ctx, user, password)
		return err
	})
}

// ServedCertificate completes a TLS handshake far enough to read what the
// endpoint presents. It trusts nothing it reads: the certificate is only
// compared, by the caller, with what it published.
func (c *client) ServedCertificate(ctx context.Context, endpoint string) (*x509.Certificate, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, &CallError{Op: OpServedCertificate, Endpoint: endpoint, Err: fmt.Errorf("not an https URL: %q", endpoint)}
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.callTimeout)
	defer cancel()
	var served *x509.Certificate
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The handshake is only a way to read the served certificate,
		// which is then compared with a known one; nothing is sent over
		// the connection.
		InsecureSkipVerify: true, //nolint:gosec // see above: read, never trusted
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) > 0 {
				served = cs.PeerCertificates[0]
			}
			return nil
		},
	}
	if c.security.TLS != nil {
		cfg.Certificates = c.security.TLS.Certificates
		cfg.GetClientCertificate = c.security.TLS.GetClientCertificate
	}
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if conn != nil {
		_ = conn.Close()
	}
	if served != nil {
		// A server that refuses our client certificate does so after it
		// has shown its own.
		return served, nil
	}
	if err == nil {
		err = errors.New("no certificate presented")
	}
	return nil, &CallError{Op: OpServedCertificate, Endpoint: endpoint, Err: err}
}
