// Package ratelimit bounds how long a controller waits to retry a failed
// pass.
package ratelimit

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// MaxRetryDelay is the longest a failed pass waits for its retry.
// controller-runtime's default backoff doubles up to about 16 minutes; the
// operator's timed looks (a node lost for a while, a member unschedulable
// for a while, a deadline) would wait on it, or on an unrelated event, for
// as long.
const MaxRetryDelay = 5 * time.Second

// Capped is controller-runtime's default rate limiter (per-item exponential
// backoff, and an overall token bucket), with no item waiting longer than
// MaxRetryDelay.
func Capped() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedWithMaxWaitRateLimiter(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](), MaxRetryDelay)
}
