package etcdcluster

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
)

// phase is one step of a pass. Phases run in order; a phase that cannot go on
// returns an error or a requeue, never sleeps.
type phase func(ctx context.Context, s *scope) (ctrl.Result, error)

// runPhases runs every phase until one fails, keeping the soonest requeue.
func runPhases(ctx context.Context, s *scope, phases []phase) (ctrl.Result, error) {
	var result ctrl.Result
	for _, p := range phases {
		res, err := p(ctx, s)
		result = soonest(result, res)
		if err != nil {
			return result, err
		}
	}
	return result, nil
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
