package fake

import (
	"context"
	"crypto/x509"
	"errors"
	"slices"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// authState models etcd's authentication: users with a password (or none,
// for certificate users), whether each has the root role, and whether it
// is on. With it on, a call needs an identity: the dial's password user,
// checked at Dial as clientv3 fetches its token there, or the common name
// of the dial's client certificate, as members that check client
// certificates take it. Every call but Status and AuthStatus also needs
// the root role, as every call the operator makes does in etcd.
type authState struct {
	enabled bool
	// users maps a name to its password ("" for none).
	users map[string]string
	root  map[string]bool
}

// SetAuth turns the fake's authentication on with the given users and
// passwords, each with the root role, as if someone had enabled it.
func (f *Fake) SetAuth(users map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.auth = authState{enabled: true, users: map[string]string{}, root: map[string]bool{}}
	for u, pw := range users {
		f.auth.users[u], f.auth.root[u] = pw, true
	}
}

// AuthUsers are the users the fake knows and whether each has the root
// role; nil while authentication has never been set up.
func (f *Fake) AuthUsers() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.auth.users == nil {
		return nil
	}
	out := map[string]bool{}
	for u := range f.auth.users {
		out[u] = f.auth.root[u]
	}
	return out
}

// AuthOn reports whether the fake's authentication is on.
func (f *Fake) AuthOn() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.auth.enabled
}

// checkDial is what clientv3 does at Dial: with a password, fetch a
// token, which a wrong one is refused. Must be called with f.mu held.
func (f *Fake) checkDial(dial etcd.DialSettings) error {
	cred := dial.Credentials
	if cred.IsZero() || !f.auth.enabled {
		return nil
	}
	if pw, ok := f.auth.users[cred.User]; !ok || pw == "" || pw != cred.Password {
		return rpctypes.ErrAuthFailed
	}
	return nil
}

// identity is the user a client acts as. Must be called with f.mu held.
func (c *Client) identity() string {
	if !c.dial.Credentials.IsZero() {
		return c.dial.Credentials.User
	}
	if c.dial.TLS != nil && len(c.dial.TLS.Certificates) > 0 && len(c.dial.TLS.Certificates[0].Certificate) > 0 {
		if cert, err := x509.ParseCertificate(c.dial.TLS.Certificates[0].Certificate[0]); err == nil {
			return cert.Subject.CommonName
		}
	}
	return ""
}

// permit applies authentication to a call of op. The Fake's own methods
// (endpoints nil) act as an administrator on the member's host would.
// Must be called with f.mu held.
func (c *Client) permit(op string) error {
	f := c.f
	if !f.auth.enabled || c.endpoints == nil || op == etcd.OpDial {
		return nil
	}
	user := c.identity()
	if _, known := f.auth.users[user]; user == "" || !known {
		return rpctypes.ErrUserEmpty
	}
	if op != etcd.OpStatus && op != etcd.OpAuthStatus && !f.auth.root[user] {
		return rpctypes.ErrPermissionDenied
	}
	return nil
}

func (c *Client) AuthEnabled(ctx context.Context) (bool, error) {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpAuthStatus, Endpoints: c.Endpoints()}); err != nil {
		return false, fail(etcd.OpAuthStatus, "", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := c.reachLeader(); err != nil {
		return false, fail(etcd.OpAuthStatus, "", err)
	}
	return f.auth.enabled, nil
}

func (c *Client) EnableAuth(ctx context.Context, setup etcd.AuthSetup) error {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpEnableAuth, Endpoints: c.Endpoints()}); err != nil {
		return fail(etcd.OpEnableAuth, "", err)
	}
	if setup.RootPassword == "" {
		return fail(etcd.OpEnableAuth, "", errors.New("root's password is empty"))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := c.reachLeader(); err != nil {
		return fail(etcd.OpEnableAuth, "", err)
	}
	if err := c.permit(etcd.OpEnableAuth); err != nil {
		return fail(etcd.OpEnableAuth, "", err)
	}
	if f.auth.users == nil {
		f.auth.users, f.auth.root = map[string]string{}, map[string]bool{}
	}
	f.auth.users[etcd.RootUser], f.auth.root[etcd.RootUser] = setup.RootPassword, true
	for _, u := range setup.CertificateUsers {
		if u == "" || u == etcd.RootUser {
			continue
		}
		if _, ok := f.auth.users[u]; !ok {
			f.auth.users[u] = ""
		}
		f.auth.root[u] = true
	}
	f.auth.enabled = true
	f.EnabledAuth = append(f.EnabledAuth, slices.Clone(setup.CertificateUsers))
	return nil
}

func (f *Fake) AuthEnabled(ctx context.Context) (bool, error) { return f.self().AuthEnabled(ctx) }

func (f *Fake) EnableAuth(ctx context.Context, setup etcd.AuthSetup) error {
	return f.self().EnableAuth(ctx, setup)
}
