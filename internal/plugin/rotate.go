package plugin

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// runRotateCA asks the operator to rotate the cluster's CAs by setting the
// rotate-ca annotation to a value of its own (the time), which the operator
// acts on once (design 0020). It refuses a cluster without operator-managed
// CAs, whose annotation the operator would ignore. keepOldCA sets the
// keep-old-ca hold in the same patch, so no reconcile sees the request
// without the hold.
func runRotateCA(ctx context.Context, env *Env, w io.Writer, name string, keepOldCA bool, now time.Time) error {
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
	set := map[string]string{v1alpha1.RotateCAAnnotation: request}
	if keepOldCA && c.Annotations[v1alpha1.KeepOldCAAnnotation] == "" {
		// Any non-empty value holds; this one says who set it. A hold
		// already there keeps its value, which may name its reason.
		set[v1alpha1.KeepOldCAAnnotation] = "kubectl-etcd"
	}
	if err := env.setAnnotations(ctx, c, set, nil); err != nil {
		return err
	}
	if keepOldCA {
		_, err = fmt.Fprintf(w, "Asked the operator to rotate the CAs of EtcdCluster %s/%s (%s=%s), held before the old CA is dropped (%s).\n"+
			"Members restart one at a time to trust the old and the new CA, then certificates switch to the new CA; the rotation stops there,\n"+
			"every member serving certificates of the new CA and still trusting the old one (Progressing says RolloutPaused).\n"+
			"Next: once clients that cannot reload by themselves (kube-apiserver, say) present a certificate of the new CA, release the hold with:\n"+
			"  kubectl etcd release-old-ca %s -n %s\n"+
			"Follow it with: kubectl get etcdcluster %s -n %s -o jsonpath='{.status.tls}'\n",
			c.Namespace, c.Name, v1alpha1.RotateCAAnnotation, request, v1alpha1.KeepOldCAAnnotation, c.Name, c.Namespace, c.Name, c.Namespace)
		return err
	}
	if held := c.Annotations[v1alpha1.KeepOldCAAnnotation]; held != "" {
		// A hold left from an earlier rotation holds this one too.
		if _, err := fmt.Fprintf(w, "Note: %s=%s is set, so this rotation too stops before the old CA is dropped; lift it with: kubectl etcd release-old-ca %s -n %s\n",
			v1alpha1.KeepOldCAAnnotation, held, c.Name, c.Namespace); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(w, "Asked the operator to rotate the CAs of EtcdCluster %s/%s (%s=%s).\n"+
		"Members restart one at a time to trust the old and the new CA, certificates switch to the new CA, then members restart again to trust it alone.\n"+
		"It begins once no other rollout is in progress, and spec.rollout.paused holds its restarts and its switch.\n"+
		"Follow it with: kubectl get etcdcluster %s -n %s -o jsonpath='{.status.tls}'\n",
		c.Namespace, c.Name, v1alpha1.RotateCAAnnotation, request, c.Name, c.Namespace)
	return err
}
