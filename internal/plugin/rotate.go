package plugin

import (
	"context"
	"fmt"
	"io"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// runRotateCA asks the operator to rotate the cluster's CAs by setting the
// rotate-ca annotation to a value of its own (the time), which the operator
// acts on once (design 0020). It refuses a cluster without operator-managed
// CAs, whose annotation the operator would ignore.
func runRotateCA(ctx context.Context, env *Env, w io.Writer, name string, now time.Time) error {
	c, err := env.getCluster(ctx, name)
	if err != nil {
		return err
	}
	t := c.Spec.TLS
	if t == nil || (t.PeerSource() != v1alpha1.CertificateSourceOperatorManaged &&
		t.ClientSource() != v1alpha1.CertificateSourceOperatorManaged && !t.Client.IsMutual()) {
		return fmt.Errorf("EtcdCluster %s has no CA the operator keeps: without spec.tls, or with every side from a Secret or cert-manager, rotate the CA at its source", name)
	}
	request := now.UTC().Format(time.RFC3339)
	patch := client.MergeFrom(c.DeepCopy())
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[v1alpha1.RotateCAAnnotation] = request
	if err := env.Kube.Patch(ctx, c, patch); err != nil {
		return access{verb: "patch", resource: etcdClusterResource, namespace: env.Namespace, what: "EtcdCluster " + name}.explain(err)
	}
	_, err = fmt.Fprintf(w, "Asked the operator to rotate the CAs of EtcdCluster %s/%s (%s=%s).\n"+
		"Members restart one at a time to trust the old and the new CA, certificates switch to the new CA, then members restart again to trust it alone.\n"+
		"It begins once no other rollout is in progress, and spec.rollout.paused holds its restarts and its switch.\n"+
		"Follow it with: kubectl get etcdcluster %s -n %s -o jsonpath='{.status.tls}'\n",
		c.Namespace, c.Name, v1alpha1.RotateCAAnnotation, request, c.Name, c.Namespace)
	return err
}
