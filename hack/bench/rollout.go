package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// rollouts times two rollouts of a 3-member cluster on volumes under a
// writer at 20 writes/s: a restart of every member for a template change
// (what a patch upgrade does: only one etcd release per minor line is built
// here, so a patch upgrade itself cannot be run), and a minor upgrade.
func rollouts(ctx context.Context, env *framework.Env, c client.Client, ns string) error {
	cl := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "roll", Namespace: ns},
		Spec: v1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3), MemberTemplate: v1alpha1.MemberTemplate{
			Version: "3.6.16", Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("256Mi"))},
		}},
	}
	if err := c.Create(ctx, cl); err != nil {
		return err
	}
	if _, err := framework.WaitForClusterReady(ctx, c, ns, "roll", 5*time.Minute); err != nil {
		return err
	}
	svc, err := env.ClientServiceEndpoint(ctx, ns, "roll")
	if err != nil {
		return err
	}
	steps := []struct {
		what   string
		change func(*v1alpha1.EtcdCluster)
	}{
		{"template change (every member restarted, as for a patch upgrade)", func(c *v1alpha1.EtcdCluster) {
			c.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("150Mi")}}
		}},
		{"minor upgrade 3.6.16 -> 3.7.3", func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.7.3" }},
	}
	for _, step := range steps {
		cli, err := framework.EtcdClient(svc)
		if err != nil {
			return err
		}
		w := startWriter(func(ctx context.Context, k, v string) error { _, err := cli.Put(ctx, k, v); return err },
			cli.Close, "bench/rollout", 50*time.Millisecond, 250*time.Millisecond)
		live := &v1alpha1.EtcdCluster{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "roll"}, live); err != nil {
			return err
		}
		patch := client.MergeFrom(live.DeepCopy())
		step.change(live)
		began := time.Now()
		if err := c.Patch(ctx, live, patch); err != nil {
			return err
		}
		if _, err := framework.WaitForClusterReady(ctx, c, ns, "roll", 10*time.Minute); err != nil {
			return err
		}
		took := time.Since(began)
		res := w.finish()
		fmt.Printf("%-66s rolled in %6.1f s; writes failed for %.1f s in all (%d of %d writes at 20/s)\n",
			step.what, took.Seconds(), res.failing.Seconds(), res.failures, res.writes)
	}
	return nil
}
