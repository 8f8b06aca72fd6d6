package etcdmember

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
)

// Before an approved restart deletes a member's Pod, the Pod leaves the
// client Service: its role label, which the Service selects, goes first, and
// the Pod is deleted only once the Service's EndpointSlices no longer route
// to it. Deleted while still routed, a Pod that etcd is shutting down keeps
// receiving new connections from clients that dial the Service until the
// endpoint controller and kube-proxy catch up; those requests fail, and a
// client that retries through the Service may land on the dying member
// again. Removed first, the member finishes the requests it has, and new
// ones go to the others. (The PodDisruptionBudget selects the same label;
// its minAvailable is the quorum, so a Pod taken out of it never lets an
// eviction through that would not have gone through anyway.)

// A drain in progress is held like a restart the quorum holds back, and
// looked at again after requeueDisruption: EndpointSlices are not watched.

// drainTimeout bounds the wait for the EndpointSlices: a restart is never
// held for ever by an endpoint controller that is slow or down. Past it the
// restart goes ahead as it did before drains existed.
const drainTimeout = 15 * time.Second

// drains remembers when each Pod's drain began, by Pod UID, so that the
// timeout holds across passes. Forgetting it (an operator restart) only
// restarts the wait.
type drains struct {
	mu    sync.Mutex
	since map[types.UID]time.Time
}

// begin returns when the Pod's drain began, starting it now if it had not.
func (d *drains) begin(uid types.UID, now time.Time) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.since == nil {
		d.since = map[types.UID]time.Time{}
	}
	for k, t := range d.since {
		// A drain that was never finished (its restart was called off,
		// its member deleted) is dropped long after any wait would end.
		if now.Sub(t) > 10*drainTimeout {
			delete(d.since, k)
		}
	}
	if t, ok := d.since[uid]; ok {
		return t
	}
	d.since[uid] = now
	return now
}

func (d *drains) end(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.since, uid)
}

// routedTo reports whether any of the Service's EndpointSlices routes to the
// Pod: lists it as ready, or with an unknown readiness, which consumers take
// for ready. A Pod listed not ready receives no new connections.
func routedTo(slices []discoveryv1.EndpointSlice, p *corev1.Pod) bool {
	for _, s := range slices {
		for _, e := range s.Endpoints {
			ref := e.TargetRef
			if ref == nil || ref.Kind != "Pod" || ref.Name != p.Name || (ref.UID != "" && ref.UID != p.UID) {
				continue
			}
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				return true
			}
		}
	}
	return false
}

// drain takes the Pod out of the client Service and reports whether no
// EndpointSlice routes to it any more (or the wait has timed out).
func (r *Reconciler) drain(ctx context.Context, m *v1alpha1.EtcdMember, p *corev1.Pod) (bool, error) {
	began := r.drains.begin(p.UID, time.Now())
	if err := pod.SetRoleLabel(ctx, r.Client, p, false); err != nil {
		return false, err
	}
	var slices discoveryv1.EndpointSliceList
	// Uncached: the operator's cache holds only objects labelled with a
	// cluster, and slices are the endpoint controller's.
	err := r.reader().List(ctx, &slices, client.InNamespace(m.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: v1alpha1.ClientServiceName(m.Spec.ClusterName)})
	if err == nil && !routedTo(slices.Items, p) {
		return true, nil
	}
	// Slices that cannot be read (the operator's role predates the read)
	// hold the restart no longer than slices that are slow to change.
	if waited := time.Since(began); waited >= drainTimeout {
		ctrl.LoggerFrom(ctx).Info("The client Service may still route to the Pod; restarting it anyway", "pod", p.Name,
			"waited", waited.Round(time.Second), "listError", err)
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("failed to list the EndpointSlices of the client Service of %s: %w", m.Spec.ClusterName, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Waiting for the client Service to stop routing to the Pod before restarting it", "pod", p.Name)
	return false, nil
}

// undrain puts a Pod whose restart is held back in the client Service
// again, if its member serves clients: a hold may last, and a healthy
// member out of the Service for its length helps nobody.
func (r *Reconciler) undrain(ctx context.Context, m *v1alpha1.EtcdMember, p *corev1.Pod) error {
	r.drains.end(p.UID)
	return pod.SetRoleLabel(ctx, r.Client, p, pod.ServesClients(m))
}

func (r *Reconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}
