package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// forwardTimeout bounds opening all tunnels of a cluster; the API server and
// kubelet answer an upgrade in milliseconds when they answer at all.
const forwardTimeout = 15 * time.Second

const (
	etcdClusterResource = "etcdclusters.etcd.quorumctl.io"
	podPortForward      = "pods/portforward"
)

// session is one cluster's Pods, a tunnel to each running one, and an etcd
// client dialed through all tunnels.
type session struct {
	cluster *v1alpha1.EtcdCluster
	// pods are the cluster's member Pods by name, running or not.
	pods map[string]*corev1.Pod
	// tunnels by Pod name; a running Pod without one is in unreachable.
	tunnels     map[string]Tunnel
	unreachable map[string]error
	client      etcd.Client
	// endpoints by Pod name are what the client dials for each tunnelled
	// member: the tunnel's own endpoint, or over TLS the member's name
	// (see namedEndpoints).
	endpoints map[string]string
}

func (s *session) Close() {
	if s.client != nil {
		_ = s.client.Close()
	}
	for _, t := range s.tunnels {
		_ = t.Close()
	}
}

func (s *session) ref() string { return s.cluster.Namespace + "/" + s.cluster.Name }

// endpoint is the endpoint through which the client reaches a member's
// Pod; every single-member call must use it, not the tunnel's endpoint,
// which over TLS is not one the client can dial.
func (s *session) endpoint(member string) (string, bool) {
	ep, ok := s.endpoints[member]
	return ep, ok
}

// explainUnreachable adds what the tunnel knows to an etcd error: through a
// port-forward, etcd only sees a reset connection.
func (s *session) explainUnreachable(member string, err error) error {
	if t, ok := s.tunnels[member]; ok {
		if terr := t.LastError(); terr != nil {
			return fmt.Errorf("%w (%v)", err, terr)
		}
	}
	return err
}

// getCluster fetches the EtcdCluster, turning the common failures into
// messages that say what to do.
func (e *Env) getCluster(ctx context.Context, name string) (*v1alpha1.EtcdCluster, error) {
	c := &v1alpha1.EtcdCluster{}
	err := e.Kube.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, c)
	switch {
	case err == nil:
		return c, nil
	case apierrors.IsNotFound(err):
		return nil, &plainError{msg: fmt.Sprintf("EtcdCluster %s not found in namespace %s", name, e.Namespace), err: err}
	}
	return nil, access{verb: "get", resource: etcdClusterResource, namespace: e.Namespace, what: "EtcdCluster " + name}.explain(err)
}

// listClusters returns the namespace's EtcdClusters sorted by name.
func (e *Env) listClusters(ctx context.Context) ([]v1alpha1.EtcdCluster, error) {
	var list v1alpha1.EtcdClusterList
	if err := e.Kube.List(ctx, &list, client.InNamespace(e.Namespace)); err != nil {
		return nil, access{verb: "list", resource: etcdClusterResource, namespace: e.Namespace, what: "EtcdClusters"}.explain(err)
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.EtcdCluster) int { return strings.Compare(a.Name, b.Name) })
	return list.Items, nil
}

// connect looks the cluster up and opens a tunnel to each running member Pod.
// A Pod that cannot be forwarded to is recorded in unreachable, except for a
// missing permission, which would fail every Pod alike and is returned.
func (e *Env) connect(ctx context.Context, name string) (*session, error) {
	c, err := e.getCluster(ctx, name)
	if err != nil {
		return nil, err
	}
	return e.connectTo(ctx, c)
}

func (e *Env) connectTo(ctx context.Context, c *v1alpha1.EtcdCluster) (*session, error) {
	var pods corev1.PodList
	// Member Pods carry the member label too; requiring it keeps any other
	// Pod labelled with the cluster (a helper Job, say) out of the tunnels.
	err := e.Kube.List(ctx, &pods, client.InNamespace(c.Namespace),
		client.MatchingLabels{v1alpha1.ClusterLabel: c.Name}, client.HasLabels{v1alpha1.MemberLabel})
	if err != nil {
		return nil, access{verb: "list", resource: "pods", namespace: c.Namespace, what: "the member Pods of EtcdCluster " + c.Name}.explain(err)
	}
	s := &session{cluster: c, pods: map[string]*corev1.Pod{}, tunnels: map[string]Tunnel{}, unreachable: map[string]error{}}
	var running []string
	for i := range pods.Items {
		p := &pods.Items[i]
		s.pods[p.Name] = p
		if p.Status.Phase == corev1.PodRunning {
			running = append(running, p.Name)
		}
	}
	slices.Sort(running)
	if len(running) == 0 {
		return nil, fmt.Errorf("no running member Pods of EtcdCluster %s in namespace %s (%d Pods with label %s=%s, none Running)",
			c.Name, c.Namespace, len(pods.Items), v1alpha1.ClusterLabel, c.Name)
	}

	if err := s.openTunnels(ctx, e.Forwarder, running); err != nil {
		s.Close()
		return nil, err
	}
	https, opts, err := e.security(ctx, s, running)
	if err != nil {
		s.Close()
		return nil, err
	}
	creds, err := e.credentials(ctx, s, https)
	if err != nil {
		s.Close()
		return nil, err
	}
	opts = append(opts, creds...)
	s.endpoints = map[string]string{}
	if https {
		var addresses map[string]string
		s.endpoints, addresses, err = s.namedEndpoints(running)
		if err != nil {
			s.Close()
			return nil, err
		}
		opts = append(opts, etcd.WithAddresses(addresses))
	} else {
		for name, t := range s.tunnels {
			s.endpoints[name] = t.Endpoint()
		}
	}
	endpoints := make([]string, 0, len(s.endpoints))
	for _, name := range running {
		if ep, ok := s.endpoints[name]; ok {
			endpoints = append(endpoints, ep)
		}
	}
	s.client, err = e.Dialer.Dial(ctx, endpoints, opts...)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("failed to create an etcd client for EtcdCluster %s: %w", s.ref(), err)
	}
	return s, nil
}

func (s *session) openTunnels(ctx context.Context, fwd Forwarder, pods []string) error {
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, name := range pods {
		wg.Go(func() {
			t, err := fwd.Forward(ctx, s.cluster.Namespace, name, v1alpha1.ClientPort)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				s.unreachable[name] = err
				return
			}
			s.tunnels[name] = t
		})
	}
	wg.Wait()

	for _, name := range pods {
		if err := s.unreachable[name]; apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			// The same permission kubectl port-forward needs.
			return access{verb: "create", resource: podPortForward, namespace: s.cluster.Namespace,
				what: "a port-forward to Pod " + name}.explain(err)
		}
	}
	if len(s.tunnels) == 0 {
		errs := make([]error, 0, len(pods))
		for _, name := range pods {
			errs = append(errs, s.unreachable[name])
		}
		return fmt.Errorf("failed to reach any member of EtcdCluster %s: %w", s.ref(), errors.Join(errs...))
	}
	return nil
}
