package etcdcluster

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
)

// phase is one step of a pass. Phases run in order; a phase that cannot go on
// returns an error or a requeue, never sleeps.
type phase func(ctx context.Context, s *scope) (ctrl.Result, error)

// runPhases runs every phase, whatever the others did, and keeps the soonest
// requeue. A failure in one step (a Service that belongs to someone else, a
// PodDisruptionBudget the API server refuses) must not stop the others:
// above all, self-heal runs in the membership phase. The failures are kept
// in the scope for the status, and the pass is retried soon.
func runPhases(ctx context.Context, s *scope, phases []phase) ctrl.Result {
	var result ctrl.Result
	for _, p := range phases {
		res, err := p(ctx, s)
		result = soonest(result, res)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Reconcile step failed; the other steps still run")
			s.phaseErrs = append(s.phaseErrs, err)
			result = soonest(result, ctrl.Result{RequeueAfter: requeueAfterError})
		}
	}
	return result
}

func soonest(a, b ctrl.Result) ctrl.Result {
	switch {
	case a.RequeueAfter == 0:
		return b
	case b.RequeueAfter == 0:
		return a
	case b.RequeueAfter < a.RequeueAfter:
		return b
	}
	return a
}
