package plugin

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/plugin/portforward"
)

// Tunnel is a local endpoint that reaches one member's client port.
type Tunnel interface {
	// Endpoint is the tunnel's local end as an http URL on 127.0.0.1;
	// over TLS the client names the member and connects here.
	Endpoint() string
	// LastError says why the tunnel last failed to carry a connection, which
	// the etcd error alone (a reset connection) does not.
	LastError() error
	Close() error
}

// Forwarder opens Tunnels to Pod ports. Errors from the API server keep their
// type, so apierrors.IsForbidden tells a missing permission apart.
type Forwarder interface {
	Forward(ctx context.Context, namespace, pod string, port int) (Tunnel, error)
}

// Env is everything a command needs from the outside world; tests build one
// from fakes.
type Env struct {
	Kube      client.Client
	Namespace string
	Forwarder Forwarder
	Dialer    etcd.Dialer
	// TLS are the user's own client certificate files, if any.
	TLS TLSFlags
}

// KubeFlags select the cluster, user and namespace the way kubectl's flags
// of the same names do.
type KubeFlags struct {
	Kubeconfig string
	Context    string
	Namespace  string
}

// NewEnv resolves kubeconfig, context and namespace like kubectl (KUBECONFIG,
// --kubeconfig, --context, -n, then the context's namespace, then
// "default") and connects to that API server.
func NewEnv(f KubeFlags, dialOpts ...etcd.Option) (*Env, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.Kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: f.Context}
	overrides.Context.Namespace = f.Namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)

	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("failed to load kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("failed to determine the namespace from kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("failed to register core types: %w", err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("failed to register %s types: %w", v1alpha1.GroupVersion, err)
	}
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("failed to create a Kubernetes client for %s: %w", cfg.Host, err)
	}
	fwd, err := portforward.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Env{
		Kube:      kube,
		Namespace: ns,
		Forwarder: tunnelForwarder{fwd},
		Dialer:    etcd.NewDialer(dialOpts...),
	}, nil
}

// tunnelForwarder adapts the concrete Tunnel type to the interface.
type tunnelForwarder struct{ f *portforward.Forwarder }

func (t tunnelForwarder) Forward(ctx context.Context, namespace, pod string, port int) (Tunnel, error) {
	tun, err := t.f.Forward(ctx, namespace, pod, port)
	if err != nil {
		return nil, err
	}
	return tun, nil
}
