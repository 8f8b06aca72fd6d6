package plugin

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// plainError prints its own message and nothing of the error it wraps: the
// wrapped error is there for errors.Is/As and the apierrors classifiers, but
// its text ("etcdclusters.etcd.quorumctl.io \"x\" not found") would only
// repeat what the message already says.
type plainError struct {
	msg string
	err error
}

func (e *plainError) Error() string { return e.msg }
func (e *plainError) Unwrap() error { return e.err }

// usageError is a mistake on the command line; it exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errIncomplete marks a read-only command that printed what it could but
// could not reach every member; the details were printed with the output.
var errIncomplete = errors.New("incomplete result")

// access describes one Kubernetes API request, so that a refusal can name
// the exact RBAC rule that is missing.
type access struct {
	verb      string // RBAC verb
	resource  string // RBAC resource, with group and subresource
	namespace string
	what      string // the object(s) in words, for the message
}

// explain turns an API error into a message a user can act on; the original
// error stays in the chain.
func (a access) explain(err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return &plainError{
			msg: fmt.Sprintf("forbidden to %s %s in namespace %s: RBAC must allow verb %q on resource %q in that namespace (%v)",
				a.verb, a.what, a.namespace, a.verb, a.resource, err),
			err: err,
		}
	case apierrors.IsUnauthorized(err):
		return &plainError{msg: fmt.Sprintf("not logged in to the cluster: failed to %s %s in namespace %s (%v)", a.verb, a.what, a.namespace, err), err: err}
	}
	return fmt.Errorf("failed to %s %s in namespace %s: %w", a.verb, a.what, a.namespace, err)
}
