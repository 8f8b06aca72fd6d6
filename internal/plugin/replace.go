package plugin

import (
	"context"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

const etcdMemberResource = "etcdmembers.etcd.quorumctl.io"

// DefaultReplaceTimeout bounds --wait: a replacement joins as a learner,
// catches up and is promoted, which takes seconds for a small database and
// minutes for a large one.
const DefaultReplaceTimeout = 10 * time.Minute

// runReplaceMember asks the operator to replace one member by deleting its
// EtcdMember, which is what `kubectl delete etcdmember` does too. The
// operator's finalizer removes it from etcd only once the voters that remain
// keep a quorum, and the cluster controller adds a fresh member from the
// cluster's spec. The command refuses what the operator would only hold: a
// member of a paused cluster, or one already on its way out.
func runReplaceMember(ctx context.Context, env *Env, w io.Writer, name string, waitFor bool, timeout time.Duration) error {
	m := &v1alpha1.EtcdMember{}
	if err := env.Kube.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: name}, m); err != nil {
		if apierrors.IsNotFound(err) {
			return &plainError{msg: fmt.Sprintf("EtcdMember %s not found in namespace %s (kubectl get etcdmembers lists them)", name, env.Namespace), err: err}
		}
		return access{verb: "get", resource: etcdMemberResource, namespace: env.Namespace, what: "EtcdMember " + name}.explain(err)
	}
	if !m.DeletionTimestamp.IsZero() {
		return fmt.Errorf("EtcdMember %s is already being removed; the operator replaces it once the quorum allows", name)
	}
	c, err := env.getCluster(ctx, m.Spec.ClusterName)
	if err != nil {
		return err
	}
	if c.DesiredReplicas() == 0 || m.Spec.Dormant {
		return fmt.Errorf("EtcdCluster %s is paused (replicas: 0); its last member holds the data and is not replaced", c.Name)
	}
	if err := env.Kube.Delete(ctx, m, client.Preconditions{UID: &m.UID}); err != nil && !apierrors.IsNotFound(err) {
		return access{verb: "delete", resource: etcdMemberResource, namespace: env.Namespace, what: "EtcdMember " + name}.explain(err)
	}
	if _, err := fmt.Fprintf(w, "Replacing member %s of EtcdCluster %s/%s: the operator removes it from etcd once the other voters keep a quorum, then adds a new member.\n",
		name, c.Namespace, c.Name); err != nil {
		return err
	}
	if !waitFor {
		return nil
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		return replaced(ctx, env, c.Name, name)
	})
	if err != nil {
		return fmt.Errorf("member %s of EtcdCluster %s was not replaced within %s (kubectl describe etcdcluster %s says why): %w",
			name, c.Name, timeout, c.Name, err)
	}
	_, err = fmt.Fprintf(w, "Member %s is replaced and EtcdCluster %s is Ready.\n", name, c.Name)
	return err
}

// replaced: the member is gone and the cluster is Ready without it.
func replaced(ctx context.Context, env *Env, cluster, member string) (bool, error) {
	err := env.Kube.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: member}, &v1alpha1.EtcdMember{})
	switch {
	case err == nil:
		return false, nil
	case !apierrors.IsNotFound(err):
		return false, err
	}
	c, err := env.getCluster(ctx, cluster)
	if err != nil {
		return false, err
	}
	ready := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ReadyCondition)
	if ready == nil || ready.Status != "True" || ready.ObservedGeneration != c.Generation {
		return false, nil
	}
	for _, s := range c.Status.Members {
		if s.Name == member {
			return false, nil
		}
	}
	return true, nil
}
