package main

import (
	"context"
	"fmt"
	"sync"
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

// writer puts one key every period through the client Service and records
// how long writes kept failing, summed over every failing stretch.
type writer struct {
	mu       sync.Mutex
	failing  time.Duration
	failedAt time.Time
	writes   int
	failures int
	stop     chan struct{}
	done     chan struct{}
}

func startWriter(endpoint string, period time.Duration) (*writer, error) {
	cli, err := framework.EtcdClient(endpoint)
	if err != nil {
		return nil, err
	}
	w := &writer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer cli.Close()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), period*5)
			_, err := cli.Put(ctx, fmt.Sprintf("bench/rollout/%d", i), "v")
			cancel()
			now := time.Now()
			w.mu.Lock()
			w.writes++
			switch {
			case err != nil && w.failedAt.IsZero():
				w.failures++
				w.failedAt = now
			case err != nil:
				w.failures++
			case !w.failedAt.IsZero():
				w.failing += now.Sub(w.failedAt)
				w.failedAt = time.Time{}
			}
			w.mu.Unlock()
		}
	}()
	return w, nil
}

func (w *writer) finish() (writes, failures int, failing time.Duration) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.failedAt.IsZero() {
		w.failing += time.Since(w.failedAt)
	}
	return w.writes, w.failures, w.failing
}

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
		w, err := startWriter(svc, 50*time.Millisecond)
		if err != nil {
			return err
		}
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
		writes, failures, failing := w.finish()
		fmt.Printf("%-66s rolled in %6.1f s; writes failed for %.1f s in all (%d of %d writes at 20/s)\n",
			step.what, took.Seconds(), failing.Seconds(), failures, writes)
	}
	return nil
}
