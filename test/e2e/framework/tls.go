package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/quorumctl/etcd-operator/internal/certs"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/localcluster"
)

// ClientServerName is the name a member's certificate carries for the
// client Service; the tests dial Pod and Service IPs from the host and
// verify the members under it.
func ClientServerName(ns, cluster string) string {
	return v1alpha1.ClientServiceName(cluster) + "." + ns + ".svc"
}

// ClientMaterial is a client certificate with the CAs it trusts, as a
// client Secret (tls.crt, tls.key, ca.crt) holds it.
type ClientMaterial struct {
	CertPEM, KeyPEM, CAPEM []byte
}

// ReadClientSecret reads a client certificate Secret, such as
// <cluster>-admin-client, once it has a certificate.
func ReadClientSecret(ctx context.Context, c client.Client, ns, name string) (ClientMaterial, error) {
	var m ClientMaterial
	err := WaitFor(ctx, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			return false, err
		}
		m = ClientMaterial{CertPEM: s.Data[corev1.TLSCertKey], KeyPEM: s.Data[corev1.TLSPrivateKeyKey], CAPEM: s.Data["ca.crt"]}
		return len(m.CertPEM) > 0 && len(m.KeyPEM) > 0 && len(m.CAPEM) > 0, nil
	})
	return m, err
}

// TLSConfig verifies members as serverName against the material's CAs and
// presents its certificate; without a certificate it presents none.
//
// The check is made in VerifyConnection rather than left to crypto/tls:
// clientv3 verifies a member against the host of the endpoint it dials and
// not tls.Config.ServerName, and the suite dials Pod and Service IPs that
// no certificate lists (a Secret's or cert-manager's names only DNS names).
// Left to clientv3, a dial of such an IP never completes its handshake and
// a call hangs until its deadline. Every certificate of a cluster names its
// client Service, so that is the name each member is checked against.
func (m ClientMaterial) TLSConfig(serverName string, withCert bool) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(m.CAPEM) {
		return nil, errors.New("no CA certificate in ca.crt")
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verified in VerifyConnection, against serverName (see above).
		InsecureSkipVerify: true, //nolint:gosec // verified below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the member presented no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: serverName})
			return err
		},
	}
	if withCert {
		pair, err := tls.X509KeyPair(m.CertPEM, m.KeyPEM)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// WriteFiles writes ca.crt, tls.crt and tls.key into dir, for etcdctl and
// kube-apiserver, and returns their paths.
func (m ClientMaterial) WriteFiles(dir string) (ca, cert, key string, err error) {
	ca, cert, key = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for path, data := range map[string][]byte{ca: m.CAPEM, cert: m.CertPEM, key: m.KeyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return "", "", "", err
		}
	}
	return ca, cert, key, nil
}

// EtcdTLSClient dials endpoints (https URLs) with cfg, otherwise as
// EtcdClient does.
func EtcdTLSClient(cfg *tls.Config, endpoints ...string) (*clientv3.Client, error) {
	c := etcdConfig(endpoints)
	c.TLS = cfg
	return clientv3.New(c)
}

// HTTPS turns http URLs into https ones.
func HTTPS(urls []string) []string {
	out := make([]string, 0, len(urls))
	for _, u := range urls {
		if len(u) > 7 && u[:7] == "http://" {
			u = "https://" + u[7:]
		}
		out = append(out, u)
	}
	return out
}

// ServedCertificate is the certificate a TLS address (host:port) presents,
// read as the operator reads it (certs.ServedCertificate), within 5 s.
func ServedCertificate(ctx context.Context, addr string) (*x509.Certificate, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return certs.ServedCertificate(ctx, "https://"+addr)
}

var certManagerOnce = struct {
	sync.Once
	err error
}{}

// EnsureCertManager checks, once per run, that cert-manager (which
// localcluster up installs) is ready to issue; it re-applies it if not.
func (e *Env) EnsureCertManager(ctx context.Context, t interface{ Log(...any) }) error {
	certManagerOnce.Do(func() {
		certManagerOnce.err = e.Layout.InstallCertManager(ctx, localcluster.NewProgress(logWriter{t}), e.Config)
	})
	return certManagerOnce.err
}

type logWriter struct{ t interface{ Log(...any) } }

func (w logWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// PodStates are each member Pod's UID and etcd restart count, to show that
// nothing restarted.
func (e *Env) PodStates(ctx context.Context, ns, cluster string) (map[string]string, error) {
	pods, err := e.MemberPods(ctx, ns, cluster)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for name, p := range pods {
		restarts := int32(0)
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
		out[name] = fmt.Sprintf("%s/%d", p.UID, restarts)
	}
	return out, nil
}

// MemberAddresses are the members' Pod IP:port for a port, sorted.
func (e *Env) MemberAddresses(ctx context.Context, ns, cluster string, port int) ([]string, error) {
	pods, err := e.MemberPods(ctx, ns, cluster)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
			continue
		}
		out = append(out, net.JoinHostPort(p.Status.PodIP, fmt.Sprint(port)))
	}
	sort.Strings(out)
	return out, nil
}

// EtcdClientLabel marks the Pods the suite runs in a cluster's namespace to
// use etcd (etcdctl, a kube-apiserver): the cluster's NetworkPolicy admits
// them only when the cluster names them (AllowE2EClients), as a user names
// their own clients.
const EtcdClientLabel = "e2e.quorumctl.io/etcd-client"

// AllowE2EClients lets the suite's client Pods of the cluster's namespace
// in on the client port.
func AllowE2EClients(c *v1alpha1.EtcdCluster) {
	c.Spec.NetworkPolicy.AllowedClients = append(c.Spec.NetworkPolicy.AllowedClients, v1alpha1.NetworkPolicyClient{
		PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{EtcdClientLabel: "true"}},
	})
}

// RunEtcdctl runs etcdctl in a Pod of the namespace, from the default etcd
// image, with a client certificate Secret mounted, against endpoint, and
// returns its output.
func (e *Env) RunEtcdctl(ctx context.Context, ns, secret, endpoint string, args ...string) (string, error) {
	name := "etcdctl-" + rand.String(5)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{EtcdClientLabel: "true"}},
		Spec: corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			SecurityContext: RestrictedPodSecurity(),
			Containers: []corev1.Container{{
				Name:            "etcdctl",
				Image:           e.Versions.EtcdImage(e.Versions.EtcdDefault),
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"/usr/local/bin/etcdctl"},
				Args: append([]string{"--endpoints=" + endpoint, "--cacert=/certs/ca.crt", "--cert=/certs/tls.crt",
					"--key=/certs/tls.key", "--command-timeout=20s"}, args...),
				SecurityContext: RestrictedContainerSecurity(),
				VolumeMounts:    []corev1.VolumeMount{{Name: "certs", MountPath: "/certs", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}},
		},
	}
	if _, err := e.Clientset.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	err := e.WaitForPodSucceeded(ctx, ns, name, 2*time.Minute)
	logs := e.Kubectl(ctx, "logs", "-n", ns, name)
	return logs.Stdout + logs.Stderr, err
}

// E2EClientSecretName is the Secret the e2e suite asks the operator to
// fill with a client certificate for a cluster (common name root), as
// kubectl etcd does: it works whatever the cluster's certificate source.
func E2EClientSecretName(cluster string) string { return cluster + "-e2e-client" }

// RequestClientCertificate asks the operator for a client certificate of
// the cluster, for common name cn, and returns it once issued.
func RequestClientCertificate(ctx context.Context, c client.Client, ns, cluster, cn string) (ClientMaterial, error) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: E2EClientSecretName(cluster), Namespace: ns,
		Labels:      v1alpha1.ClusterLabels(cluster),
		Annotations: map[string]string{v1alpha1.IssueClientCertificateAnnotation: cn}}}
	if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return ClientMaterial{}, fmt.Errorf("failed to ask for a client certificate of %s: %w", cluster, err)
	}
	return ReadClientSecret(ctx, c, ns, s.Name)
}

// ClusterClient dials endpoint (an http URL of a member or the client
// Service) as a client of the cluster would: plaintext while the cluster
// has no spec.tls, otherwise https with a client certificate (root) the
// operator issues, verified under the client Service's name.
func ClusterClient(ctx context.Context, c client.Client, ns, cluster, endpoint string) (*clientv3.Client, error) {
	cl := &v1alpha1.EtcdCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, cl); err != nil {
		return nil, err
	}
	if cl.Spec.TLS == nil {
		return EtcdClient(endpoint)
	}
	m, err := RequestClientCertificate(ctx, c, ns, cluster, "root")
	if err != nil {
		return nil, err
	}
	cfg, err := m.TLSConfig(ClientServerName(ns, cluster), true)
	if err != nil {
		return nil, err
	}
	return EtcdTLSClient(cfg, HTTPS([]string{endpoint})...)
}

// FollowClientSecret is a client configuration that follows a client
// certificate Secret as a well-behaved client follows its files: it trusts
// the Secret's ca.crt and presents its certificate as they are at each
// handshake, re-reading them every half second until ctx ends. A CA
// rotation relies on it: the Secret trusts the old and the new CA from the
// first pass, and holds a certificate of the new one from the second.
func FollowClientSecret(ctx context.Context, c client.Client, ns, name, serverName string) (*tls.Config, error) {
	first, err := ReadClientSecret(ctx, c, ns, name)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	current := first
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			s := &corev1.Secret{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
				continue
			}
			m := ClientMaterial{CertPEM: s.Data[corev1.TLSCertKey], KeyPEM: s.Data[corev1.TLSPrivateKeyKey], CAPEM: s.Data["ca.crt"]}
			if _, err := tls.X509KeyPair(m.CertPEM, m.KeyPEM); err != nil || len(m.CAPEM) == 0 {
				continue
			}
			mu.Lock()
			current = m
			mu.Unlock()
		}
	}()
	now := func() ClientMaterial {
		mu.Lock()
		defer mu.Unlock()
		return current
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verified in VerifyConnection, as in ClientMaterial.TLSConfig.
		InsecureSkipVerify: true, //nolint:gosec // verified below
		VerifyConnection: func(cs tls.ConnectionState) error {
			cfg, err := now().TLSConfig(serverName, false)
			if err != nil {
				return err
			}
			return cfg.VerifyConnection(cs)
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			m := now()
			pair, err := tls.X509KeyPair(m.CertPEM, m.KeyPEM)
			if err != nil {
				return nil, err
			}
			return &pair, nil
		},
	}, nil
}
