package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// certRequest is one certificate the cluster needs, signed by the local CA.
type certRequest struct {
	file   string // base name; writes <file>.crt and <file>.key
	cn     string
	orgs   []string
	ips    []string
	dns    []string
	server bool
	client bool
}

type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// ensurePKI creates the CA, every component certificate, the service account
// signing key and the kubeconfigs, keeping whatever already exists so a
// re-run of up is idempotent.
func (l Layout) ensurePKI(nodes []Node) error {
	dir := l.pkiDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, err := loadOrCreateCA(dir)
	if err != nil {
		return err
	}
	reqs := []certRequest{
		{
			file: "apiserver", cn: "kube-apiserver", server: true,
			ips: []string{APIServerServiceIP, ControlPlaneIP(), "127.0.0.1"},
			dns: []string{
				"kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc." + ClusterDomain, "localhost",
			},
		},
		{file: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true},
		{file: "admin", cn: "localcluster-admin", orgs: []string{"system:masters"}, client: true},
		{file: "controller-manager", cn: "system:kube-controller-manager", client: true},
		{file: "scheduler", cn: "system:kube-scheduler", client: true},
		{file: "kube-proxy", cn: "system:kube-proxy", client: true},
		{file: networkPolicyProcessName, cn: networkPolicyUser, client: true},
	}
	for _, n := range nodes {
		reqs = append(reqs,
			certRequest{file: "kubelet-" + n.Name, cn: "system:node:" + n.Name, orgs: []string{"system:nodes"}, client: true},
			certRequest{file: "kubelet-serving-" + n.Name, cn: n.Name, server: true, ips: []string{n.IP}, dns: []string{n.Name}},
		)
	}
	for _, r := range reqs {
		if err := ca.ensureCert(dir, r); err != nil {
			return err
		}
	}
	if err := ensureServiceAccountKey(dir); err != nil {
		return err
	}
	kubeconfigs := map[string]string{
		l.Kubeconfig(): "admin",
		filepath.Join(dir, "controller-manager.kubeconfig"): "controller-manager",
		filepath.Join(dir, "scheduler.kubeconfig"):          "scheduler",
		filepath.Join(dir, "kube-proxy.kubeconfig"):         "kube-proxy",
		l.networkPolicyKubeconfig():                         networkPolicyProcessName,
	}
	for _, n := range nodes {
		kubeconfigs[filepath.Join(dir, "kubelet-"+n.Name+".kubeconfig")] = "kubelet-" + n.Name
	}
	for path, user := range kubeconfigs {
		if err := writeKubeconfig(path, dir, user); err != nil {
			return err
		}
	}
	return nil
}

func loadOrCreateCA(dir string) (*authority, error) {
	certPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if cert, key, err := loadPair(certPath, keyPath); err == nil {
		return &authority{cert: cert, key: key}, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "localcluster-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	if err := writePair(certPath, keyPath, der, key); err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key}, nil
}

func (a *authority) ensureCert(dir string, r certRequest) error {
	certPath, keyPath := filepath.Join(dir, r.file+".crt"), filepath.Join(dir, r.file+".key")
	if _, _, err := loadPair(certPath, keyPath); err == nil {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: r.cn, Organization: r.orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(5, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     r.dns,
	}
	for _, ip := range r.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	if r.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if r.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return fmt.Errorf("failed to sign the %s certificate: %w", r.file, err)
	}
	return writePair(certPath, keyPath, der, key)
}

func ensureServiceAccountKey(dir string) error {
	keyPath, pubPath := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if _, err := os.Stat(pubPath); err == nil {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644)
}

func writeKubeconfig(path, pkiDir, user string) error {
	caData, err := os.ReadFile(filepath.Join(pkiDir, "ca.crt"))
	if err != nil {
		return err
	}
	certData, err := os.ReadFile(filepath.Join(pkiDir, user+".crt"))
	if err != nil {
		return err
	}
	keyData, err := os.ReadFile(filepath.Join(pkiDir, user+".key"))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["localcluster"] = &clientcmdapi.Cluster{Server: APIServerURL(), CertificateAuthorityData: caData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certData, ClientKeyData: keyData}
	cfg.Contexts["localcluster"] = &clientcmdapi.Context{Cluster: "localcluster", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "localcluster"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, path)
}

func loadPair(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("malformed PEM in " + certPath)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func writePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func randomSerial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}
