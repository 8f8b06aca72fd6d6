// Command localcluster brings a real single-machine Kubernetes cluster up and
// down for the e2e tests and the quickstart. See test/localcluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/quorumctl/etcd-operator/test/localcluster"
)

const usage = `usage: localcluster <command> [flags]

commands:
  up        bring the cluster up (idempotent); --nodes N (1 to 5; default 1 for a new
            cluster, the running cluster's count otherwise)
  node stop|start|wipe NAME
            node faults: stop is a hard loss of the node (every process of it
            SIGKILLed, its Pod addresses dropped); start brings it back with its
            disk; wipe deletes the volumes of a stopped node
  down      stop it and remove everything it made (idempotent); --purge also drops cached images in containerd
  status    show components and health; exits non-zero when unhealthy
  prepare   install packages, build binaries and images; start nothing
  envtest-assets  print a directory with kube-apiserver, etcd and kubectl for envtest
  prometheus      print a directory with prometheus and promtool (with Kubernetes discovery), building them once
  leftovers list anything of the cluster still on the machine; exits non-zero if any
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	repoRoot := fs.String("repo-root", "", "repository root (default: found from the working directory)")
	nodes := fs.Int("nodes", 0, "number of nodes (up); 0 means 1 for a new cluster, any for a running one")
	purge := fs.Bool("purge", false, "also remove containerd's image store (down)")
	_ = fs.Parse(os.Args[2:])
	// The add-ons are applied with a controller-runtime client, which warns
	// loudly when no logger is set; this tool reports through its own output.
	ctrllog.SetLogger(logr.Discard())

	if err := run(cmd, *repoRoot, *nodes, *purge, fs.Args()); err != nil {
		fmt.Fprintf(os.Stderr, "localcluster %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

func run(cmd, repoRoot string, nodes int, purge bool, args []string) error {
	if repoRoot == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		if repoRoot, err = localcluster.FindRepoRoot(wd); err != nil {
			return err
		}
	}
	layout, err := localcluster.NewLayout(repoRoot)
	if err != nil {
		return err
	}
	progress := localcluster.NewProgress(os.Stdout)
	switch cmd {
	case "supervise":
		return layout.Supervise(context.Background())
	case "up":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return layout.Up(ctx, progress, localcluster.UpOptions{Nodes: nodes})
	case "down":
		return layout.Down(context.Background(), progress, purge)
	case "envtest-assets":
		// Progress goes to stderr so the path alone is on stdout.
		dir, err := layout.EnvtestAssets(context.Background(), localcluster.NewProgress(os.Stderr))
		if err != nil {
			return err
		}
		fmt.Println(dir)
		return nil
	case "prometheus":
		dir, err := layout.PrometheusBinaries(context.Background(), localcluster.NewProgress(os.Stderr))
		if err != nil {
			return err
		}
		fmt.Println(dir)
		return nil
	case "prepare":
		// Everything up does before starting anything: packages, binaries
		// and image tarballs. Used to time a cold start without a second
		// cluster.
		return layout.Prepare(context.Background(), progress)
	case "node":
		if len(args) != 2 {
			return fmt.Errorf("usage: localcluster node stop|start|wipe NAME")
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		action, name := args[0], args[1]
		var err error
		switch action {
		case "stop":
			err = layout.StopNode(ctx, name)
		case "start":
			err = layout.StartNode(ctx, name)
		case "wipe":
			err = layout.WipeNode(ctx, name)
		default:
			return fmt.Errorf("unknown node action %q (stop, start, wipe)", action)
		}
		if err != nil {
			return err
		}
		progress.Printf("node %s: %s done", name, action)
		return nil
	case "status":
		return layout.Status(context.Background(), os.Stdout)
	case "leftovers":
		left := layout.Leftovers(context.Background())
		for _, l := range left {
			fmt.Println(l)
		}
		if len(left) > 0 {
			return fmt.Errorf("%d leftovers", len(left))
		}
		return nil
	default:
		return fmt.Errorf("unknown command %q\n%s", cmd, usage)
	}
}
