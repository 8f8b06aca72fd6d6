package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// selfHeal times, for each fault, the span from injecting it until the
// replacement is Ready and every member serves a key written before the fault.
func selfHeal(ctx context.Context, env *framework.Env, c client.Client, ns string) error {
	type scenario struct {
		name   string
		memory bool
		seed   bool
		fault  func(pod string) error
	}
	wipeInPlace := func(pod string) error {
		if err := env.WipeDataDir(ctx, ns, pod); err != nil {
			return err
		}
		return env.RestartEtcd(ctx, ns, pod)
	}
	corrupt := func(pod string) error {
		if err := env.CorruptDataDir(ctx, ns, pod); err != nil {
			return err
		}
		return env.RestartEtcd(ctx, ns, pod)
	}
	deletePod := func(pod string) error {
		return env.Clientset.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{})
	}
	scenarios := []scenario{
		{name: "1: seed data dir wiped, etcd restarted in place", seed: true, fault: wipeInPlace},
		{name: "3: WAL and database corrupted, etcd restarted", fault: corrupt},
		{name: "4: Memory member's Pod deleted", memory: true, fault: deletePod},
	}
	var results []string
	for i, sc := range scenarios {
		name := fmt.Sprintf("heal-%d", i)
		cl := &v1alpha1.EtcdCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       v1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3)},
		}
		if sc.memory {
			cl.Spec.Storage = v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: ptr.To(resource.MustParse("256Mi"))}
		}
		if err := c.Create(ctx, cl); err != nil {
			return err
		}
		if _, err := framework.WaitForClusterReady(ctx, c, ns, name, 5*time.Minute); err != nil {
			return err
		}
		svc, err := env.ClientServiceEndpoint(ctx, ns, name)
		if err != nil {
			return err
		}
		cli, err := framework.EtcdClient(svc)
		if err != nil {
			return err
		}
		if err := framework.PutKeys(ctx, cli, "sentinel", 1); err != nil {
			return err
		}
		cli.Close()
		var members v1alpha1.EtcdMemberList
		if err := c.List(ctx, &members, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ClusterLabel: name}); err != nil {
			return err
		}
		victim := ""
		for _, m := range members.Items {
			if m.Spec.Bootstrap == sc.seed {
				victim = m.Name
				break
			}
		}
		start := time.Now()
		if err := sc.fault(victim); err != nil {
			return err
		}
		if err := framework.WaitFor(ctx, 5*time.Minute, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: victim}, &v1alpha1.EtcdMember{})
			return client.IgnoreNotFound(err) == nil && err != nil, nil
		}); err != nil {
			return fmt.Errorf("%s: %s was not replaced: %w", sc.name, victim, err)
		}
		if _, err := framework.WaitForClusterReady(ctx, c, ns, name, 5*time.Minute); err != nil {
			return err
		}
		if err := framework.WaitFor(ctx, 2*time.Minute, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
			eps, err := env.MemberEndpoints(ctx, ns, name)
			if err != nil || len(eps) != 3 {
				return false, err
			}
			for _, ep := range eps {
				if err := framework.CheckKeys(ctx, ep, "sentinel", 1); err != nil {
					return false, err
				}
			}
			return true, nil
		}); err != nil {
			return err
		}
		results = append(results, fmt.Sprintf("%-50s %6.1fs", sc.name, time.Since(start).Seconds()))
	}
	fmt.Println("fault -> replacement Ready and the sentinel on all 3 members:")
	for _, r := range results {
		fmt.Println("  " + r)
	}
	return nil
}
