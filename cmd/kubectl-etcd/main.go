// Command kubectl-etcd is a kubectl plugin for the etcd clusters run by the
// etcd operator: installed on PATH, it runs as "kubectl etcd". See package
// internal/plugin for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/quorumctl/etcd-operator/internal/plugin"
)

func main() {
	// controller-runtime complains on stderr when its logger is never set;
	// the plugin reports its errors itself.
	ctrllog.SetLogger(logr.Discard())
	// Cancelling on Ctrl-C lets the commands close their port-forwards and
	// stop between defragmentations instead of dying mid-way.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	app := &plugin.App{Out: os.Stdout, Err: os.Stderr, NewEnv: plugin.NewEnv}
	code := app.Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
