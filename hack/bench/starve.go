package main

import (
	"context"
	"fmt"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/unreachable"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// starvedLatency times spec edit -> first action on healthy, once on
// base alone and once on edited while n three-member clusters in another
// namespace are out of the operator's reach: their own NetworkPolicy is
// off and a drop-all one admits nothing, so every look at them times out.
// The workers are shared, and the second figure says how much the
// clusters out of reach slow the others down (issue 29: within 2x).
func starvedLatency(ctx context.Context, env *framework.Env, c client.Client, ns string, base, edited []string, n int) error {
	p50, p99, err := editLatency(ctx, env, c, ns, base)
	if err != nil {
		return err
	}
	fmt.Printf("spec edit -> first action (a new EtcdMember), %d clusters: p50 %.0f ms, p99 %.0f ms\n", len(base), ms(p50), ms(p99))

	dark := ns + "-unreachable"
	if r := env.Kubectl(ctx, "create", "namespace", dark); r.Err != nil {
		return r.Err
	}
	defer env.Kubectl(ctx, "delete", "namespace", dark, "--wait=false")
	small := corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("48Mi"),
	}}
	var names []string
	for i := range n {
		name := fmt.Sprintf("dark-%d", i)
		cl := &v1alpha1.EtcdCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: dark},
			Spec: v1alpha1.EtcdClusterSpec{Replicas: ptr.To(int32(3)),
				NetworkPolicy: v1alpha1.NetworkPolicySpec{Enabled: ptr.To(false)},
				MemberTemplate: v1alpha1.MemberTemplate{
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
		if _, err := framework.WaitForClusterReady(ctx, c, dark, name, 10*time.Minute); err != nil {
			return fmt.Errorf("cluster %s/%s: %w", dark, name, err)
		}
	}
	dropAll := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "drop-all", Namespace: dark},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	if err := c.Create(ctx, dropAll); err != nil {
		return err
	}
	// Timed once the operator has backed off to its longest wait on each
	// (30 s, shortened by up to a quarter per cluster), which it reaches
	// about a minute after it first finds one silent: the figure is the
	// steady state of clusters that stay out of reach.
	began := time.Now()
	waits := regexp.MustCompile(`asking again in ([0-9.]+s),`)
	for _, name := range names {
		err := framework.WaitFor(ctx, 5*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
			cl := &v1alpha1.EtcdCluster{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: dark, Name: name}, cl); err != nil {
				return false, err
			}
			cond := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.AvailableCondition)
			if cond == nil || cond.Reason != v1alpha1.EtcdUnreachableReason {
				return false, nil
			}
			m := waits.FindStringSubmatch(cond.Message)
			if m == nil {
				return false, nil
			}
			d, err := time.ParseDuration(m[1])
			return err == nil && d >= unreachable.Max*3/4, nil
		})
		if err != nil {
			return fmt.Errorf("cluster %s/%s behind the drop-all policy, not reported as backed off: %w", dark, name, err)
		}
	}
	fmt.Printf("%d three-member clusters in %s out of the operator's reach, each backed off to its longest wait %.0f s after the policy\n",
		n, dark, time.Since(began).Seconds())
	s50, s99, err := editLatency(ctx, env, c, ns, edited)
	if err != nil {
		return err
	}
	fmt.Printf("spec edit -> first action, %d other clusters, with %d out of reach: p50 %.0f ms, p99 %.0f ms (%.2fx and %.2fx without; goal at most 2x)\n",
		len(edited), n, ms(s50), ms(s99), ratio(s50, p50), ratio(s99, p99))
	return nil
}

func ms(d time.Duration) float64 { return d.Seconds() * 1000 }

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}
