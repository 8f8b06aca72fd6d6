package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// scale creates ones one-member and threes three-member clusters on Memory,
// and reports the time until all are Ready, the operator's memory and CPU
// idle before and after, how both grow per cluster, the latency from a spec
// edit to the operator's first action on it, and the operator's API writes
// per idle cluster-minute. With starve, the edit latency is also taken
// with that many clusters out of the operator's reach (starvedLatency).
func scale(ctx context.Context, env *framework.Env, c client.Client, ns string, ones, threes int, idle time.Duration, starve int) error {
	before, err := operatorUsage(ctx, env, 30*time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("operator, no clusters of the bench: %s\n", before)
	small := corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("48Mi"),
	}}
	var names []string
	began := time.Now()
	for i := 0; i < ones+threes; i++ {
		replicas, name := int32(1), fmt.Sprintf("one-%03d", i)
		if i >= ones {
			replicas, name = 3, fmt.Sprintf("three-%03d", i-ones)
		}
		cl := &v1alpha1.EtcdCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1alpha1.EtcdClusterSpec{Replicas: ptr.To(replicas), MemberTemplate: v1alpha1.MemberTemplate{
				Storage:   v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: ptr.To(resource.MustParse("256Mi"))},
				Resources: small.DeepCopy(),
			}},
		}
		if err := c.Create(ctx, cl); err != nil {
			return err
		}
		names = append(names, name)
	}
	for _, name := range names {
		if _, err := framework.WaitForClusterReady(ctx, c, ns, name, 30*time.Minute); err != nil {
			return fmt.Errorf("cluster %s: %w", name, err)
		}
	}
	fmt.Printf("%d one-member and %d three-member clusters: all Ready %.1f s after the first was created\n",
		ones, threes, time.Since(began).Seconds())

	from := time.Now()
	after, err := operatorUsage(ctx, env, idle)
	if err != nil {
		return err
	}
	writes, err := operatorWrites(env.Layout.AuditLog(), ns, from, time.Now())
	if err != nil {
		return err
	}
	total := 0
	for k, n := range writes {
		if !strings.HasPrefix(k, "leases") {
			total += n
		}
	}
	n := ones + threes
	fmt.Printf("operator, idle with the %d clusters: %s\n", n, after)
	fmt.Printf("growth per cluster: %.2f MiB RSS, %.4f CPU cores\n",
		(after.rssMiB-before.rssMiB)/float64(n), (after.cores-before.cores)/float64(n))
	fmt.Printf("API writes while idle (leader election apart): %d over %s, %.3f per cluster-minute\n",
		total, idle.Round(time.Second), float64(total)/float64(n)/idle.Minutes())

	sample := names[:min(ones, 30)]
	if starve > 0 {
		half := len(sample) / 2
		return starvedLatency(ctx, env, c, ns, sample[:half], sample[half:], starve)
	}
	p50, p99, err := editLatency(ctx, env, c, ns, sample)
	if err != nil {
		return err
	}
	fmt.Printf("spec edit -> first action (a new EtcdMember), %d clusters: p50 %.0f ms, p99 %.0f ms\n", len(sample), ms(p50), ms(p99))
	return nil
}

type usage struct {
	rssMiB, cores float64
}

func (u usage) String() string {
	return fmt.Sprintf("RSS %.1f MiB, CPU %.3f cores (the busier replica)", u.rssMiB, u.cores)
}

// operatorUsage samples the operator replicas' own metrics over window and
// returns the replica using most: the leader, which is the one reconciling.
func operatorUsage(ctx context.Context, env *framework.Env, window time.Duration) (usage, error) {
	pods, err := env.Clientset.CoreV1().Pods(framework.OperatorNamespace()).List(ctx, metav1.ListOptions{LabelSelector: framework.OperatorSelector})
	if err != nil {
		return usage{}, err
	}
	// The metrics endpoint needs a token the chart's metrics-reader role
	// authorizes.
	token, unbind, err := env.ServiceAccountToken(ctx, framework.OperatorNamespace(), "bench-metrics-reader", framework.MetricsReaderRole)
	if err != nil {
		return usage{}, err
	}
	defer unbind()
	type sample struct{ rss, cpu float64 }
	read := func(ip string) (sample, error) {
		code, body, err := framework.OperatorMetrics(ctx, ip, token)
		if err != nil {
			return sample{}, err
		}
		if code != http.StatusOK {
			return sample{}, fmt.Errorf("GET /metrics of %s: HTTP %d", ip, code)
		}
		var s sample
		sc := bufio.NewScanner(bytes.NewReader(body))
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) != 2 {
				continue
			}
			v, _ := strconv.ParseFloat(fields[1], 64)
			switch fields[0] {
			case "process_resident_memory_bytes":
				s.rss = v
			case "process_cpu_seconds_total":
				s.cpu = v
			}
		}
		return s, sc.Err()
	}
	first := map[string]sample{}
	for _, p := range pods.Items {
		s, err := read(p.Status.PodIP)
		if err != nil {
			return usage{}, err
		}
		first[p.Status.PodIP] = s
	}
	time.Sleep(window)
	var best usage
	for ip, s0 := range first {
		s1, err := read(ip)
		if err != nil {
			return usage{}, err
		}
		u := usage{rssMiB: s1.rss / (1 << 20), cores: (s1.cpu - s0.cpu) / window.Seconds()}
		if u.cores > best.cores || best.rssMiB == 0 {
			best = u
		}
	}
	return best, nil
}

// editLatency scales each cluster 1 -> 2 and times, from the patch to the
// watch event of the EtcdMember the operator creates for it.
func editLatency(ctx context.Context, env *framework.Env, c client.Client, ns string, names []string) (time.Duration, time.Duration, error) {
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: c.Scheme()})
	if err != nil {
		return 0, 0, err
	}
	w, err := wc.Watch(ctx, &v1alpha1.EtcdMemberList{}, client.InNamespace(ns))
	if err != nil {
		return 0, 0, err
	}
	defer w.Stop()
	var mu sync.Mutex
	patched := map[string]time.Time{}
	var lat []time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added {
				continue
			}
			m, ok := ev.Object.(*v1alpha1.EtcdMember)
			if !ok {
				continue
			}
			cluster := m.Spec.ClusterName
			mu.Lock()
			if t, ok := patched[cluster]; ok {
				lat = append(lat, time.Since(t))
				delete(patched, cluster)
			}
			stop := len(lat) == len(names)
			mu.Unlock()
			if stop {
				return
			}
		}
	}()
	for _, name := range names {
		mu.Lock()
		patched[name] = time.Now()
		mu.Unlock()
		if err := setReplicas(ctx, c, ns, name, 2); err != nil {
			return 0, 0, err
		}
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		return 0, 0, fmt.Errorf("saw %d of %d first actions", len(lat), len(names))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2], lat[(len(lat)*99)/100], nil
}
