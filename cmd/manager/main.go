// Command manager runs the etcd operator: it builds the scheme and the
// controller manager, registers the controllers and serves health and
// metrics endpoints until it is told to stop.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	// The operator image is the manager binary alone, with no CA
	// certificates on disk; the snapshot Jobs reach S3 over HTTPS with
	// these roots when the system has none.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/agent"
	"github.com/quorumctl/etcd-operator/internal/component/netpol"
	"github.com/quorumctl/etcd-operator/internal/controller"
	"github.com/quorumctl/etcd-operator/internal/controller/etcdcluster"
	"github.com/quorumctl/etcd-operator/internal/setup"
)

// registerControllers adds the operator's controllers to the manager.
func registerControllers(mgr manager.Manager, o setup.ControllerOptions, np etcdcluster.NetworkPolicyOptions, creds backup.CredentialsPolicy) error {
	return controller.Setup(mgr, controller.Options{
		EtcdImageRepository:     o.EtcdImageRepository,
		ClusterDomain:           o.ClusterDomain,
		MaxConcurrentReconciles: o.MaxConcurrentReconciles,
		OperatorImage:           o.OperatorImage,
		NetworkPolicy:           np,
		Credentials:             creds,
	})
}

type config struct {
	metricsAddr         string
	metricsCertDir      string
	probeAddr           string
	leaderElect         bool
	etcdImageRepository string
	clusterDomain       string
	watchNamespaces     string
	operatorImage       string
	workers             int
	operatorNamespace   string
	operatorPodLabels   string
	metricsNamespaces   string
	allowAmbientS3      bool
	ambientS3Buckets    string
	zap                 zap.Options
}

func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	var c config
	fs.StringVar(&c.metricsAddr, "metrics-bind-address", setup.DefaultMetricsBindAddress,
		"Address the metrics endpoint binds to; 0 disables it. It serves HTTPS to callers the API server "+
			"authenticates and authorizes for get on /metrics.")
	fs.StringVar(&c.metricsCertDir, "metrics-cert-dir", "",
		"Directory holding tls.crt and tls.key for the metrics endpoint; empty or without them, "+
			"a self-signed certificate is made at start.")
	fs.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081",
		"Address the /healthz and /readyz endpoints bind to.")
	fs.BoolVar(&c.leaderElect, "leader-elect", false,
		"Elect a leader so only one manager replica reconciles at a time.")
	fs.StringVar(&c.etcdImageRepository, "etcd-image-repository",
		setup.EnvOr(setup.EnvEtcdImageRepository, setup.DefaultEtcdImageRepository),
		"Repository of the etcd images; the tag is the cluster's etcd version (env "+setup.EnvEtcdImageRepository+").")
	fs.StringVar(&c.clusterDomain, "cluster-domain", setup.EnvOr(setup.EnvClusterDomain, ""),
		"DNS domain of the cluster; empty detects it from "+setup.ResolvConfPath+", falling back to "+
			setup.DefaultClusterDomain+" (env "+setup.EnvClusterDomain+").")
	fs.StringVar(&c.operatorImage, "operator-image", setup.EnvOr(setup.EnvOperatorImage, ""),
		"The operator's own image, for helper jobs (env "+setup.EnvOperatorImage+").")
	fs.IntVar(&c.workers, "max-concurrent-reconciles", 4,
		"How many EtcdClusters, and how many EtcdMembers, are reconciled at once.")
	fs.StringVar(&c.watchNamespaces, "watch-namespaces", setup.EnvOr(setup.EnvWatchNamespaces, ""),
		"Comma separated namespaces to watch; empty watches all (env "+setup.EnvWatchNamespaces+").")
	fs.StringVar(&c.operatorNamespace, "operator-namespace", setup.EnvOr(setup.EnvOperatorNamespace, ""),
		"Namespace the operator's Pods run in, admitted by every cluster's NetworkPolicy; empty when the operator runs "+
			"outside the cluster (env "+setup.EnvOperatorNamespace+").")
	fs.StringVar(&c.operatorPodLabels, "operator-pod-labels", setup.EnvOr(setup.EnvOperatorPodLabels, ""),
		"Labels (key=value,...) of the operator's Pods in --operator-namespace; empty admits every Pod there (env "+
			setup.EnvOperatorPodLabels+").")
	fs.StringVar(&c.metricsNamespaces, "metrics-namespace-selector", setup.EnvOr(setup.EnvMetricsNamespaceSelector, ""),
		"Label selector of the namespaces every cluster's NetworkPolicy admits on the metrics port (2381), such as "+
			"kubernetes.io/metadata.name=monitoring; empty admits none (env "+setup.EnvMetricsNamespaceSelector+").")
	fs.BoolVar(&c.allowAmbientS3, backup.AllowAmbientFlag, false,
		"Let snapshot, prune and restore Pods whose S3 destination names no credentials Secret use ambient credentials "+
			"(the SDK's default chain: the node's instance role, a web identity). They are the platform's, not the tenant's "+
			"who names the bucket, so off refuses such destinations with AmbientCredentialsRefused.")
	fs.StringVar(&c.ambientS3Buckets, backup.AmbientBucketsFlag, "",
		"Comma separated buckets that ambient credentials may be used for, with --"+backup.AllowAmbientFlag+"; empty allows any.")
	c.zap.BindFlags(fs)
	return c, fs.Parse(args)
}

func main() {
	// The same binary runs inside the snapshot and restore Pods.
	if len(os.Args) > 1 && agent.Commands[os.Args[1]] {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		code := agent.Main(ctx, os.Args[1:], agent.Env{Stdout: os.Stdout, Stderr: os.Stderr})
		stop()
		os.Exit(code)
	}
	c, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&c.zap)))
	if err := run(c); err != nil {
		ctrl.Log.WithName("setup").Error(err, "manager exited")
		os.Exit(1)
	}
}

// networkPolicyOptions finds out whether the operator may watch
// NetworkPolicies before any controller starts: a watch it may not open
// would keep the manager from starting at all.
func networkPolicyOptions(mgr manager.Manager, namespaces []string, sources netpol.Sources) (etcdcluster.NetworkPolicyOptions, error) {
	ctx, cancel := context.WithTimeout(context.Background(), permissionCheckTimeout)
	defer cancel()
	gr := networkingv1.SchemeGroupVersion.WithResource("networkpolicies").GroupResource()
	allowed, denied, err := setup.MayWatch(ctx, mgr.GetClient(), gr, namespaces)
	if err != nil {
		return etcdcluster.NetworkPolicyOptions{}, err
	}
	if !allowed {
		ctrl.Log.WithName("setup").Info("The operator may not watch NetworkPolicies and keeps none; clusters that want one report "+
			"NetworkPolicyNotPermitted until it is granted and the operator restarted", "denied", denied)
	}
	return etcdcluster.NetworkPolicyOptions{Permitted: allowed, Sources: sources}, nil
}

// credentialsPolicy reads the ambient credentials flags. An allowlist
// without the switch is refused rather than ignored: whoever wrote it meant
// something, and the operator would otherwise refuse what they expect it to
// allow, or the reverse after a later edit.
func credentialsPolicy(c config) (backup.CredentialsPolicy, error) {
	p := backup.CredentialsPolicy{AllowAmbient: c.allowAmbientS3, Buckets: backup.ParseBuckets(c.ambientS3Buckets)}
	if len(p.Buckets) > 0 && !p.AllowAmbient {
		return backup.CredentialsPolicy{}, fmt.Errorf("--%s is set but --%s is not; set both, or neither",
			backup.AmbientBucketsFlag, backup.AllowAmbientFlag)
	}
	return p, nil
}

// permissionCheckTimeout bounds the questions asked at start.
const permissionCheckTimeout = 30 * time.Second

func run(c config) error {
	log := ctrl.Log.WithName("setup")

	opts := setup.ControllerOptions{
		EtcdImageRepository:     c.etcdImageRepository,
		ClusterDomain:           setup.ResolveClusterDomain(c.clusterDomain, setup.ResolvConfPath),
		OperatorImage:           c.operatorImage,
		MaxConcurrentReconciles: c.workers,
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	namespaces := setup.ParseNamespaces(c.watchNamespaces)
	sources, err := setup.NetworkPolicySources(c.operatorNamespace, c.operatorPodLabels, c.metricsNamespaces)
	if err != nil {
		return err
	}

	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("no Kubernetes client configuration: %w", err)
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                        setup.NewScheme(),
		Cache:                         setup.CacheOptions(namespaces),
		Metrics:                       setup.MetricsServerOptions(c.metricsAddr, c.metricsCertDir),
		HealthProbeBindAddress:        c.probeAddr,
		LeaderElection:                c.leaderElect,
		LeaderElectionID:              setup.LeaderElectionID,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("failed to create the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("failed to add the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("failed to add the readiness check: %w", err)
	}
	np, err := networkPolicyOptions(mgr, namespaces, sources)
	if err != nil {
		return err
	}
	creds, err := credentialsPolicy(c)
	if err != nil {
		return err
	}
	if err := registerControllers(mgr, opts, np, creds); err != nil {
		return fmt.Errorf("failed to register the controllers: %w", err)
	}

	log.Info("starting manager",
		"etcdImageRepository", opts.EtcdImageRepository,
		"clusterDomain", opts.ClusterDomain,
		"watchNamespaces", namespaces,
		"leaderElection", c.leaderElect,
		"operatorNamespace", sources.OperatorNamespace,
		"networkPolicies", np.Permitted,
		"ambientS3Credentials", creds.AllowAmbient,
		"ambientS3Buckets", creds.Buckets)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("manager stopped with an error: %w", err)
	}
	return nil
}
