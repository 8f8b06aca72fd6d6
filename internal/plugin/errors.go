package plugin

import (
	"fmt"
	"strconv"
	"strings"

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

// access describes one Kubernetes API request, so that a refusal can name
// the exact RBAC rule that is missing.
type access struct {
	verb      string // what the request does, in words
	resource  string // RBAC resource, with group and subresource
	namespace string
	what      string // the object(s) in words, for the message
	// rbac are the RBAC verbs the request needs; just verb when empty.
	rbac []string
}

// explain turns an API error into a message a user can act on; the original
// error stays in the chain.
func (a access) explain(err error) error {
	switch {
	case apierrors.IsForbidden(err):
		verbs := a.rbac
		if len(verbs) == 0 {
			verbs = []string{a.verb}
		}
		quoted := make([]string, len(verbs))
		for i, v := range verbs {
			quoted[i] = strconv.Quote(v)
		}
		noun := "verb"
		if len(verbs) > 1 {
			noun = "verbs"
		}
		return &plainError{
			msg: fmt.Sprintf("forbidden to %s %s in namespace %s: RBAC must allow %s %s on resource %q in that namespace (%v)",
				a.verb, a.what, a.namespace, noun, strings.Join(quoted, " and "), a.resource, err),
			err: err,
		}
	case apierrors.IsUnauthorized(err):
		return &plainError{msg: fmt.Sprintf("not logged in to the cluster: failed to %s %s in namespace %s (%v)", a.verb, a.what, a.namespace, err), err: err}
	}
	return fmt.Errorf("failed to %s %s in namespace %s: %w", a.verb, a.what, a.namespace, err)
}
