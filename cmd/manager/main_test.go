package main

import (
	"flag"
	"io"
	"testing"

	"github.com/quorumctl/etcd-operator/internal/setup"
)

func parse(t *testing.T, args ...string) config {
	t.Helper()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, err := parseFlags(fs, args)
	if err != nil {
		t.Fatalf("parseFlags(%q): %v", args, err)
	}
	return c
}

func TestParseFlagsDefaults(t *testing.T) {
	t.Setenv(setup.EnvEtcdImageRepository, "")
	t.Setenv(setup.EnvClusterDomain, "")
	t.Setenv(setup.EnvWatchNamespaces, "")
	c := parse(t)
	if c.metricsAddr != ":8443" || c.metricsCertDir != "" || c.probeAddr != ":8081" || c.leaderElect {
		t.Errorf("unexpected defaults: %+v", c)
	}
	if c.etcdImageRepository != setup.DefaultEtcdImageRepository || c.clusterDomain != "" || c.watchNamespaces != "" {
		t.Errorf("unexpected defaults: %+v", c)
	}
}

func TestParseFlagsEnvFallbackAndOverride(t *testing.T) {
	t.Setenv(setup.EnvEtcdImageRepository, "registry.example/etcd")
	t.Setenv(setup.EnvClusterDomain, "env.local")
	t.Setenv(setup.EnvWatchNamespaces, "a,b")

	c := parse(t)
	if c.etcdImageRepository != "registry.example/etcd" || c.clusterDomain != "env.local" || c.watchNamespaces != "a,b" {
		t.Errorf("environment not used: %+v", c)
	}

	c = parse(t, "--etcd-image-repository=flag.example/etcd", "--cluster-domain=flag.local",
		"--watch-namespaces=c", "--leader-elect")
	if c.etcdImageRepository != "flag.example/etcd" || c.clusterDomain != "flag.local" || c.watchNamespaces != "c" || !c.leaderElect {
		t.Errorf("flags do not override the environment: %+v", c)
	}
}

func TestParseFlagsNetworkPolicy(t *testing.T) {
	t.Setenv(setup.EnvOperatorNamespace, "")
	t.Setenv(setup.EnvOperatorPodLabels, "")
	t.Setenv(setup.EnvMetricsNamespaceSelector, "")
	c := parse(t)
	if c.operatorNamespace != "" || c.operatorPodLabels != "" || c.metricsNamespaces != "" {
		t.Errorf("outside the cluster nothing is known: %+v", c)
	}

	t.Setenv(setup.EnvOperatorNamespace, "etcd-operator-system")
	t.Setenv(setup.EnvOperatorPodLabels, "app.kubernetes.io/name=etcd-operator")
	t.Setenv(setup.EnvMetricsNamespaceSelector, "kubernetes.io/metadata.name=monitoring")
	c = parse(t)
	if c.operatorNamespace != "etcd-operator-system" || c.operatorPodLabels != "app.kubernetes.io/name=etcd-operator" ||
		c.metricsNamespaces != "kubernetes.io/metadata.name=monitoring" {
		t.Errorf("environment not used: %+v", c)
	}
	c = parse(t, "--operator-namespace=ops", "--operator-pod-labels=app=op", "--metrics-namespace-selector=team=obs")
	if c.operatorNamespace != "ops" || c.operatorPodLabels != "app=op" || c.metricsNamespaces != "team=obs" {
		t.Errorf("flags do not override the environment: %+v", c)
	}
}

func TestCredentialsPolicyFlags(t *testing.T) {
	p, err := credentialsPolicy(parse(t))
	if err != nil || p.AllowAmbient || len(p.Buckets) != 0 {
		t.Errorf("by default no ambient credentials: %+v, %v", p, err)
	}
	p, err = credentialsPolicy(parse(t, "--allow-ambient-s3-credentials"))
	if err != nil || !p.AllowAmbient || len(p.Buckets) != 0 {
		t.Errorf("the switch alone allows every bucket: %+v, %v", p, err)
	}
	p, err = credentialsPolicy(parse(t, "--allow-ambient-s3-credentials", "--ambient-s3-buckets=a, b"))
	if err != nil || !p.AllowAmbient || len(p.Buckets) != 2 || p.Buckets[1] != "b" {
		t.Errorf("with an allowlist: %+v, %v", p, err)
	}
	if _, err := credentialsPolicy(parse(t, "--ambient-s3-buckets=a")); err == nil {
		t.Error("an allowlist without the switch is accepted")
	}
}
