//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
	"github.com/quorumctl/etcd-operator/test/localcluster"
)

// certManagerCA is a self-signed Issuer, a CA Certificate from it and a CA
// Issuer named etcd-ca backed by that CA.
func certManagerCA(ns string) []client.Object {
	return []client.Object{
		&cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Name: "selfsigned", Namespace: ns},
			Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{SelfSigned: &cmapi.SelfSignedIssuer{}}}},
		&cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Name: "etcd-ca", Namespace: ns},
			Spec: cmapi.CertificateSpec{IsCA: true, CommonName: "etcd-ca", SecretName: "etcd-ca",
				PrivateKey: &cmapi.CertificatePrivateKey{Algorithm: cmapi.ECDSAKeyAlgorithm, Size: 256},
				IssuerRef:  cmmeta.IssuerReference{Name: "selfsigned", Kind: cmapi.IssuerKind}}},
		&cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Name: "etcd-ca", Namespace: ns},
			Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: "etcd-ca"}}}},
	}
}

// secondAPIServer is a kube-apiserver Pod, the local cluster's own binary,
// whose datastore is the TLS cluster under test.
type secondAPIServer struct {
	r     *rollCluster
	token string
	pod   *corev1.Pod
	// etcdSecret holds its etcd client files (ca.crt, tls.crt, tls.key):
	// the administrators' Secret when empty.
	etcdSecret string
}

// importAPIServer serializes the tests' imports of the kube-apiserver
// image: two builds of one tarball at once would write the same file.
var importAPIServer sync.Mutex

// newSecondAPIServer imports the local cluster's kube-apiserver as an image
// and writes the Secret of its token and service account key; start runs
// it. It returns the image.
func newSecondAPIServer(ctx context.Context, r *rollCluster) (*secondAPIServer, string) {
	assets, err := env.Layout.EnvtestAssets(ctx, localcluster.NewProgress(io.Discard))
	r.g.Expect(err).NotTo(HaveOccurred())
	image := "localhost/localcluster/kube-apiserver:" + env.Versions.Kubernetes
	importAPIServer.Lock()
	_, err = env.Layout.ImportImage(ctx, localcluster.StaticBinaryImageSpec(image, filepath.Join(assets, "kube-apiserver"), "/kube-apiserver"))
	importAPIServer.Unlock()
	r.g.Expect(err).NotTo(HaveOccurred())
	// kube-apiserver reads only RSA and ECDSA service account keys.
	sa, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	r.g.Expect(err).NotTo(HaveOccurred())
	saDER, err := x509.MarshalECPrivateKey(sa)
	r.g.Expect(err).NotTo(HaveOccurred())
	saKey := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER})
	a := &secondAPIServer{r: r, token: rand.String(32)}
	r.g.Expect(r.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "second-apiserver-auth", Namespace: r.ns},
		Data: map[string][]byte{
			"token.csv": []byte(a.token + ",admin,admin,system:masters\n"),
			"sa.key":    saKey,
		}})).To(Succeed())
	return a, image
}

func (a *secondAPIServer) start(ctx context.Context, image string) {
	r := a.r
	name := "apiserver-" + rand.String(4)
	etcdSecret := a.etcdSecret
	if etcdSecret == "" {
		etcdSecret = v1alpha1.AdminClientSecretName(r.name)
	}
	mount := func(vol, path string) corev1.VolumeMount {
		return corev1.VolumeMount{Name: vol, MountPath: path, ReadOnly: path != "/var/run/apiserver"}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns, Labels: map[string]string{"app": "second-apiserver", framework.EtcdClientLabel: "true"}},
		Spec: corev1.PodSpec{
			SecurityContext: framework.RestrictedPodSecurity(),
			Containers: []corev1.Container{{
				Name: "kube-apiserver", Image: image, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/kube-apiserver"},
				Args: []string{
					"--etcd-servers=https://" + r.serverName() + ":2379",
					"--etcd-cafile=/etcd/ca.crt", "--etcd-certfile=/etcd/tls.crt", "--etcd-keyfile=/etcd/tls.key",
					"--etcd-prefix=/second-apiserver",
					"--secure-port=6443", "--bind-address=0.0.0.0", "--cert-dir=/var/run/apiserver",
					"--token-auth-file=/auth/token.csv", "--authorization-mode=RBAC",
					"--service-account-issuer=https://second-apiserver.example",
					"--service-account-key-file=/auth/sa.key", "--service-account-signing-key-file=/auth/sa.key",
					"--service-cluster-ip-range=10.250.0.0/24",
				},
				SecurityContext: framework.RestrictedContainerSecurity(),
				VolumeMounts:    []corev1.VolumeMount{mount("etcd", "/etcd"), mount("auth", "/auth"), mount("work", "/var/run/apiserver")},
			}},
			Volumes: []corev1.Volume{
				{Name: "etcd", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: etcdSecret}}},
				{Name: "auth", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "second-apiserver-auth"}}},
				{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	created, err := env.Clientset.CoreV1().Pods(r.ns).Create(ctx, pod, metav1.CreateOptions{})
	r.g.Expect(err).NotTo(HaveOccurred())
	a.pod = created
	r.g.Expect(framework.WaitFor(ctx, 3*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		p, err := env.Clientset.CoreV1().Pods(r.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.Status.PodIP == "" {
			return false, err
		}
		a.pod = p
		return a.readyz(ctx) == nil, nil
	})).To(Succeed(), "the second kube-apiserver is ready")
}

func (a *secondAPIServer) config() *rest.Config {
	return &rest.Config{
		Host: "https://" + a.pod.Status.PodIP + ":6443", BearerToken: a.token, Timeout: 5 * time.Second,
		// The second API server's serving certificate is self-signed in
		// its cert dir; what is under test is its datastore.
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
	}
}

func (a *secondAPIServer) readyz(ctx context.Context) error {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see config
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+a.pod.Status.PodIP+":6443/readyz", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		return fmt.Errorf("readyz: %d %s", resp.StatusCode, body)
	}
	return nil
}

// TestTLSClusterAsAKubernetesDatastore: a second kube-apiserver stores in a
// TLS cluster through its client Service with the administrators'
// certificate while a member loses its data dir and is replaced; every
// ConfigMap it acknowledged is still there, and its /readyz is OK.
func TestTLSClusterAsAKubernetesDatastore(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	r := newRollCluster(ctx, t, "tls-datastore", func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{}
		framework.AllowE2EClients(c)
	})
	a, image := newSecondAPIServer(ctx, r)
	a.start(ctx, image)

	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			mu.Lock()
			cfg := a.config()
			mu.Unlock()
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				continue
			}
			name := fmt.Sprintf("cm-%05d", i)
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = cs.CoreV1().ConfigMaps("default").Create(cctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			cancel()
			if err == nil {
				mu.Lock()
				acked = append(acked, name)
				mu.Unlock()
			}
		}
	}()
	waitAcked := func(what string) {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		r.g.Eventually(func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }, 2*time.Minute, time.Second).
			Should(BeNumerically(">", n+10), "ConfigMaps are created %s", what)
	}
	waitAcked("before anything happens")

	// A member loses its data dir under the writer: the operator replaces it
	// over TLS, with a new member and a new certificate, while the second
	// API server keeps storing through the client Service.
	victim := r.pick(ctx, false)
	r.recover(ctx, victim, "DataDirLost", func() error { return env.LoseDataDir(ctx, r.ns, victim.Name) })
	waitAcked("after the replacement")
	r.expectSentinelEverywhere(ctx)
	close(stop)
	<-done

	r.g.Expect(a.readyz(ctx)).To(Succeed(), "/readyz is OK")
	cs, err := kubernetes.NewForConfig(a.config())
	r.g.Expect(err).NotTo(HaveOccurred())
	list, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	r.g.Expect(err).NotTo(HaveOccurred())
	have := map[string]bool{}
	for _, cm := range list.Items {
		have[cm.Name] = true
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d ConfigMaps acknowledged", len(acked))
	for _, name := range acked {
		r.g.Expect(have).To(HaveKey(name), "acknowledged ConfigMap %s is still there", name)
	}
}
