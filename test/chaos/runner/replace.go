package runner

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/chaos"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// claimGoneWithin bounds the wait for a deleted claim to go: it goes once
// the member's Pod has stopped, within the Pod's 30 s grace.
const claimGoneWithin = 2 * time.Minute

// deletePVC gives a member a fresh volume as a user would for a member of a
// StatefulSet: delete its claim, then its Pod. The claim goes first: while
// the Pod runs the API server only marks it (kubernetes.io/pvc-protection),
// and it is gone as soon as the Pod is; the other order would let the
// operator re-create the Pod on the old claim, which would then never go.
//
// The member keeps its name, and its peer URL is a function of the name
// (v1alpha1.PeerURL): the operator re-creates the claim, empty, and the Pod,
// so an etcd with no data starts at the address that etcd's membership still
// holds under the member's ID. That is where etcd's robustness suite's
// MemberReplace puts a member (removed, wiped, added back at its peer URL,
// restarted); here nobody re-adds it, and the member must refuse to start
// and be replaced under a new name, never serve again (RecoverReplaced).
//
// The fault is in once the old claim is gone for good, which needs no
// operator: it is injected during an operator outage too.
func (r *run) deletePVC(ctx context.Context, name string, rec *chaos.FaultRecord) error {
	ns := r.cfg.Namespace
	claims := r.env.Clientset.CoreV1().PersistentVolumeClaims(ns)
	claimName := v1alpha1.DataVolumeClaimName(name)
	claim, err := claims.Get(ctx, claimName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("failed to get the claim of %s (a Memory member has none): %w", name, err)
	}
	pod, err := r.env.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("failed to get the Pod of %s: %w", name, err)
	}
	if err := claims.Delete(ctx, claimName, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(claim.UID))}); err != nil {
		return fmt.Errorf("failed to delete claim %s: %w", claimName, err)
	}
	deleted := time.Now()
	err = r.env.Clientset.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete Pod %s after its claim: %w", name, err)
	}
	err = framework.WaitFor(ctx, claimGoneWithin, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		c, err := claims.Get(ctx, claimName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		// A claim of the same name with another UID is the operator's new,
		// empty one.
		return c.UID != claim.UID, nil
	})
	if err != nil {
		return fmt.Errorf("claim %s of %s was not gone %s after its Pod was deleted: %w", claimName, name, claimGoneWithin, err)
	}
	rec.Note = fmt.Sprintf("claim %s (volume %s) gone %s after its deletion, its Pod deleted", claimName, claim.Spec.VolumeName, time.Since(deleted).Round(100*time.Millisecond))
	return nil
}

// lossEventWithin bounds the wait for the Event of a replacement: the
// operator records it before it deletes the member, so it is there by the
// time the cluster has recovered, but the API server may show it late.
const lossEventWithin = 30 * time.Second

// checkLossReplaced checks, once the cluster has recovered, that each
// victim of delete-pvc was replaced because etcd refused to start on its
// empty volume, and adds the reason to the fault's note.
func (r *run) checkLossReplaced(ctx context.Context, victims []victim) error {
	for _, v := range victims {
		if v.fault.Kind != chaos.DeletePVC || v.before.Name == "" {
			continue
		}
		var reason string
		var bad *chaos.Violation
		err := framework.WaitFor(ctx, lossEventWithin, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
			events, err := r.remediationEvents(ctx)
			if err != nil {
				return false, err
			}
			var done bool
			reason, done, bad = chaos.CheckLossReplaced(v.before.Name, v.fault.Injected, events)
			return done, nil
		})
		if bad != nil {
			return r.violation(*bad)
		}
		if err != nil {
			return r.violation(chaos.Violation{Invariant: chaos.InvRecovered, Detail: fmt.Sprintf(
				"no Event of the operator says why %s, which lost its data, was replaced: %v", v.before.Name, err)})
		}
		v.fault.Note += "; replaced for " + reason
	}
	return nil
}

// remediationEvents are the operator's Warning Events in the run's namespace.
func (r *run) remediationEvents(ctx context.Context) ([]chaos.RemediationEvent, error) {
	list, err := r.env.Clientset.EventsV1().Events(r.cfg.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []chaos.RemediationEvent
	for _, e := range list.Items {
		if e.Type == corev1.EventTypeWarning {
			at := e.EventTime.Time
			if at.IsZero() {
				at = e.CreationTimestamp.Time
			}
			if e.Series != nil && e.Series.LastObservedTime.After(at) {
				at = e.Series.LastObservedTime.Time
			}
			out = append(out, chaos.RemediationEvent{Action: e.Action, Reason: e.Reason, Note: e.Note, At: at})
		}
	}
	return out, nil
}
