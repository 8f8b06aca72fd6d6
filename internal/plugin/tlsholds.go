package plugin

import (
	"context"
	"fmt"
	"io"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	tt "github.com/quorumctl/etcd-operator/internal/tlstransition"
)

// The two TLS holds only the user can lift: the release-plaintext
// annotation, which the second pass of turning TLS on waits for
// (design 0023), and the keep-old-ca annotation, which holds a CA rotation
// before members stop trusting the old CA (design 0020). The operator
// cannot see what clients outside it speak or trust, so both are the
// user's word; these commands say it, and tell the user what it sets off.

// refusedError is a request the cluster is not at a point to take: the
// command changes nothing and says what to wait for.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

func refusef(format string, args ...any) error {
	return &refusedError{msg: fmt.Sprintf(format, args...)}
}

// plaintextRelease is what release-plaintext does to a cluster as it stands.
type plaintextRelease int

const (
	releasePlaintextSet plaintextRelease = iota
	// releasePlaintextAlready: the annotation is set; setting it again
	// would change nothing the operator reads.
	releasePlaintextAlready
)

// decideReleasePlaintext allows the release only from the point the
// operator waits for it: a transition under way whose members all serve
// https and whose operator dials https (status.tls.transition.clientsHTTPS,
// which the operator sets when it enters ClientsMaySwitch). Before that,
// clients cannot have moved to https, so the user's word would be wrong,
// and the annotation, set already when the first pass ends, would let the
// second pass follow it at once, with no wait for clients to switch.
func decideReleasePlaintext(c *v1alpha1.EtcdCluster) (plaintextRelease, error) {
	if v := c.Annotations[v1alpha1.ReleasePlaintextAnnotation]; v != "" {
		return releasePlaintextAlready, nil
	}
	tr := transitionOf(c)
	switch {
	case tr == nil && c.Spec.TLS == nil:
		return 0, refusef("EtcdCluster %s is not turning TLS on: it has no spec.tls. Add spec.tls first (docs/tls.md, \"Turning TLS on for a running cluster\")", c.Name)
	case tr == nil:
		return 0, refusef("EtcdCluster %s has no TLS transition under way (status.tls.transition is absent): either it serves TLS alone already or the operator has not started turning TLS on; there is no plaintext to release", c.Name)
	case !tr.ClientsHTTPS:
		return 0, refusef("EtcdCluster %s is not ready to release plaintext: not every member serves https yet (phase %s, waiting for %s). Wait for phase %s, move your clients to https, then run this again",
			c.Name, orDash(tr.Phase), orDash(tr.Wait), tt.PhaseClientsMaySwitch)
	}
	return releasePlaintextSet, nil
}

// runReleasePlaintext sets v1alpha1.ReleasePlaintextAnnotation once the
// transition waits for it, and changes nothing when it is set already.
func runReleasePlaintext(ctx context.Context, env *Env, w io.Writer, name string, now time.Time) error {
	c, err := env.getCluster(ctx, name)
	if err != nil {
		return err
	}
	verdict, err := decideReleasePlaintext(c)
	if err != nil {
		return err
	}
	if verdict == releasePlaintextAlready {
		_, err := fmt.Fprintf(w, "EtcdCluster %s/%s already has %s=%s: plaintext is released, nothing changed.\n"+
			"Follow the transition with: kubectl etcd status %s -n %s\n",
			c.Namespace, c.Name, v1alpha1.ReleasePlaintextAnnotation, c.Annotations[v1alpha1.ReleasePlaintextAnnotation], c.Name, c.Namespace)
		return err
	}
	value := now.UTC().Format(time.RFC3339)
	if err := env.setAnnotations(ctx, c, map[string]string{v1alpha1.ReleasePlaintextAnnotation: value}, nil); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "Released plaintext on EtcdCluster %s/%s (%s=%s).\n"+
		"Members now restart one at a time to serve TLS alone, their peer URLs moved to https; a client still on http:// fails as its member restarts.\n"+
		"spec.rollout.paused holds the restarts. Follow it with: kubectl etcd status %s -n %s\n",
		c.Namespace, c.Name, v1alpha1.ReleasePlaintextAnnotation, value, c.Name, c.Namespace)
	return err
}

// runReleaseOldCA removes v1alpha1.KeepOldCAAnnotation. Lifting the hold is
// meaningful at any point (a hold set with no rotation under way would
// otherwise catch the next one, maybe an automatic one), so it refuses
// nothing but reports where the rotation stands, since that decides what
// the removal sets off.
func runReleaseOldCA(ctx context.Context, env *Env, w io.Writer, name string) error {
	c, err := env.getCluster(ctx, name)
	if err != nil {
		return err
	}
	held, ok := c.Annotations[v1alpha1.KeepOldCAAnnotation]
	if !ok {
		_, err := fmt.Fprintf(w, "EtcdCluster %s/%s has no %s annotation: nothing holds its CA rotation, nothing changed.\n",
			c.Namespace, c.Name, v1alpha1.KeepOldCAAnnotation)
		return err
	}
	if err := env.setAnnotations(ctx, c, nil, []string{v1alpha1.KeepOldCAAnnotation}); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "Removed %s=%s from EtcdCluster %s/%s.\n", v1alpha1.KeepOldCAAnnotation, held, c.Namespace, c.Name); err != nil {
		return err
	}
	if !rotating(c) {
		_, err := fmt.Fprintln(w, "No CA rotation is under way: the next one will run through without stopping before the old CA is dropped.")
		return err
	}
	_, err = fmt.Fprintf(w, "The CA rotation goes on: once every member serves certificates of the new CA, members restart one at a time to trust the new CA alone,\n"+
		"so every client must present a certificate of the new CA by then. spec.rollout.paused holds the restarts.\n"+
		"Follow it with: kubectl get etcdcluster %s -n %s -o jsonpath='{.status.tls}'\n", c.Name, c.Namespace)
	return err
}

// rotating: some section reports a pass of a CA rotation.
func rotating(c *v1alpha1.EtcdCluster) bool {
	s := c.Status.TLS
	if s == nil {
		return false
	}
	for _, sec := range []*v1alpha1.TLSSectionStatus{s.Peer, s.Client} {
		if sec != nil && sec.Rotation != "" {
			return true
		}
	}
	return false
}

// setAnnotations sets and removes annotations of the cluster in one merge
// patch, so that a request and the hold that goes with it reach the
// operator together: a reconcile between two patches could act on the
// request without the hold.
func (e *Env) setAnnotations(ctx context.Context, c *v1alpha1.EtcdCluster, set map[string]string, remove []string) error {
	patch := client.MergeFrom(c.DeepCopy())
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	for k, v := range set {
		c.Annotations[k] = v
	}
	for _, k := range remove {
		delete(c.Annotations, k)
	}
	if err := e.Kube.Patch(ctx, c, patch); err != nil {
		return access{verb: "patch", resource: etcdClusterResource, namespace: e.Namespace, what: "EtcdCluster " + c.Name}.explain(err)
	}
	return nil
}

func transitionOf(c *v1alpha1.EtcdCluster) *v1alpha1.TLSTransitionStatus {
	if c.Status.TLS == nil {
		return nil
	}
	return c.Status.TLS.Transition
}
