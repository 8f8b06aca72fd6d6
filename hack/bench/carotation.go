package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// caRotations times runs requested CA rotations of a 3-member cluster with
// operator-managed TLS (peer and mutual client) under a writer at 20
// writes/s, from the annotation to the cluster Ready again with the
// rotation finished, and prints the time spent in each pass.
func caRotations(ctx context.Context, env *framework.Env, c client.Client, ns string, runs int) error {
	const name = "carot"
	cl := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3), MemberTemplate: v1alpha1.MemberTemplate{
			Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("256Mi"))},
		}, TLS: &v1alpha1.TLSSpec{}},
	}
	framework.AllowE2EClients(cl)
	if err := c.Create(ctx, cl); err != nil {
		return err
	}
	if _, err := framework.WaitForClusterReady(ctx, c, ns, name, 5*time.Minute); err != nil {
		return err
	}
	follow, err := framework.FollowClientSecret(ctx, c, ns, v1alpha1.AdminClientSecretName(name), framework.ClientServerName(ns, name))
	if err != nil {
		return err
	}
	svc, err := env.ClientServiceEndpoint(ctx, ns, name)
	if err != nil {
		return err
	}
	for run := 1; run <= runs; run++ {
		cli, err := framework.EtcdTLSClient(follow, framework.HTTPS([]string{svc})[0])
		if err != nil {
			return err
		}
		w := startWriter(func(ctx context.Context, k, v string) error { _, err := cli.Put(ctx, k, v); return err },
			cli.Close, "bench/ca-rotation", 50*time.Millisecond, time.Second)
		request := fmt.Sprintf("bench-%d-%d", time.Now().Unix(), run)
		live := &v1alpha1.EtcdCluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, live); err != nil {
			return err
		}
		patch := client.MergeFrom(live.DeepCopy())
		if live.Annotations == nil {
			live.Annotations = map[string]string{}
		}
		live.Annotations[v1alpha1.RotateCAAnnotation] = request
		began := time.Now()
		if err := c.Patch(ctx, live, patch); err != nil {
			return err
		}
		var passes []string
		phase, phaseBegan := "", began
		err = framework.WaitFor(ctx, 15*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
			cur := &v1alpha1.EtcdCluster{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cur); err != nil {
				return false, nil
			}
			st := cur.Status.TLS
			if st == nil || st.Peer == nil || st.Client == nil {
				return false, nil
			}
			if now := st.Peer.Rotation + "/" + st.Client.Rotation; now != phase {
				if phase != "" {
					label := phase
					if label == "/" {
						label = "(requested, not begun)"
					}
					passes = append(passes, fmt.Sprintf("%s %.1fs", label, time.Since(phaseBegan).Seconds()))
				}
				phase, phaseBegan = now, time.Now()
			}
			if st.RotateCARequest != request || st.Peer.Rotation != "" || st.Client.Rotation != "" {
				return false, nil
			}
			_, err := framework.WaitForClusterReady(ctx, c, ns, name, time.Second)
			return err == nil, nil
		})
		if err != nil {
			return fmt.Errorf("rotation %d: %w (passes so far: %s)", run, err, strings.Join(passes, ", "))
		}
		took := time.Since(began)
		res := w.finish()
		fmt.Printf("CA rotation %d: %6.1f s; longest write outage %.2f s; %d of %d writes failed at 20/s; passes: %s\n",
			run, took.Seconds(), res.longest.Seconds(), res.failures, res.writes, strings.Join(passes, ", "))
	}
	return nil
}
