package portforward

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"
)

// Forwarder opens Tunnels to Pod ports.
type Forwarder struct {
	config *rest.Config
	client kubernetes.Interface
}

// New returns a Forwarder that talks to the API server of config.
func New(config *rest.Config) (*Forwarder, error) {
	cs, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	return &Forwarder{config: config, client: cs}, nil
}

// Tunnel listens on a random port of 127.0.0.1 and carries every connection
// it accepts to the Pod's port.
type Tunnel struct {
	addr string
	stop chan struct{}
	done chan struct{}
	errs *lastLine
	once sync.Once
}

// Forward checks that the caller may forward to the Pod, then starts
// forwarding. ctx bounds the start; the Tunnel runs until Close.
func (f *Forwarder) Forward(ctx context.Context, namespace, pod string, port int) (*Tunnel, error) {
	if err := Allowed(ctx, f.client, namespace, pod); err != nil {
		return nil, err
	}
	u := f.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(f.config)
	if err != nil {
		return nil, err
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	wsDialer, err := portforward.NewSPDYOverWebsocketDialer(u, f.config)
	if err != nil {
		return nil, err
	}
	dialer := portforward.NewFallbackDialer(wsDialer, spdyDialer, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})

	t := &Tunnel{stop: make(chan struct{}), done: make(chan struct{}), errs: &lastLine{}}
	ready := make(chan struct{})
	// Loopback only: the tunnel carries unauthenticated etcd traffic.
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, t.stop, ready, nil, t.errs)
	if err != nil {
		return nil, err
	}
	var runErr error
	go func() {
		defer close(t.done)
		runErr = pf.ForwardPorts()
	}()
	select {
	case <-ready:
	case <-t.done:
		return nil, fmt.Errorf("failed to port-forward to Pod %s/%s port %d: %w", namespace, pod, port, runErr)
	case <-ctx.Done():
		_ = t.Close()
		return nil, ctx.Err()
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		_ = t.Close()
		return nil, fmt.Errorf("failed to read the local port forwarded to Pod %s/%s: %v", namespace, pod, err)
	}
	t.addr = fmt.Sprintf("127.0.0.1:%d", ports[0].Local)
	return t, nil
}

// Allowed asks the API server whether the caller may forward to the Pod,
// returning a Forbidden API error when not. It does not read the Pod: the
// caller found it by listing, and a Forbidden from reading it would be taken
// for a missing port-forward permission.
func Allowed(ctx context.Context, c kubernetes.Interface, namespace, pod string) error {
	review, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: "create", Resource: "pods", Subresource: "portforward", Name: pod,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if !review.Status.Allowed {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods/portforward"}, pod,
			errors.New(strings.TrimSpace("access review denied "+review.Status.Reason)))
	}
	return nil
}

// Addr is the local address, host:port.
func (t *Tunnel) Addr() string { return t.addr }

// Endpoint is the etcd client URL of the tunnel.
func (t *Tunnel) Endpoint() string { return "http://" + t.addr }

// LastError is the last error the forwarding reported for a connection, such
// as nothing listening on the Pod's port; an etcd error alone only says the
// connection was reset.
func (t *Tunnel) LastError() error { return t.errs.err() }

// Close stops forwarding and waits until the local port is released.
func (t *Tunnel) Close() error {
	t.once.Do(func() { close(t.stop) })
	<-t.done
	return nil
}

// lastLine keeps the last line client-go wrote to its error stream.
type lastLine struct {
	mu   sync.Mutex
	last string
}

func (l *lastLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if line := strings.TrimSpace(string(bytes.TrimSpace(p))); line != "" {
		l.last = line
	}
	return len(p), nil
}

func (l *lastLine) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == "" {
		return nil
	}
	return errors.New(l.last)
}
