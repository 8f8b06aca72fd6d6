// Package refusal tells a request the API server refused on its merits (the
// object is invalid, or admission forbids it) from one that failed on the
// way, and gives the API server's own words for it, so that a controller can
// put them where users look instead of only in its log.
package refusal

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Of returns the API server's message when err is a refusal: Invalid (a
// field the API server rejects, an annotation it does not accept),
// Forbidden (a quota, a missing PriorityClass, Pod Security, an admission
// policy or webhook, a missing permission) or BadRequest. Conflicts,
// timeouts and unreachable servers are not refusals: they are retried
// without a report.
func Of(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) && !apierrors.IsBadRequest(err) {
		return "", false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message, true
	}
	return err.Error(), true
}
