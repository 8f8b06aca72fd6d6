// Command chaos runs the long chaos schedule (make chaos) against the local
// cluster with the operator installed, prints the report and writes it as
// JSON. It exits non-zero unless the run passed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/test/chaos"
	"github.com/quorumctl/etcd-operator/test/chaos/runner"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	duration := flag.Duration("duration", 30*time.Minute, "how long faults are started for")
	minFaults := flag.Int("min-faults", 100, "keep going past the duration until this many faults were injected")
	artifacts := flag.String("artifacts", "", "where the report, histories and dumps go (default .cache/artifacts/chaos/<seed>)")
	skip := flag.String("skip", "", "comma-separated fault kinds to leave out")
	selfTest := flag.Bool("self-test", true, "first plant a stale read on a live member and require the checker to catch it")
	flag.Parse()
	var skipped []chaos.Kind
	if *skip != "" {
		k, err := chaos.ParseKinds(*skip)
		if err != nil {
			return err
		}
		skipped = k
	}
	seed, err := runner.SeedFromEnv()
	if err != nil {
		return err
	}
	env, err := framework.Setup()
	if err != nil {
		return err
	}
	defer env.Close()
	if *artifacts == "" {
		*artifacts = filepath.Join(env.RepoRoot, ".cache", "artifacts", "chaos", strconv.FormatUint(seed, 10))
	}
	ctx := context.Background()
	if err := env.CheckOperatorRunning(ctx); err != nil {
		return err
	}
	ns, err := env.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "chaos-",
		Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted",
			"pod-security.kubernetes.io/warn":    "restricted",
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("failed to create the run's namespace: %w", err)
	}
	defer func() {
		_ = env.Clientset.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	}()
	cfg := runner.LongConfig(seed, ns.Name, *artifacts, *duration, *minFaults).Without(skipped)
	cfg.SelfTest = *selfTest
	cfg.PlantInRun = runner.PlantInRunFromEnv()
	cfg.Logf = func(format string, args ...any) {
		fmt.Printf("%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
	}
	// A run longer than its duration by more than this has hung.
	ctx, cancel := context.WithTimeout(ctx, *duration+45*time.Minute)
	defer cancel()
	rep, err := runner.Run(ctx, env, cfg)
	if rep != nil {
		fmt.Print(rep.Table())
		fmt.Printf("report: %s\n", filepath.Join(*artifacts, "report.json"))
	}
	if err != nil {
		return fmt.Errorf("seed %d: %w", seed, err)
	}
	if !rep.Passed() {
		return fmt.Errorf("seed %d: the run failed", seed)
	}
	if rep.FaultsTotal < *minFaults {
		return fmt.Errorf("seed %d: only %d faults, want %d", seed, rep.FaultsTotal, *minFaults)
	}
	return nil
}
