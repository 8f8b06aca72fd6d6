package localcluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// VersionsFile is the repository-relative path of the single file that pins
// every external part.
const VersionsFile = "versions.env"

// Versions holds the pinned versions the local cluster needs.
type Versions struct {
	Kubernetes           string
	KubernetesStaging    string
	Etcd                 []string
	EtcdDefault          string
	EtcdImageRepository  string
	CoreDNS              string
	LocalPathProvisioner string
	// KubeNetworkPolicies is the sigs.k8s.io/kube-network-policies version
	// whose controller enforces NetworkPolicy.
	KubeNetworkPolicies string
	// Prometheus is the github.com/prometheus/prometheus module version
	// (v0.3MM.P is Prometheus 3.MM.P) the e2e metrics test runs.
	Prometheus string
	// PrometheusOperatorAPIs is the version of the Prometheus Operator's API
	// module whose CRDs the e2e suite checks the chart's monitoring objects
	// against.
	PrometheusOperatorAPIs string
	// CertManager is the github.com/cert-manager/cert-manager module version
	// whose controllers and CRDs the cluster runs; hack/tools/cert-manager's
	// go.mod must require exactly this version.
	CertManager string
}

// LoadVersions reads versions.env from the repository root.
func LoadVersions(repoRoot string) (Versions, error) {
	values, err := readEnvFile(filepath.Join(repoRoot, VersionsFile))
	if err != nil {
		return Versions{}, err
	}
	v := Versions{
		Kubernetes:             values["KUBERNETES_VERSION"],
		KubernetesStaging:      values["KUBERNETES_STAGING_VERSION"],
		Etcd:                   strings.Fields(values["ETCD_VERSIONS"]),
		EtcdDefault:            values["ETCD_DEFAULT_VERSION"],
		EtcdImageRepository:    values["ETCD_IMAGE_REPOSITORY"],
		CoreDNS:                values["COREDNS_VERSION"],
		LocalPathProvisioner:   values["LOCAL_PATH_PROVISIONER_VERSION"],
		KubeNetworkPolicies:    values["KUBE_NETWORK_POLICIES_VERSION"],
		Prometheus:             values["PROMETHEUS_VERSION"],
		PrometheusOperatorAPIs: values["PROMETHEUS_OPERATOR_APIS_VERSION"],
		CertManager:            values[CertManagerVersionKey],
	}
	var missing []string
	for key, val := range map[string]string{
		"KUBERNETES_VERSION":               v.Kubernetes,
		"KUBERNETES_STAGING_VERSION":       v.KubernetesStaging,
		"ETCD_DEFAULT_VERSION":             v.EtcdDefault,
		"ETCD_IMAGE_REPOSITORY":            v.EtcdImageRepository,
		"COREDNS_VERSION":                  v.CoreDNS,
		"LOCAL_PATH_PROVISIONER_VERSION":   v.LocalPathProvisioner,
		"KUBE_NETWORK_POLICIES_VERSION":    v.KubeNetworkPolicies,
		"PROMETHEUS_VERSION":               v.Prometheus,
		"PROMETHEUS_OPERATOR_APIS_VERSION": v.PrometheusOperatorAPIs,
		CertManagerVersionKey:              v.CertManager,
	} {
		if val == "" {
			missing = append(missing, key)
		}
	}
	if len(v.Etcd) == 0 {
		missing = append(missing, "ETCD_VERSIONS")
	}
	if len(missing) > 0 {
		return Versions{}, fmt.Errorf("%s lacks %s", VersionsFile, strings.Join(missing, ", "))
	}
	return v, nil
}

// EtcdImage is the reference the operator uses by default for an etcd version
// such as "v3.6.16"; local images carry exactly this name so nothing is pulled.
func (v Versions) EtcdImage(version string) string {
	return v.EtcdImageRepository + ":v" + strings.TrimPrefix(version, "v")
}

func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("failed to open versions file: %w", err)
	}
	defer f.Close()
	values := map[string]string{}
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: malformed line %q", path, line)
		}
		values[strings.TrimSpace(key)] = strings.TrimSpace(val)
	}
	return values, scanner.Err()
}

// FindRepoRoot walks up from dir to the directory holding versions.env.
func FindRepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, VersionsFile)); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no " + VersionsFile + " found in any parent directory")
		}
		dir = parent
	}
}
