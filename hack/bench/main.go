// Command bench measures the operator on the local cluster: time from apply
// to Ready for 1 and 3 members, time to scale 3 → 5, and the API writes the
// operator makes while a 3-member cluster sits idle; with -selfheal, the time
// from a fault to a healed cluster; with -nospace, the time from a NOSPACE
// alarm (256 MiB quota) to writable again. It prints what it
// measured; it asserts nothing. Run it with make bench after make cluster-up
// and make deploy.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

func main() {
	idle := flag.Duration("idle", 5*time.Minute, "how long to watch an idle 3-member cluster for API writes")
	heal := flag.Bool("selfheal", false, "time self-heal scenarios instead of bootstrap and scaling")
	roll := flag.Bool("rollout", false, "time rollouts under a writer instead of bootstrap and scaling")
	lost := flag.Int("nodeloss", 0, "with a node-loss bound in seconds, time the replacement of a member whose node is stopped")
	ones := flag.Int("scale-ones", 0, "create this many one-member clusters (and -scale-threes three-member ones) and report the operator's cost")
	threes := flag.Int("scale-threes", 0, "three-member clusters for -scale-ones")
	nospace := flag.Bool("nospace", false, "time NOSPACE alarm -> writable (256 MiB quota) instead")
	runs := flag.Int("runs", 3, "how many times the bench bootstraps and scales, -nospace fills the cluster, or -ca-rotation rotates")
	carot := flag.Bool("ca-rotation", false, "time -runs requested CA rotations of a 3-member TLS cluster under a writer instead")
	starve := flag.Int("starve", 0, "with -scale-ones, also time spec edits with this many three-member clusters out of the operator's reach")
	flag.Parse()
	if err := run(*idle, *heal, *roll, int32(*lost), *ones, *threes, *nospace, *carot, *runs, *starve); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func run(idle time.Duration, heal, roll bool, lost int32, ones, threes int, nospace, carot bool, runs, starve int) error {
	ctx := context.Background()
	env, err := framework.Setup()
	if err != nil {
		return err
	}
	if err := env.CheckOperatorRunning(ctx); err != nil {
		return err
	}
	c, err := env.Client()
	if err != nil {
		return err
	}
	ns := fmt.Sprintf("bench-%d", time.Now().Unix())
	if r := env.Kubectl(ctx, "create", "namespace", ns); r.Err != nil {
		return r.Err
	}
	defer env.Kubectl(ctx, "delete", "namespace", ns, "--wait=false")
	if heal {
		return selfHeal(ctx, env, c, ns)
	}
	if nospace {
		return noSpace(ctx, env, c, ns, runs)
	}
	if roll {
		return rollouts(ctx, env, c, ns)
	}
	if carot {
		return caRotations(ctx, env, c, ns, runs)
	}
	if lost > 0 {
		return nodeLoss(ctx, env, c, ns, lost)
	}
	if ones+threes > 0 {
		return scale(ctx, env, c, ns, ones, threes, idle, starve)
	}

	var oneTimes, threeTimes, scaleTimes []time.Duration
	for i := 1; i <= runs; i++ {
		fmt.Printf("\n=== run %d of %d\n", i, runs)
		one, three, scaled, err := bootstrapAndScale(ctx, env, c, ns, i, i == runs)
		if err != nil {
			return err
		}
		fmt.Printf("run %d: apply -> Ready, 1 member %.1fs; 3 members %.1fs; scale 3 -> 5 -> Ready %.1fs\n",
			i, one.Seconds(), three.Seconds(), scaled.Seconds())
		oneTimes, threeTimes, scaleTimes = append(oneTimes, one), append(threeTimes, three), append(scaleTimes, scaled)
	}
	// Let the last scale-down's stragglers (Events, status) settle first.
	time.Sleep(10 * time.Second)
	from := time.Now()
	fmt.Printf("watching the idle cluster for %s ...\n", idle)
	time.Sleep(idle)
	writes, err := operatorWrites(env.Layout.AuditLog(), ns, from, time.Now())
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Printf("apply -> Ready, 1 member:   %s\n", figures(oneTimes))
	fmt.Printf("apply -> Ready, 3 members:  %s\n", figures(threeTimes))
	fmt.Printf("scale 3 -> 5 -> Ready:      %s\n", figures(scaleTimes))
	fmt.Printf("operator API writes while a 3-member cluster idled %s:\n", idle)
	if len(writes) == 0 {
		fmt.Println("  none")
	}
	keys := make([]string, 0, len(writes))
	for k := range writes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("  %-60s %d\n", k, writes[k])
	}
	return nil
}

// bootstrapAndScale times one run: a 1-member cluster, a 3-member one and
// its scale to 5 (then back to 3), printing the timeline of the 3-member
// bootstrap and of the scale. Unless it is the last run, whose 3-member
// cluster is watched idle afterwards, it deletes both clusters and waits
// for their Pods to go, so runs do not share nodes with the one before.
func bootstrapAndScale(ctx context.Context, env *framework.Env, c client.Client, ns string, run int, last bool) (one, three, scaled time.Duration, err error) {
	oneName, threeName := fmt.Sprintf("one-%d", run), fmt.Sprintf("three-%d", run)
	if one, err = timeToReady(ctx, c, ns, oneName, 1); err != nil {
		return
	}
	start := time.Now()
	tl := watchProgress(ctx, c, ns, threeName, start)
	three, err = timeToReady(ctx, c, ns, threeName, 3)
	tl.finish(ctx, c, ns, threeName, fmt.Sprintf("run %d, apply -> Ready, 3 members", run))
	if err != nil {
		return
	}
	start = time.Now()
	tl = watchProgress(ctx, c, ns, threeName, start)
	if err = setReplicas(ctx, c, ns, threeName, 5); err != nil {
		return
	}
	_, err = framework.WaitForClusterReady(ctx, c, ns, threeName, 10*time.Minute)
	scaled = time.Since(start)
	tl.finish(ctx, c, ns, threeName, fmt.Sprintf("run %d, scale 3 -> 5 -> Ready", run))
	if err != nil {
		return
	}
	if err = setReplicas(ctx, c, ns, threeName, 3); err != nil {
		return
	}
	if _, err = framework.WaitForClusterReady(ctx, c, ns, threeName, 10*time.Minute); err != nil || last {
		return
	}
	for _, n := range []string{oneName, threeName} {
		if err = c.Delete(ctx, &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns}}); err != nil {
			return
		}
	}
	err = framework.WaitFor(ctx, 5*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return len(pods.Items) == 0, nil
	})
	return
}

// figures renders each run's duration and the median.
func figures(ds []time.Duration) string {
	parts := make([]string, 0, len(ds))
	for _, d := range ds {
		parts = append(parts, fmt.Sprintf("%6.1fs", d.Seconds()))
	}
	sorted := append([]time.Duration{}, ds...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	med := 0.0
	if len(sorted) > 0 {
		med = sorted[len(sorted)/2].Seconds()
	}
	return fmt.Sprintf("%s  (median %.1fs)", strings.Join(parts, " "), med)
}

func timeToReady(ctx context.Context, c client.Client, ns, name string, replicas int32) (time.Duration, error) {
	start := time.Now()
	cl := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1alpha1.EtcdClusterSpec{Replicas: ptr.To(replicas)},
	}
	if err := c.Create(ctx, cl); err != nil {
		return 0, err
	}
	if _, err := framework.WaitForClusterReady(ctx, c, ns, name, 10*time.Minute); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func setReplicas(ctx context.Context, c client.Client, ns, name string, replicas int32) error {
	cl := &v1alpha1.EtcdCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cl); err != nil {
		return err
	}
	patch := client.MergeFrom(cl.DeepCopy())
	cl.Spec.Replicas = ptr.To(replicas)
	return c.Patch(ctx, cl, patch)
}

// operatorWrites counts the operator's write requests in the API server's
// audit log between from and to, by verb and resource: those in the bench's
// namespace (other clusters may be busy meanwhile), and leader-election lease
// renewals on their own line, since they are the price of running the
// operator with leader election, not reconciliation.
func operatorWrites(path, ns string, from, to time.Time) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("no audit log (is this the local cluster?): %w", err)
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Stage string `json:"stage"`
			Verb  string `json:"verb"`
			User  struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
				Namespace   string `json:"namespace"`
			} `json:"objectRef"`
			Received time.Time `json:"requestReceivedTimestamp"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage != "ResponseComplete" {
			continue
		}
		if !strings.HasSuffix(ev.User.Username, ":etcd-operator") || ev.Received.Before(from) || ev.Received.After(to) {
			continue
		}
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		switch {
		case res == "leases":
			out["(leader election) "+ev.Verb+" leases"]++
		case ev.ObjectRef.Namespace == ns:
			out[ev.Verb+" "+res]++
		}
	}
	return out, sc.Err()
}
