package etcd

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
)

// DialSettings is what one dial to one cluster needs beyond the Dialer's
// own options: the cluster's client TLS (its CAs, and the operator's client
// certificate when the cluster checks them), and where to connect when the
// endpoints' hosts are names the dialling machine cannot resolve. One
// operator dials many clusters, each with its own CA, so this is per dial,
// not per Dialer.
type DialSettings struct {
	TLS *tls.Config
	// Addresses maps an endpoint's host:port to the address to connect to
	// instead; nil connects to the endpoints' hosts themselves. When set,
	// every endpoint must be in it: an unlisted one is an
	// *UnmappedEndpointError, never a connection to the host it names.
	Addresses map[string]string
	// Credentials authenticate as an etcd user by password; zero dials
	// without (a client certificate, when the members check them, names
	// the user instead).
	Credentials Credentials
}

// Credentials are an etcd user and its password. Their String never shows
// the password, so that no log line or test failure that prints dial
// settings can carry it.
type Credentials struct {
	User     string
	Password string
}

// IsZero: no password authentication.
func (c Credentials) IsZero() bool { return c.User == "" && c.Password == "" }

func (c Credentials) String() string {
	if c.IsZero() {
		return "{}"
	}
	return "{User:" + c.User + " Password:[redacted]}"
}

// GoString keeps %#v from printing the password too.
func (c Credentials) GoString() string { return c.String() }

// DialOption sets part of a dial's settings.
type DialOption func(*DialSettings)

// WithClientTLS dials https endpoints with cfg.
func WithClientTLS(cfg *tls.Config) DialOption {
	return func(s *DialSettings) { s.TLS = cfg }
}

// WithPassword authenticates the dial as user with password. While the
// cluster has authentication off, etcd ignores them (clientv3 drops the
// token when etcd answers ErrAuthNotEnabled), so a dial may carry them
// before authentication is turned on; once it is on, clientv3 fetches a
// token at the next call that is refused for the lack of one.
func WithPassword(user, password string) DialOption {
	return func(s *DialSettings) { s.Credentials = Credentials{User: user, Password: password} }
}

// WithAddresses connects each endpoint host:port in addrs to the address it
// maps to, such as a member's name to the local end of its port-forward.
//
// The endpoint keeps naming the member because clientv3 verifies a server
// certificate against the host of the endpoint URL and ignores
// tls.Config.ServerName: a member dialled as https://127.0.0.1:PORT is only
// verified if its certificate lists 127.0.0.1, and against a certificate
// that does not list the host a call hangs until its deadline instead of
// failing on the certificate. Naming the member https://NAME:PORT and
// connecting NAME:PORT elsewhere keeps the check against the name its
// certificate carries.
func WithAddresses(addrs map[string]string) DialOption {
	return func(s *DialSettings) { s.Addresses = maps.Clone(addrs) }
}

// ResolveDial applies opts over base; Dialer implementations use it.
func ResolveDial(base DialSettings, opts ...DialOption) DialSettings {
	for _, o := range opts {
		o(&base)
	}
	return base
}

// UnmappedEndpointError: the dial maps endpoints to addresses and this one
// is not among them. It is a caller's mistake, not an unavailable member,
// so no retry helps.
type UnmappedEndpointError struct {
	Endpoint string
	// Mapped are the host:port pairs the dial knows, for the message.
	Mapped []string
}

func (e *UnmappedEndpointError) Error() string {
	return fmt.Sprintf("endpoint %s is not among the addresses given for this dial (%s)", e.Endpoint, strings.Join(e.Mapped, ", "))
}

// CheckEndpoints reports the first endpoint the settings' Addresses do not
// map, if they map any. Dialers call it before they dial, so an unmapped
// endpoint fails at once instead of as a call that never connects.
func (s DialSettings) CheckEndpoints(endpoints ...string) error {
	if s.Addresses == nil {
		return nil
	}
	for _, ep := range endpoints {
		if _, ok := s.Addresses[hostPort(ep)]; !ok {
			return s.unmapped(ep)
		}
	}
	return nil
}

func (s DialSettings) unmapped(endpoint string) error {
	return &UnmappedEndpointError{Endpoint: endpoint, Mapped: slices.Sorted(maps.Keys(s.Addresses))}
}

// hostPort is the host:port of an endpoint the way clientv3's resolver
// hands it to gRPC's dialer: the URL's host, or the endpoint itself when
// it has no scheme.
func hostPort(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return endpoint
	}
	return u.Host
}

// contextDialer connects gRPC to the address the settings map host:port
// to. gRPC hands it the resolver's address, which for clientv3 is the
// endpoint's host:port.
func (s DialSettings) contextDialer() func(context.Context, string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, hostport string) (net.Conn, error) {
		addr, ok := s.Addresses[hostport]
		if !ok {
			return nil, s.unmapped(hostport)
		}
		return d.DialContext(ctx, "tcp", addr)
	}
}
