package etcd

import (
	"context"
	"sync"
	"time"
)

// StatusAnswer is one member's answer to Status on its own endpoint.
type StatusAnswer struct {
	Status EndpointStatus
	Err    error
}

// StatusAll asks every endpoint for its own status at once, each call under
// its own timeout (when timeout is 0, under ctx alone): a member on a lost
// node does not answer at all, and must not hold up the others, so a look
// at the members costs one timeout, not one per member. Answer i is
// endpoints[i]'s.
func StatusAll(ctx context.Context, c Client, endpoints []string, timeout time.Duration) []StatusAnswer {
	out := make([]StatusAnswer, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		wg.Go(func() {
			callCtx := ctx
			if timeout > 0 {
				var cancel context.CancelFunc
				callCtx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			st, err := c.Status(callCtx, ep)
			out[i] = StatusAnswer{Status: st, Err: err}
		})
	}
	wg.Wait()
	return out
}
