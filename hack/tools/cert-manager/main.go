// Command cert-manager-controller runs the part of cert-manager the etcd
// operator's e2e tests need, built from cert-manager's own packages: the
// Certificate controllers (trigger, key manager, request manager, issuing,
// readiness), the CertificateRequest approver and its CA and self-signed
// signers, and the Issuer and ClusterIssuer controllers. Each registers
// itself with pkg/controller when its package is imported.
//
// cert-manager's released controller binary cannot be built from the Go
// module proxy (its cmd/controller is a module whose path does not match
// its directory), so this small main stands in for it. It has no webhook
// (cert-manager's CRDs validate most fields themselves), no leader election
// (one replica), no ACME and no Gateway support.
//
// With --health-addr it serves /readyz, which answers 200 only once every
// informer cache has synced: until then the CRDs are not served or the RBAC
// does not let it list, and nothing would be issued. The local cluster's
// readiness probe, and so its cluster-up, waits on it.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

func main() {
	namespace := flag.String("cluster-resource-namespace", "cert-manager", "namespace of the Secrets ClusterIssuers use")
	workers := flag.Int("workers", 2, "workers per controller")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig; empty means in-cluster")
	list := flag.Bool("list", false, "print the controllers and exit")
	healthAddr := flag.String("health-addr", "", "address to serve /readyz on; empty for none")
	klog.InitFlags(nil)
	flag.Parse()

	names := make([]string, 0, len(controllerpkg.Known()))
	for name := range controllerpkg.Known() {
		names = append(names, name)
	}
	sort.Strings(names)
	if *list {
		for _, n := range names {
			fmt.Println(n)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := klog.NewKlogr()
	ctx = logf.NewContext(logr.NewContext(ctx, log), log)
	if err := run(ctx, names, *kubeconfig, *namespace, *workers, *healthAddr); err != nil {
		log.Error(err, "cert-manager controller stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context, names []string, kubeconfig, namespace string, workers int, healthAddr string) error {
	var ready atomic.Bool
	if healthAddr != "" {
		// Listen before anything else, so a taken port fails the start
		// rather than leaving a controller that never reports ready.
		ln, err := net.Listen("tcp", healthAddr)
		if err != nil {
			return fmt.Errorf("failed to listen on %s: %w", healthAddr, err)
		}
		srv := &http.Server{Handler: readyzHandler(&ready), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer func() { _ = srv.Close() }()
	}
	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions:      controllerpkg.IssuerOptions{ClusterResourceNamespace: namespace},
		// A failed request is retried within seconds, not the hour the
		// release defaults to: a test cluster has no patience to spare.
		CertificateOptions: controllerpkg.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: 5 * time.Second,
			CertificateRequestMaximumBackoffDuration: time.Minute,
		},
	})
	if err != nil {
		return fmt.Errorf("failed to build the controller context: %w", err)
	}
	var controllers []controllerpkg.Interface
	for _, name := range names {
		c, err := controllerpkg.Known()[name](factory)
		if err != nil {
			return fmt.Errorf("failed to construct controller %s: %w", name, err)
		}
		controllers = append(controllers, c)
	}
	// The controllers registered their informers while being built; the
	// shared factories start them now, as cert-manager's own main does.
	shared, err := factory.Build("informers")
	if err != nil {
		return err
	}
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.SharedInformerFactory.Start(ctx.Done())
	go func() {
		kube := shared.KubeSharedInformerFactory.WaitForCacheSync(ctx.Done())
		cm := shared.SharedInformerFactory.WaitForCacheSync(ctx.Done())
		if allSynced(kube) && allSynced(cm) && ctx.Err() == nil {
			ready.Store(true)
			logr.FromContextOrDiscard(ctx).Info("informer caches synced; ready")
		}
	}()
	logr.FromContextOrDiscard(ctx).Info("starting cert-manager controllers", "controllers", names)
	var wg sync.WaitGroup
	errs := make(chan error, len(controllers))
	for i, c := range controllers {
		wg.Go(func() {
			if err := c.Run(workers, ctx); err != nil {
				errs <- fmt.Errorf("controller %s: %w", names[i], err)
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func readyzHandler(ready *atomic.Bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "informer caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	return mux
}

// allSynced reports whether WaitForCacheSync saw every informer sync; it
// returns early with false entries when its stop channel closes.
func allSynced[K comparable](synced map[K]bool) bool {
	for _, ok := range synced {
		if !ok {
			return false
		}
	}
	return true
}
