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

// nodeLoss times, for a 3-member cluster on volumes, the span from stopping
// the node of a member that is not the seed until the cluster is Ready with
// three voters again, none on the lost node, and when the node turned
// NotReady and when the member was replaced within that span.
func nodeLoss(ctx context.Context, env *framework.Env, c client.Client, ns string, bound int32) error {
	cl := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "nodeloss", Namespace: ns},
		Spec: v1alpha1.EtcdClusterSpec{
			Replicas:       ptr.To[int32](3),
			SelfHeal:       v1alpha1.SelfHealSpec{NodeLostAfterSeconds: ptr.To(bound)},
			MemberTemplate: v1alpha1.MemberTemplate{Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("256Mi"))}},
		},
	}
	if err := c.Create(ctx, cl); err != nil {
		return err
	}
	if _, err := framework.WaitForClusterReady(ctx, c, ns, "nodeloss", 5*time.Minute); err != nil {
		return err
	}
	var members v1alpha1.EtcdMemberList
	if err := c.List(ctx, &members, client.InNamespace(ns)); err != nil {
		return err
	}
	var victim, node string
	for _, m := range members.Items {
		if !m.Spec.Bootstrap {
			p, err := env.Clientset.CoreV1().Pods(ns).Get(ctx, m.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			victim, node = m.Name, p.Spec.NodeName
			break
		}
	}
	began := time.Now()
	if err := env.Layout.StopNode(ctx, node); err != nil {
		return err
	}
	defer func() {
		if err := env.StartNode(context.Background(), node); err != nil {
			fmt.Printf("failed to start %s again: %v\n", node, err)
		}
	}()
	if err := env.WaitForNodeReady(ctx, node, false, 3*time.Minute); err != nil {
		return err
	}
	notReady := time.Since(began)
	if err := framework.WaitFor(ctx, 5*time.Minute, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: victim}, &v1alpha1.EtcdMember{})
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	}); err != nil {
		return err
	}
	replaced := time.Since(began)
	if _, err := framework.WaitForClusterReady(ctx, c, ns, "nodeloss", 5*time.Minute); err != nil {
		return err
	}
	ready := time.Since(began)
	fmt.Printf("node loss (bound %ds): %s NotReady after %.1f s, member %s removed after %.1f s, Ready with 3 voters after %.1f s (%.1f s past the bound, counted from node stop; goal 20 s)\n",
		bound, node, notReady.Seconds(), victim, replaced.Seconds(), ready.Seconds(), ready.Seconds()-float64(bound))
	return nil
}
