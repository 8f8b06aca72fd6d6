//go:build integration

package localcluster

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/quorumctl/etcd-operator/test/ports"
)

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// TestCertManagerIssuesThroughACAIssuer runs the cert-manager controller the
// local cluster runs against a real kube-apiserver and etcd on loopback (the
// local cluster's envtest binaries, no cluster) with the CRDs cluster-up
// applies, as the ServiceAccount of addons/cert-manager.yaml with only that
// file's RBAC: /readyz turns 200 once its caches synced, a self-signed Issuer
// signs a CA, a CA Issuer backed by it signs a certificate shaped like the
// one the operator asks for (wildcard member names, server and client use,
// ECDSA), and the Secret holds a certificate that chains to its ca.crt.
func TestCertManagerIssuesThroughACAIssuer(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := FindRepoRoot(".")
	g.Expect(err).NotTo(HaveOccurred())
	l, err := NewLayout(root)
	g.Expect(err).NotTo(HaveOccurred())
	p := NewProgress(logWriter{t})
	assets, err := l.EnvtestAssets(ctx, p)
	g.Expect(err).NotTo(HaveOccurred())
	bin, err := l.CertManagerBinary(ctx, p)
	g.Expect(err).NotTo(HaveOccurred())
	crds, err := l.CertManagerCRDDir(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	env := &envtest.Environment{BinaryAssetsDirectory: assets, CRDDirectoryPaths: []string{crds}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = env.Stop() }()
	admin, err := client.New(cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	addon, err := renderManifest("addons/cert-manager.yaml", certManagerValues{
		Namespace: CertManagerNamespace, Image: "unused", HealthPort: certManagerHealthPort, AvoidNode: NodeAt(0).Name,
	})
	g.Expect(err).NotTo(HaveOccurred())
	var saName string
	for _, obj := range addon {
		switch obj.GetKind() {
		case "Deployment":
			continue // the controller runs here as a host process
		case "ServiceAccount":
			saName = "system:serviceaccount:" + obj.GetNamespace() + ":" + obj.GetName()
		}
		g.Expect(applyAll(ctx, admin, []*unstructured.Unstructured{obj}, "addons/cert-manager.yaml")).To(Succeed())
	}
	g.Expect(saName).NotTo(BeEmpty(), "the add-on has a ServiceAccount")
	// A client certificate for the ServiceAccount's user name: the API
	// server's RBAC binds it exactly as it binds the account's token.
	user, err := env.AddUser(envtest.User{Name: saName, Groups: []string{"system:serviceaccounts", "system:authenticated"}}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := user.KubeConfig()
	g.Expect(err).NotTo(HaveOccurred())
	kcPath := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(os.WriteFile(kcPath, kubeconfig, 0o600)).To(Succeed())

	// A free loopback port for /readyz; nothing listens beyond loopback.
	healthAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports.Reserve(t, 1)[0]))

	logFile, err := os.Create(filepath.Join(t.ArtifactDir(), "cert-manager.log"))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = logFile.Close() }()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, certManagerBinary),
		"--kubeconfig="+kcPath, "--cluster-resource-namespace="+CertManagerNamespace, "--health-addr="+healthAddr)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	g.Expect(cmd.Start()).To(Succeed())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	readyz := func() (int, error) {
		resp, err := http.Get(fmt.Sprintf("http://%s/readyz", healthAddr))
		if err != nil {
			return 0, err
		}
		defer func() { _ = resp.Body.Close() }()
		return resp.StatusCode, nil
	}
	g.Eventually(readyz, 2*time.Minute, 250*time.Millisecond).Should(Equal(http.StatusOK), "the controller reported ready (see cert-manager.log)")

	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	g.Expect(cmapi.AddToScheme(scheme)).To(Succeed())
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	ns := "default"
	g.Expect(c.Create(ctx, &cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Name: "selfsigned", Namespace: ns},
		Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{SelfSigned: &cmapi.SelfSignedIssuer{}}}})).To(Succeed())
	g.Expect(c.Create(ctx, &cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Name: "etcd-ca", Namespace: ns},
		Spec: cmapi.CertificateSpec{IsCA: true, CommonName: "etcd-ca", SecretName: "etcd-ca",
			PrivateKey: &cmapi.CertificatePrivateKey{Algorithm: cmapi.ECDSAKeyAlgorithm, Size: 256},
			IssuerRef:  cmmeta.IssuerReference{Name: "selfsigned", Kind: cmapi.IssuerKind}}})).To(Succeed())
	g.Expect(c.Create(ctx, &cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Name: "etcd-ca", Namespace: ns},
		Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: "etcd-ca"}}}})).To(Succeed())
	g.Expect(c.Create(ctx, &cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Name: "demo-peer", Namespace: ns},
		Spec: cmapi.CertificateSpec{SecretName: "demo-peer-certmanager",
			SecretTemplate: &cmapi.CertificateSecretTemplate{Labels: map[string]string{"etcd.quorumctl.io/cluster": "demo"}},
			CommonName:     "demo.default.svc.peer",
			DNSNames:       []string{"*.demo.default.svc.cluster.local", "*.demo.default.svc", "demo-client.default.svc", "localhost"},
			IPAddresses:    []string{"127.0.0.1"},
			Usages:         []cmapi.KeyUsage{cmapi.UsageDigitalSignature, cmapi.UsageKeyEncipherment, cmapi.UsageServerAuth, cmapi.UsageClientAuth},
			PrivateKey:     &cmapi.CertificatePrivateKey{Algorithm: cmapi.ECDSAKeyAlgorithm, Size: 256, RotationPolicy: cmapi.RotationPolicyAlways},
			IssuerRef:      cmmeta.IssuerReference{Name: "etcd-ca", Kind: cmapi.IssuerKind, Group: "cert-manager.io"}}})).To(Succeed())

	secret := &corev1.Secret{}
	g.Eventually(func() bool {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-peer-certmanager"}, secret); err != nil {
			return false
		}
		return len(secret.Data["tls.crt"]) > 0 && len(secret.Data["ca.crt"]) > 0
	}, 3*time.Minute, 500*time.Millisecond).Should(BeTrue(), "cert-manager issued the certificate (see cert-manager.log)")
	g.Expect(secret.Labels).To(HaveKeyWithValue("etcd.quorumctl.io/cluster", "demo"), "the Secret carries the operator's label")
	block, _ := pem.Decode(secret.Data["tls.crt"])
	g.Expect(block).NotTo(BeNil(), "tls.crt is PEM")
	leaf, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(secret.Data["ca.crt"])).To(BeTrue())
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "demo-abcde.demo.default.svc.cluster.local", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
	g.Expect(err).NotTo(HaveOccurred(), "the certificate serves a member and chains to ca.crt")
}
