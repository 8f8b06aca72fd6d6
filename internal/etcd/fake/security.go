package fake

import (
	"context"
	"crypto/x509"
	"errors"
	"slices"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// securityModel is the cluster's authentication: whether auth is on, root's
// password, and what each endpoint serves as its certificate.
type securityModel struct {
	authEnabled  bool
	rootPassword string
	// certAuth: the cluster checks client certificates, so a client
	// certificate alone identifies its holder (as root).
	certAuth bool
	served   map[string]*x509.Certificate
	// Updated records MemberUpdate calls: member ID and its new peer URLs.
	updated []MemberUpdateCall
}

// MemberUpdateCall is one recorded MemberUpdate.
type MemberUpdateCall struct {
	ID       uint64
	PeerURLs []string
}

// openOps need no identity even with auth on, as in etcd: a member answers
// Status to anyone, a health read that is refused still proves health, and
// authenticating is how one gets an identity.
var openOps = map[string]bool{
	etcd.OpDial: true, etcd.OpStatus: true, etcd.OpHealth: true,
	etcd.OpCheckPassword: true, etcd.OpServedCertificate: true, etcd.OpAuthStatus: true,
}

// SetAuth turns auth on with root's password, or off when password is "".
func (f *Fake) SetAuth(password string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sec.authEnabled, f.sec.rootPassword = password != "", password
}

// SetClientCertAuth makes a client certificate identify its holder as root,
// as etcd does with --client-cert-auth and a certificate whose common name
// is root.
func (f *Fake) SetClientCertAuth(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sec.certAuth = on
}

// AuthEnabled reports whether auth is on, and root's password.
func (f *Fake) AuthState() (bool, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sec.authEnabled, f.sec.rootPassword
}

// SetServedCertificate makes ServedCertificate on endpoint return cert; nil
// makes it fail as a plaintext endpoint would.
func (f *Fake) SetServedCertificate(endpoint string, cert *x509.Certificate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sec.served == nil {
		f.sec.served = map[string]*x509.Certificate{}
	}
	f.sec.served[endpoint] = cert
}

// Updated returns the recorded MemberUpdate calls.
func (f *Fake) Updated() []MemberUpdateCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sec.updated)
}

// dialAuthErr is what real clientv3 answers at Dial: a wrong password fails
// the token request there. Must be called with f.mu held.
func (f *Fake) dialAuthErr(sec etcd.Security) error {
	if f.sec.authEnabled && sec.Username != "" && (sec.Username != etcd.RootUser || sec.Password != f.sec.rootPassword) {
		return rpctypes.ErrAuthFailed
	}
	return nil
}

// authErr refuses a call that needs an identity the client lacks. The Fake's
// own Client view (no endpoints) is privileged. Must be called with f.mu held.
func (c *Client) authErr(call Call) error {
	if c == nil || c.endpoints == nil || openOps[call.Op] {
		return nil
	}
	f := c.f
	if !f.sec.authEnabled {
		return nil
	}
	if c.security.Username == etcd.RootUser && c.security.Password == f.sec.rootPassword {
		return nil
	}
	if f.sec.certAuth && c.security.HasClientCertificate() {
		return nil
	}
	return rpctypes.ErrUserEmpty
}

func (c *Client) MemberUpdate(ctx context.Context, id uint64, peerURLs []string) (etcd.MemberList, error) {
	f := c.f
	urls := slices.Clone(peerURLs)
	if err := f.begin(ctx, c, Call{Op: etcd.OpMemberUpdate, Endpoints: c.Endpoints(), ID: id, PeerURLs: urls}); err != nil {
		return etcd.MemberList{}, fail(etcd.OpMemberUpdate, "", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := c.reachLeader(); err != nil {
		return etcd.MemberList{}, fail(etcd.OpMemberUpdate, "", err)
	}
	i := f.indexOf(id)
	if i < 0 {
		return etcd.MemberList{}, fail(etcd.OpMemberUpdate, "", rpctypes.ErrMemberNotFound)
	}
	for j, m := range f.members {
		if j == i {
			continue
		}
		for _, u := range urls {
			if slices.Contains(m.PeerURLs, u) {
				return etcd.MemberList{}, fail(etcd.OpMemberUpdate, "", rpctypes.ErrPeerURLExist)
			}
		}
	}
	f.members[i].PeerURLs = urls
	f.sec.updated = append(f.sec.updated, MemberUpdateCall{ID: id, PeerURLs: slices.Clone(urls)})
	return f.list(), nil
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
	return f.sec.authEnabled, nil
}

func (c *Client) EnableAuth(ctx context.Context, rootPassword string) error {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpEnableAuth, Endpoints: c.Endpoints()}); err != nil {
		return fail(etcd.OpEnableAuth, "", err)
	}
	if rootPassword == "" {
		return fail(etcd.OpEnableAuth, "", errors.New("failed to enable auth: the root password is empty"))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := c.reachLeader(); err != nil {
		return fail(etcd.OpEnableAuth, "", err)
	}
	f.sec.authEnabled, f.sec.rootPassword = true, rootPassword
	return nil
}

func (c *Client) DisableAuth(ctx context.Context) error {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpDisableAuth, Endpoints: c.Endpoints()}); err != nil {
		return fail(etcd.OpDisableAuth, "", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := c.reachLeader(); err != nil {
		return fail(etcd.OpDisableAuth, "", err)
	}
	f.sec.authEnabled = false
	return nil
}

func (c *Client) CheckPassword(ctx context.Context, user, password string) error {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpCheckPassword, Endpoints: c.Endpoints()}); err != nil {
		return fail(etcd.OpCheckPassword, "", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case !f.sec.authEnabled:
		return fail(etcd.OpCheckPassword, "", rpctypes.ErrAuthNotEnabled)
	case user != etcd.RootUser || password != f.sec.rootPassword:
		return fail(etcd.OpCheckPassword, "", rpctypes.ErrAuthFailed)
	}
	return nil
}

func (c *Client) ChangePassword(ctx context.Context, user, password string) error {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpChangePassword, Endpoints: c.Endpoints()}); err != nil {
		return fail(etcd.OpChangePassword, "", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if user == etcd.RootUser {
		f.sec.rootPassword = password
	}
	return nil
}

func (c *Client) ServedCertificate(ctx context.Context, endpoint string) (*x509.Certificate, error) {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpServedCertificate, Endpoints: c.Endpoints(), Endpoint: endpoint}); err != nil {
		return nil, fail(etcd.OpServedCertificate, endpoint, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if cert := f.sec.served[endpoint]; cert != nil {
		return cert, nil
	}
	return nil, fail(etcd.OpServedCertificate, endpoint, ErrUnreachable)
}

func (f *Fake) MemberUpdate(ctx context.Context, id uint64, peerURLs []string) (etcd.MemberList, error) {
	return f.self().MemberUpdate(ctx, id, peerURLs)
}

func (f *Fake) AuthEnabled(ctx context.Context) (bool, error) { return f.self().AuthEnabled(ctx) }

func (f *Fake) EnableAuth(ctx context.Context, rootPassword string) error {
	return f.self().EnableAuth(ctx, rootPassword)
}

func (f *Fake) DisableAuth(ctx context.Context) error { return f.self().DisableAuth(ctx) }

func (f *Fake) CheckPassword(ctx context.Context, user, password string) error {
	return f.self().CheckPassword(ctx, user, password)
}

func (f *Fake) ChangePassword(ctx context.Context, user, password string) error {
	return f.self().ChangePassword(ctx, user, password)
}

func (f *Fake) ServedCertificate(ctx context.Context, endpoint string) (*x509.Certificate, error) {
	return f.self().ServedCertificate(ctx, endpoint)
}
