package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
	"github.com/quorumctl/etcd-operator/test/etcdload"
)

// noSpaceQuota is the backend quota the benchmark fills: 256 MiB.
const noSpaceQuota = 256 << 20

// noSpace times, runs times on one 3-member cluster with a 256 MiB quota,
// the span from etcd refusing a write with NOSPACE (a third of what was
// written deleted, not compacted) until a write goes through again, with
// nothing but the operator acting in between. Each run first deletes the
// keys the last one left, so that every run starts from the same share of
// live data.
func noSpace(ctx context.Context, env *framework.Env, c client.Client, ns string, runs int) error {
	const name = "nospace"
	cl := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3), MemberTemplate: v1alpha1.MemberTemplate{
			Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("1Gi"))},
			Options: &v1alpha1.EtcdOptions{QuotaBackendBytes: ptr.To[int64](noSpaceQuota)},
		}},
	}
	if err := c.Create(ctx, cl); err != nil {
		return err
	}
	if _, err := framework.WaitForClusterReady(ctx, c, ns, name, 10*time.Minute); err != nil {
		return err
	}
	eps, err := env.MemberEndpoints(ctx, ns, name)
	if err != nil {
		return err
	}
	cli, err := etcdload.Dial(eps...)
	if err != nil {
		return err
	}
	defer cli.Close()
	var took []time.Duration
	var last *etcdload.Set
	for i := range runs {
		if last != nil {
			if err := etcdload.Delete(ctx, cli, *last); err != nil {
				return fmt.Errorf("failed to delete the keys of run %d: %w", i, err)
			}
		}
		filled := time.Now()
		live, err := etcdload.Fill(ctx, cli, fmt.Sprintf("bench/%d", i), 128<<10, 3)
		if err != nil {
			return err
		}
		raised := time.Now()
		fmt.Printf("run %d: filled in %s; NOSPACE after %d live keys of 128 KiB\n", i+1, raised.Sub(filled).Round(time.Second), live.Count)
		if _, err := etcdload.WaitWritable(ctx, cli, fmt.Sprintf("bench/%d/after", i), 100*time.Millisecond); err != nil {
			return err
		}
		d := time.Since(raised)
		took = append(took, d)
		if err := etcdload.Verify(ctx, cli, live); err != nil {
			return fmt.Errorf("run %d lost data: %w", i+1, err)
		}
		fmt.Printf("run %d: NOSPACE -> writable %6.1fs, every live key intact\n", i+1, d.Seconds())
		last = &live
	}
	slices.Sort(took)
	fmt.Printf("\nNOSPACE -> writable, 256 MiB quota, %d runs: min %.1fs, median %.1fs, max %.1fs (goal: at most 30s)\n",
		len(took), took[0].Seconds(), took[len(took)/2].Seconds(), took[len(took)-1].Seconds())
	return nil
}
