package portforward

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// Protocol is the WebSocket subprotocol of binary port-forwarding.
const Protocol = "v4.channel.k8s.io"

// Channels of the single forwarded port.
const (
	dataChannel  byte = 0
	errorChannel byte = 1
)

// bufferSize bounds one message; the channel byte comes on top.
const bufferSize = 32 * 1024

// maxStatusBody bounds what we read of a refused upgrade's body.
const maxStatusBody = 64 * 1024

var portForwardResource = schema.GroupResource{Resource: "pods/portforward"}

// Forwarder opens Tunnels with one set of API server credentials.
type Forwarder struct {
	config *rest.Config
	core   rest.Interface
	tls    *tls.Config
}

// New prepares a Forwarder for the API server and credentials of config.
func New(config *rest.Config) (*Forwarder, error) {
	core, err := corev1client.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("failed to build a client for the API server: %w", err)
	}
	tlsConfig, err := rest.TLSConfigFor(config)
	if err != nil {
		return nil, fmt.Errorf("failed to build the TLS configuration of the API server: %w", err)
	}
	return &Forwarder{config: config, core: core.RESTClient(), tls: tlsConfig}, nil
}

// url is the port-forward endpoint of one Pod port. The method only matters
// for building the path: the upgrade itself is a GET, as WebSocket requires.
func (f *Forwarder) url(namespace, pod string, port int) (*url.URL, error) {
	u := f.core.Post().Namespace(namespace).Resource("pods").Name(pod).
		SubResource("portforward").Param("ports", strconv.Itoa(port)).URL()
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	case "http":
		u.Scheme = "ws"
	default:
		return nil, fmt.Errorf("failed to build the port-forward URL: unsupported API server scheme %q", u.Scheme)
	}
	return u, nil
}

// dial opens one WebSocket to the port. Authentication goes through
// rest.HTTPWrappersForConfig, the same wrappers client-go puts around every
// request, so bearer tokens, basic auth, exec plugins and impersonation
// behave as for kubectl; the innermost round tripper performs the upgrade.
func (f *Forwarder) dial(ctx context.Context, u *url.URL) (*websocket.Conn, error) {
	upgrader := &upgradeRoundTripper{
		dialer: websocket.Dialer{
			Proxy:           f.config.Proxy,
			TLSClientConfig: f.tls,
			Subprotocols:    []string{Protocol},
			ReadBufferSize:  bufferSize + 1,
			WriteBufferSize: bufferSize + 1,
		},
	}
	if upgrader.dialer.Proxy == nil {
		upgrader.dialer.Proxy = http.ProxyFromEnvironment
	}
	rt, err := rest.HTTPWrappersForConfig(f.config, upgrader)
	if err != nil {
		return nil, fmt.Errorf("failed to set up API server authentication: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("failed to build the port-forward request: %w", err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	if upgrader.conn == nil {
		return nil, errors.New("failed to upgrade the port-forward connection: no connection established")
	}
	return upgrader.conn, nil
}

// upgradeRoundTripper performs the WebSocket upgrade in place of an HTTP
// round trip and keeps the connection; it serves exactly one request.
type upgradeRoundTripper struct {
	dialer websocket.Dialer
	conn   *websocket.Conn
}

func (rt *upgradeRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	conn, resp, err := rt.dialer.DialContext(req.Context(), req.URL.String(), req.Header)
	if err != nil {
		if errors.Is(err, websocket.ErrBadHandshake) && resp != nil {
			return nil, refusal(resp, req.URL)
		}
		return nil, fmt.Errorf("failed to connect to the API server for port-forwarding: %w", err)
	}
	if conn.Subprotocol() != Protocol {
		_ = conn.Close()
		return nil, fmt.Errorf("failed to upgrade the port-forward connection: the server chose protocol %q, want %q", conn.Subprotocol(), Protocol)
	}
	rt.conn = conn
	// The response of a successful handshake has no body to read; give the
	// wrappers one they can close.
	resp.Body = http.NoBody
	return resp, nil
}

// refusal turns a refused upgrade into an API error, so that callers can
// classify it with apierrors.IsForbidden, IsNotFound and friends.
func refusal(resp *http.Response, u *url.URL) error {
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxStatusBody))
	var status metav1.Status
	if json.Unmarshal(body, &status) == nil && status.Kind == "Status" {
		return &apierrors.StatusError{ErrStatus: status}
	}
	// Not a Status: a proxy or a kubelet answered. Classify by the HTTP code
	// and keep the text, which is usually the only explanation there is.
	return apierrors.NewGenericServerResponse(resp.StatusCode, http.MethodPost, portForwardResource, u.Path, string(body), 0, true)
}
